// Device-side tensor maps (global_scratch, tensormap_create) and the kernel's global-scratch
// parameter: lower_tensormap.cpp.
#pragma once

#include "codegen/lower_to_llvm.h"

namespace tessera::codegen {

/// Lowers `op` when it is global_scratch or tensormap_create and returns true; else false.
bool lowerTensorMapOp(KernelLowering &lowering, const ir::Operation &op);

/// A func with attribute `global_scratch` (bytes per program) takes one more parameter, after
/// its arguments: the base of the launch's global scratch (a ptr addrspace(1), 128-byte
/// aligned), which the launcher allocates through tessera.set_allocator (Triton's
/// `global_scratch` parameter). Appends its type to `paramTypes`.
void addGlobalScratchParameter(const ir::Operation &func, llvm::LLVMContext &context,
                               std::vector<llvm::Type *> &paramTypes);

} // namespace tessera::codegen
