// Warp specialization of a TMA-pipelined loop (sm_90a; docs/perf/warp_specialization.md): one
// extra warpgroup, placed after the kernel's num_warps warps (so every layout, which maps
// thread ids 0 .. num_warps * 32 - 1, is unchanged), issues every iteration's copies; the
// num_warps consumer warps run the kernel with the copies removed. At the func's entry:
//
//   %ring = local_alloc ; %full = local_alloc ; %empty = local_alloc
//   mbarrier_init %full {count = 1} ; mbarrier_init %empty {count = num_warps}
//   warp_specialize {producer_warps = 4, producer_registers = 40, consumer_registers = R} {
//     (the scalar backward slice of the loop bounds and box coordinates: program ids, kernel
//      arguments, scalar arithmetic)
//     for %k = lb to ub step s iter(<carried values the coordinates read>, %w = 0, %e = 1) {
//       mbarrier_wait %empty, %w, %e, %true     // every consumer warp released slot w
//       mbarrier_expect_tx %full, %w ; tma_load ... %full ...
//       yield ..., (w + 1) % S, e ^ (wrapped) }
//     yield }
//   ... the kernel; its loop: mbarrier_wait %full, %r, %phase; the reads; mbarrier_arrive
//       %empty (once the wgmma reading the slot retired) ...
//
// pipeline.cpp decides and rewrites the consumers' loop; this file builds the producer.
#pragma once

#include "ir/builder.h"
#include "transforms/pipeline/schedule.h"

#include <string>
#include <vector>

namespace tessera::transforms::pipeline {

/// Why `schedule`'s loop (pipelined with TMA) is not warp-specialized ("" when it is): it
/// must ask for it (the loop's `warp_specialize` = 1, from tl.range(warp_specialize=True),
/// or the module's `warp_specialize` = 1, TESSERA_WARP_SPECIALIZE), sit at the top level of
/// its func (the role split happens at kernel entry), be the func's only specialized loop,
/// leave room for a producer warpgroup (num_warps a multiple of 4, at most 16), and the
/// producer must compute its box coordinates and bounds from program ids, kernel arguments
/// and scalar arithmetic alone (device tensor maps included: it writes its own copies).
std::string specializationRejection(const LoopSchedule &schedule, const ir::Module &module);

/// Builds the producer (the warp_specialize op and its region, above) at `builder`, which is
/// at the func's entry after the rings and barriers were created.
void buildProducer(ir::Builder &builder, const LoopSchedule &schedule,
                   const std::vector<ir::Value *> &rings, ir::Value *full, ir::Value *empty,
                   const ir::Module &module);

/// setmaxnreg's counts: the producer keeps 40 registers a thread; the consumers take what the
/// register file (64 K) has left, at most 256, in multiples of 8.
constexpr int64_t kProducerRegisters = 40;
int64_t consumerRegisters(int64_t consumerWarps);

} // namespace tessera::transforms::pipeline
