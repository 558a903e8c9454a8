// The software pipeliner's schedule of one `for` loop, as a plain table that tests read.
//
// Two stages, numStages - 1 iterations apart: stage 0 holds the global loads that feed dots
// (they become cp.async copies into numStages-slot rings) with the address and mask
// computations they need, including the recurrences that advance pointers from one iteration
// to the next; every other op of the body is in the last stage. pipeline.cpp rewrites the
// loop from the schedule; scheduleLoop decides what can be pipelined and why not.
#pragma once

#include "ir/ir.h"
#include "layout/encoding.h"

#include <string>
#include <vector>

namespace tessera::transforms::pipeline {

/// A conversion of a pipelined tile into an #mma dot-operand layout, read straight from the
/// ring by a local_load in that layout; `transposed` when it converts a `trans` of the tile
/// (attention's Kᵀ): the local_load then reads the slot transposed.
struct OperandRead {
  ir::Operation *convert;
  bool transposed;
};

struct PipelinedLoad {
  ir::Operation *load;
  /// Its users, as conversions into dot-operand layouts (directly or through `trans` ops).
  /// Empty when the tile has other users: a local_load in the load's own layout then takes
  /// the load's place.
  std::vector<OperandRead> reads;
  /// The `trans` ops between the load and some of its conversions (erased with them).
  std::vector<ir::Operation *> transposes;
  /// A 1-D tile's users when all are convert_layouts: each becomes a local_load of the slot in
  /// its result's layout.
  std::vector<ir::Operation *> conversions;
  /// The layout of one ring slot, of the tile's shape.
  EncodingPtr slotEncoding;
};

struct LoopSchedule {
  ir::Operation *loop = nullptr;
  int numStages = 1;
  std::vector<PipelinedLoad> loads;
  /// Stage 0: ops of the body, in body order, that compute the loads' operands for an
  /// iteration numStages - 1 ahead, and the updates of the carried values they read.
  std::vector<ir::Operation *> aheadOps;
  /// Indices (into the loop's carried values) of the values the ahead ops read: carried a
  /// second time, numStages - 1 iterations ahead.
  std::vector<unsigned> aheadCarried;
  /// Why the loop is not pipelined (empty when it is).
  std::string reason;

  bool isPipelined() const { return reason.empty() && !loads.empty(); }
  /// The table: one line per op of the body, "stage <s>: <op name> <result>", then the
  /// ring of each load, e.g.
  ///   stage 0: addptr %12
  ///   stage 0: load %15 -> ring 0 (3 x 128x32xf16)
  ///   stage 2: dot %18
  std::string str() const;
};

/// The number of stages asked for `loop`: its `num_stages` attribute (tl.range), else the
/// module's `num_stages` (the launch option), else 1.
int requestedStages(const ir::Operation &loop, const ir::Module &module);

/// The schedule of `loop` with `numStages` stages (>= 2 to pipeline anything). `tma`: the
/// loads will be copied by the TMA unit if tmaRejection (tma.h) accepts the schedule, so the
/// descriptor loads that carry tensor maps need none of cp.async's conditions; a caller whose
/// TMA schedule is rejected schedules again without it.
LoopSchedule scheduleLoop(ir::Operation *loop, int numStages, bool tma = false);

} // namespace tessera::transforms::pipeline
