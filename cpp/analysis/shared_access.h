// Shared-memory accesses as membar sees them: byte ranges, and for the slots of a ring (a
// local_alloc whose leading dim indexes slots) which slot, relative to the loop iteration, so
// that the slot an in-flight wgmma reads can be told from the slot a copy overwrites.
//
// The pipeliner indexes its rings with slot counters: carried i32 values that start at a
// constant and step by one modulo the ring's depth,
//   for ... iter(%r = 0, %w = S - 1) { ... yield select(%r + 1 == S, 0, %r + 1), ... }
// so at iteration t, %r is slot t mod S and %w slot (t + S - 1) mod S: never the same slot.
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
  bool overlaps(const ByteRange &other) const { return begin < other.end && other.begin < end; }
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

/// The slot an access touches: `(offset + t) mod stages` at iteration t of `loop`, or unknown
/// (`loop` null: any slot, the whole ring).
struct RingSlot {
  const ir::Operation *loop = nullptr;
  int64_t stages = 0;
  int64_t offset = 0;

  bool known() const { return loop != nullptr; }
  bool operator==(const RingSlot &other) const {
    return loop == other.loop && stages == other.stages && offset == other.offset;
  }
};

/// The slot that `slot` (an i32 slot operand) names: a slot counter of its loop (above), else
/// unknown.
RingSlot ringSlotOf(const ir::Value *slot);

/// Bytes of shared memory, and the ring slot when they are a ring's (the range is then the
/// whole ring's).
struct SharedAccess {
  ByteRange range;
  RingSlot slot;

  bool operator==(const SharedAccess &other) const {
    return range == other.range && slot == other.slot;
  }
};

/// Whether `a` and `b` may touch the same bytes: their ranges overlap, unless both are slots
/// of the same ring named by counters of one loop that differ at every iteration.
bool mayOverlap(const SharedAccess &a, const SharedAccess &b);

/// `access` as seen one iteration of `loop` later: the same slot is one counter step behind.
SharedAccess stepBack(SharedAccess access, const ir::Operation *loop);

/// `access` once `loop` has exited: its counters say nothing any more (the whole ring).
SharedAccess forgetLoop(SharedAccess access, const ir::Operation *loop);

/// Whether `op` is a dot on wgmma (an #mma version 3 result): it reads its shared operands
/// asynchronously, until its group is waited for.
bool isWgmmaDot(const ir::Operation &op);

/// Whether `op` leaves its committed wgmma group in flight: a wgmma dot, except one that adds
/// partial sums of 8-bit products into f32 (max_num_imprecise_acc <= K), which waits for each
/// partial inside its own lowering (codegen/lower_matrix_wgmma.cpp, impreciseAccumulation).
bool leavesWgmmaGroup(const ir::Operation &op);

/// Whether the wgmma_waits pass waits for every group at `op` (a top-level op of a loop body):
/// control flow, debug output, an op with a barrier of its own (shared scratch, mbarrier
/// setup), a barrier membar did not let keep any group in flight. Reduce and scan combiners
/// are straight-line code (only their scratch, across warps, drains).
bool drainsWgmmaGroups(const ir::Operation &op);

/// The carried values of a `for` whose wgmma group may stay in flight across its back edge:
/// the indices (among its yielded values, in body order) of the products yielded straight
/// from a top-level wgmma dot of its body, once, whose next-iteration value is only the
/// accumulator of wgmma dots (a chained accumulator needs no wait). Another use (attention's
/// `acc * alpha`) would read the registers of a product ptxas sees in flight across the back
/// edge, and ptxas then serializes every wgmma of the kernel (C7514).
/// `rescaled` (module attribute wgmma_carry_rescaled): also a product the next iteration
/// reads otherwise (the rescale), then retired by the wait before that reader, as Triton's
/// loops do: the pipeliner then issues the step's copies after its last ring product
/// (docs/perf/triton_parity.md); not one whose A operand (through layout conversions) is a
/// value the loop carries, as P in the attention forward's OVERLAP order: the next step's
/// value takes its registers at the back edge while the product still reads them.
std::vector<unsigned> carriedWgmmaAccumulators(const ir::Operation &loop, bool rescaled = false);

/// Whether the module asks for rescaled products carried across back edges
/// (knobs.wgmma_carry_rescaled; with wgmma_pipeline).
bool carriesRescaledProducts(const ir::Module &module);

/// Adds `access` to `set` unless it is there already (sets of a few accesses: a vector).
void addAccess(std::vector<SharedAccess> &set, const SharedAccess &access);

} // namespace tessera::analysis
