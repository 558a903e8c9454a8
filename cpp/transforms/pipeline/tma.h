// The TMA variant of the software pipeliner (sm_90a, opt-in: the module's `tma` = 1, set by
// TESSERA_TMA): descriptor loads (`load` with attribute `tma`, carrying their tensor map and
// box coordinates) are copied by the TMA unit into the same rings, one mbarrier per slot
// tracking each stage's bytes, instead of cp.async groups. pipeline.cpp calls these.
#pragma once

#include "ir/builder.h"
#include "transforms/pipeline/schedule.h"

#include <map>
#include <string>
#include <vector>

namespace tessera::transforms::pipeline {

/// Whether the TMA plan copies `pipelined`: a 2-D descriptor load carrying its tensor map.
bool copiedByTma(const PipelinedLoad &pipelined);

/// Why `schedule`'s loads cannot use TMA in `module` ("" when they can): the module must ask
/// for it, some pipelined load must carry its tensor map, and every one that does must be
/// 2-D and have a slot in the wgmma swizzle the host encodes (min(128, row bytes), last dim
/// contiguous). The other pipelined loads must be rows of scalars (1-D: the attention
/// backward's lse and delta beside its Q and dO tiles): the same loop copies those by
/// cp.async into their rings ("mixed"; pipeline.cpp), so a few scalars no longer send the
/// tiles back to cp.async. Any other 2-D load rejects the plan.
std::string tmaRejection(const LoopSchedule &schedule, const ir::Module &module);

/// How long a debug build's mbarrier_wait spins before it fails the kernel (an assert naming
/// the wait) instead of hanging: far above any real wait, even under compute-sanitizer.
constexpr int64_t kDebugWaitTimeoutNs = 10'000'000'000;

/// The attributes of an mbarrier_wait in `module`: `timeout_ns` when the module is compiled
/// for debugging (its `debug` = 1, TESSERA_DEBUG), else none (an unbounded wait).
std::map<std::string, ir::Attribute> waitAttributes(const ir::Module &module);

/// A ring of mbarriers (one per slot), initialized with `count` arrivals per phase: 1 for the
/// "full" barriers (the issuing thread's expect_tx), the reading warps for the "empty" ones.
ir::Value *createBarriers(ir::Builder &builder, int numStages, int64_t count);

/// One stage's copies into `slot`: the expected bytes of every TMA load's tile, then one
/// tma_load per such load (copiedByTma; the others are left to the caller), all predicated on
/// `inRange`. `mapping` maps the loop's values to the iteration's.
/// With `empty` (the ring's empty barriers) the issuing thread first waits, where `inRange`
/// holds, for the phase of parity `emptyPhase` of empty[slot]: every warp released the slot
/// (mbarrier_arrive after its last read); the copies are then `released` (membar owes them no
/// barrier: the mbarriers order the slot's reads before them).
void issueTmaCopies(ir::Builder &builder, const LoopSchedule &schedule,
                    const std::vector<ir::Value *> &rings, ir::Value *barriers,
                    const std::map<ir::Value *, ir::Value *> &mapping, ir::Value *slot,
                    ir::Value *inRange, ir::Value *empty = nullptr, ir::Value *emptyPhase = nullptr,
                    std::map<std::string, ir::Attribute> waitAttrs = {});

/// The phase parity a wait expects next: `phase` flipped when `nextSlot` wrapped around to 0
/// (a barrier's phase completes once per trip around the ring).
ir::Value *nextPhase(ir::Builder &builder, ir::Value *phase, ir::Value *nextSlot);

/// The module's warps (its num_warps, 4 if absent): the arrivals of an empty barrier's phase.
int64_t moduleWarps(const ir::Module &module);

} // namespace tessera::transforms::pipeline
