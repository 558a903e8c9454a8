// Lowering of the debugging ops to the CUDA device runtime (codegen stage, beside the other
// lower_*.cpp files): `print` (tl.device_print) -> vprintf, `assert` (tl.device_assert) ->
// __assertfail. lower_to_llvm.cpp dispatches both ops here.
#pragma once

#include "codegen/lower_to_llvm.h"

namespace tessera::codegen {

/// print, assert. Throws a CompileError about `op` for what it does not support (fp8 values).
void lowerDebugOp(KernelLowering &lowering, const ir::Operation &op);

/// Where `failed` (i1) holds: __assertfail(message) at `location` ("file:line:col"), which
/// prints the message with the block and thread and fails the launch (cudaErrorAssert).
void emitAssertFailure(KernelLowering &lowering, llvm::Value *failed, const std::string &message,
                       const std::string &location);

} // namespace tessera::codegen
