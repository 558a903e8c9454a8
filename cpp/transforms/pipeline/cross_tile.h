// Cross-tile prefetch: a TMA-pipelined loop nested in the tile loop of a persistent kernel
// (Triton's persistent matmul: `for tile_id in range(start, tiles, NUM_SMS): ... for k ...`)
// keeps copying across the tile boundary, as Triton's `tl.range(flatten=True)` does by fusing
// the two loops. Without it every tile drained its ring: the last S - 1 steps copied nothing,
// the epilogue ran, and the next tile's first step waited a whole TMA latency for copies
// issued only after the epilogue (plus the barriers' init and inval, with their bar.syncs).
//
// With S slots and D = S - 1, numbering the pipelined loop's iterations over all tiles
// (g = iterations done before this tile, carried by the tile loop; n = the loop's trip count,
// the same for every tile, computed before the tile loop):
//
//   rings, mbarrier_init                                  (before the tile loop, once)
//   for %t = lb to ub step s iter(..., %g = 0) {
//     <the tile values the copies need, for %t + s>       (cloned from the tile loop's body)
//     stage j < D: issued here where j < n and (g == 0 or j < D - n), into slot (g + j) % S
//       after the wait for its release (the previous tile's prefetch issued the others)
//     for %k ... iter(..., %r = g % S, %w = (g + D) % S, %phase, %emptyPhase) {
//       ... step k + D: this tile's if in range, else the next tile's step k + D - n
//           (its values selected), if the tile loop has a next iteration ...
//     }
//     [the last step's slot released: with products in flight, step k releases step k - 1's]
//     <epilogue>                                          (the next tile's copies land meanwhile)
//     yield ..., %g + n }
//   mbarrier_inval                                        (after the tile loop)
//
// Phases come from the global numbering ((g + j) / S), so stages issued out of order (a
// prologue stage after the previous tile prefetched later ones) wait for the right phase.
#pragma once

#include "ir/builder.h"
#include "transforms/pipeline/schedule.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tessera::transforms::pipeline {

/// What a cross-tile pipelined loop needs from its tile loop.
struct CrossTilePlan {
  ir::Operation *outer = nullptr; // the tile loop
  /// The ops that compute the copies' coordinates for an iteration ahead: the schedule's
  /// ahead ops that the tma loads' map and coordinates depend on (body order).
  std::vector<ir::Operation *> aheadOps;
  /// Ops of the tile loop's body (body order) computing, from its induction variable and
  /// values defined outside it, the tile values the ahead ops read.
  std::vector<ir::Operation *> tileOps;
  /// Values of the tile loop's body the ahead ops read (the induction variable or tileOps').
  std::vector<ir::Value *> tileValues;
  std::string reason; // why not (empty: the plan applies)
};

/// The plan for `schedule`'s loop, to be pipelined with TMA (not warp-specialized): it must
/// sit directly in the body of a `for` (the tile loop) with a constant positive step, both
/// with i32 induction variables; its bounds must not depend on the tile loop; its copies'
/// coordinates must depend on the tile loop only through scalar pure ops of its induction
/// variable (no loop-carried recurrence of their own); and its rings must fit in shared
/// memory beside what the tile loop's body needs (they stay live across the epilogue).
CrossTilePlan crossTilePlan(const LoopSchedule &schedule);

using Mapping = std::map<ir::Value *, ir::Value *>;

/// Clones `ops` at the builder; `mapping` holds the values they read that change (the
/// iteration's) and receives the clones' results. A scalar load among them (an index read)
/// is masked by `inRange`: iterations past the end read nothing (0).
void cloneAheadOps(ir::Builder &builder, const std::vector<ir::Operation *> &ops, Mapping &mapping,
                   ir::Value *inRange);

/// Issues one stage: (builder, mapping of the ahead ops' inputs, slot, in range, parity of
/// the slot's release to wait for).
using IssueStage =
    std::function<void(ir::Builder &, const Mapping &, ir::Value *, ir::Value *, ir::Value *)>;

/// The state of one tile's iteration, made by beginCrossTile.
struct CrossTile {
  const CrossTilePlan *plan = nullptr;
  ir::Value *done = nullptr;        // g: the loop's iterations in the tiles before this one
  ir::Value *iterations = nullptr;  // n: its trip count (every tile's)
  ir::Value *nextInRange = nullptr; // the tile loop has a next iteration
  Mapping nextTile;                 // tile value -> its value in the next iteration
};

/// Adds g to the tile loop's carried values (its yield gets g + n), computes n before the
/// tile loop and the next tile's values before `loop`, and issues the D stages of this
/// tile that the previous one did not (through `issue`, before `loop`).
CrossTile beginCrossTile(const CrossTilePlan &plan, const LoopSchedule &schedule,
                         const IssueStage &issue);

/// The slot and parities at the loop's entry from g: the read slot g % S and its phase
/// (g / S) & 1, the write slot (g + D) % S and the parity of its release, the phase before
/// ((g + D) / S & 1) ^ 1. `at` is before the loop.
struct RingState {
  ir::Value *readSlot, *readPhase, *writeSlot, *emptyPhase;
};
RingState ringStateAt(ir::Builder &at, const CrossTile &tile, int numStages);

/// In the loop, for the step D ahead at `aheadIv` (its induction variable): the mapping of
/// the ahead ops' inputs (this tile's, or the next tile's step aheadIv - n * step where
/// aheadIv is past the loop's end) and whether that step exists (returned).
ir::Value *aheadAcrossTiles(ir::Builder &at, const CrossTile &tile, const LoopSchedule &schedule,
                            ir::Value *aheadIv, Mapping &mapping);

} // namespace tessera::transforms::pipeline
