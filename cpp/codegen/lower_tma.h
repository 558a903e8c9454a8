// The TMA and mbarrier ops (mbarrier_init, mbarrier_expect_tx, tma_load, mbarrier_wait,
// mbarrier_inval) and the kernel's tensor-map parameters: lower_tma.cpp.
#pragma once

#include "codegen/lower_to_llvm.h"

namespace tessera::codegen {

/// Lowers `op` when it is one of the ops above and returns true; false otherwise.
bool lowerTmaOp(KernelLowering &lowering, const ir::Operation &op);

/// The func's `tensormaps` arguments become 64-byte-aligned 128-byte __grid_constant__
/// parameters (byval) whose generic address the kernel uses as the ptr<i8> argument.
void addTensorMapParameters(const ir::Operation &func, llvm::Function &function);

} // namespace tessera::codegen
