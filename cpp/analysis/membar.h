// membar: barrier insertion from shared-memory read/write intervals, on the structured tile
// IR (the pass over a module: transforms/membar.cpp). Runs after allocate_shared (it reads
// the offsets) and before codegen, which lowers each `barrier` op to bar.sync 0; the
// lowerings emit no barriers of their own except the one inside an op that writes its scratch
// and then reads it back (see below).
#pragma once

#include "ir/ir.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::analysis {

/// A half-open byte interval [begin, end) of shared memory.
struct ByteRange {
  int64_t begin = 0, end = 0;
  bool operator==(const ByteRange &other) const { return begin == other.begin && end == other.end; }
};

/// A set of byte ranges, kept sorted and merged (so that equal sets compare equal).
class ByteRanges {
public:
  void add(ByteRange range);
  void add(const ByteRanges &other);
  bool overlaps(ByteRange range) const;
  bool empty() const { return ranges_.empty(); }
  void clear() { ranges_.clear(); }
  const std::vector<ByteRange> &ranges() const { return ranges_; }
  bool operator==(const ByteRanges &other) const { return ranges_ == other.ranges_; }
  std::string str() const;

private:
  std::vector<ByteRange> ranges_;
};

/// What a point of the program knows about shared memory: the bytes read and written since
/// the last barrier (by some thread: other threads may not have seen them), and the cp.async
/// copies in flight (their writes land at the async_wait that retires their group).
struct BarrierState {
  ByteRanges reads, writes;
  std::vector<ByteRanges> asyncGroups; // committed groups, oldest first
  ByteRanges asyncUncommitted;         // issued since the last commit

  bool operator==(const BarrierState &other) const;
  /// Everything either path may have left pending (control-flow merge).
  static BarrierState join(const BarrierState &a, const BarrierState &b);
};

/// Inserts `barrier` ops into `func` (after allocate_shared) where a read-after-write,
/// write-after-read or write-after-write on overlapping bytes by different threads could
/// happen. Returns how many it inserted. Plan:
/// 1. Walk each block in order with a BarrierState; a `barrier` op clears reads and writes.
/// 2. Each op's accesses: local_load reads its buffer (and the dot that consumes it reads it
///    again: the ldmatrix instructions are emitted there); local_alloc with a source writes
///    its buffer; async_copy writes its ring at issue (checked for write-after-read and
///    write-after-write) but its bytes count as written only at the async_wait that retires
///    its group; an op with scratch (scratch_offset) writes it, synchronizes internally, and
///    reads it, so afterwards only its own reads are pending. Ring slots are dynamic: a ring
///    counts as a whole.
/// 3. Before an access that conflicts with the pending set, insert a barrier.
/// 4. if: both arms from the same state, then the join; for / while: iterate the body from
///    join(entry, end of body) until it no longer changes (the back edge), then insert with
///    that state; the exit state also joins the zero-trip path.
int insertBarriers(ir::Operation &func);

} // namespace tessera::analysis
