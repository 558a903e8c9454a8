// membar: barrier insertion from shared-memory read/write intervals, on the structured tile
// IR (the pass over a module: transforms/membar.cpp). Runs after allocate_shared (it reads
// the offsets) and before codegen, which lowers each `barrier` op to bar.sync 0; the
// lowerings emit no barriers of their own except the one inside an op that writes its scratch
// and then reads it back (see below).
#pragma once

#include "analysis/shared_access.h"
#include "ir/ir.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::analysis {

/// What a point of the program knows about shared memory: the bytes read and written since
/// the last barrier (by some thread: other threads may not have seen them), the cp.async
/// copies in flight (their writes land at the async_wait that retires their group), and,
/// when wgmma groups may stay in flight past barriers, the bytes each such group may still
/// read (a wgmma reads its shared operands asynchronously, until its group is waited for).
struct BarrierState {
  ByteRanges reads, writes;
  std::vector<ByteRanges> asyncGroups; // committed groups, oldest first
  ByteRanges asyncUncommitted;         // issued since the last commit
  /// wgmma groups not known complete in every warp (no barrier waited for them), oldest
  /// first; each as the accesses of its operand tiles.
  std::vector<std::vector<SharedAccess>> wgmmaGroups;
  /// The scratch of TMA stores and reductions whose bulk copy may still read it (plan step 8):
  /// the issuing thread has not waited for its bulk groups since.
  ByteRanges bulkReads;

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
/// With `wgmmaInFlight` (the module's wgmma_pipeline, see wgmmaPipelining), a barrier need not
/// wait for every wgmma group (codegen's default): each barrier gets `wgmma_pending = N`,
/// the newest groups it may leave in flight (`wgmma.wait_group N` before the bar.sync).
/// 5. A wgmma dot starts a group that reads its shared operands (a ring slot through a slot
///    counter: shared_access.h) until a barrier waits for it: those reads are the group's, not
///    plain reads (its local_loads read nothing themselves). A barrier op already in the IR
///    keeps its `wgmma_pending` (absent: 0, every group).
/// 6. A write that may overlap a group's reads needs a barrier that waits for that group and
///    the older ones: N = the groups newer than the newest such group. A barrier placed for a
///    plain hazard waits for none (N = all groups).
///    With `innerKeep` (the module's wgmma_inner_keep) the barrier inside an op that stages
///    through scratch keeps groups by the same rule (attribute `inner_wgmma_pending`, read by
///    the wgmma_waits pass); else it waits for every group.
/// 7. Across a loop's back edge each slot named by that loop's counters steps back by one;
///    after the loop they name the whole ring.
/// 8. A TMA store or reduction (a `store` / `atomic_rmw` with `tma` that codegen stages in its
///    scratch, bulkDeferrable) gets `bulk_deferred`: its issuing thread commits the bulk copy
///    without waiting for it to read the scratch, which stays a pending bulk read. The first
///    write that may overlap it (in a later iteration too) gets a barrier with `bulk_wait`
///    (the issuer's cp.async.bulk.wait_group.read 0, then bar.sync), and a func that may end
///    with one pending waits before its return: the copy reads the scratch in the background
///    while the code that follows runs (the next K loop of a persistent matmul, the next step
///    of a loop that reduces a tile per step). Not in a func with a warp_specialize region.
int insertBarriers(ir::Operation &func, bool wgmmaInFlight = false, bool innerKeep = false);

/// Whether membar defers the bulk-read wait of `op` (plan step 8): a TMA store or reduction
/// that codegen stages in its scratch (analysis::tmaStoreTile; for atomic_rmw a kind the TMA
/// reduces, tmaReduction), with its scratch allocated.
bool bulkDeferrable(const ir::Operation &op);

/// Whether the module asks for wgmma groups to stay in flight past barriers and back edges:
/// its `wgmma_pipeline` (with `wgmma_overlap`, on when absent).
bool wgmmaPipelining(const ir::Module &module);

} // namespace tessera::analysis
