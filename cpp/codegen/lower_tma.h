// The TMA and mbarrier ops (mbarrier_init, mbarrier_expect_tx, tma_load, mbarrier_wait,
// mbarrier_inval) and the kernel's tensor-map parameters: lower_tma.cpp.
#pragma once

#include "codegen/lower_to_llvm.h"

namespace tessera::codegen {

/// Lowers `op` when it is one of the ops above and returns true; false otherwise.
bool lowerTmaOp(KernelLowering &lowering, const ir::Operation &op);

/// A TMA store (TESSERA_TMA_STORE: a `store` with `tma` whose tile analysis::tmaStoreTile
/// gives, with its scratch allocated): stages the value in the scratch in the map's swizzle,
/// then one thread copies each box to global memory with cp.async.bulk.tensor and waits until
/// the scratch has been read. Returns false (nothing emitted) for any other store: the caller
/// lowers it as the masked pointer store, which means the same (the TMA clips the box at the
/// tensor's bounds as the mask does).
bool lowerTmaStore(KernelLowering &lowering, const ir::Operation &op);

/// A TMA reduction (TESSERA_TMA_REDUCE: an `atomic_rmw` with `tma`, a descriptor's
/// atomic_add/min/max/and/or/xor, whose tile analysis::tmaStoreTile gives and whose kind and
/// type analysis::tmaReduction maps, with its scratch allocated): the TMA store's sequence
/// with cp.reduce.async.bulk.tensor. False (nothing emitted) otherwise: the caller lowers the
/// masked pointer atomic, which means the same.
bool lowerTmaReduce(KernelLowering &lowering, const ir::Operation &op);

/// A `barrier` with `bulk_wait` (membar's plan step 8): the issuing thread waits until its
/// deferred TMA stores and reductions have read their scratch, before the bar.sync.
void emitBulkReadWait(KernelLowering &lowering);

/// The func's `tensormaps` arguments become 64-byte-aligned 128-byte __grid_constant__
/// parameters (byval) whose generic address the kernel uses as the ptr<i8> argument.
void addTensorMapParameters(const ir::Operation &func, llvm::Function &function);

} // namespace tessera::codegen
