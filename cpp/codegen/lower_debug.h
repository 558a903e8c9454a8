// Lowering of the debugging ops to the CUDA device runtime (codegen stage, beside the other
// lower_*.cpp files): `print` (tl.device_print) -> vprintf, `assert` (tl.device_assert) ->
// __assertfail. lower_to_llvm.cpp dispatches both ops here; lower_elementwise.cpp calls the
// overflow checks of the arithmetic marked check_overflow (transforms/check_offsets.cpp).
#pragma once

#include "codegen/lower_to_llvm.h"

namespace tessera::codegen {

/// print, assert. Throws a CompileError about `op` for what it does not support (fp8 values).
void lowerDebugOp(KernelLowering &lowering, const ir::Operation &op);

/// Where `failed` (i1) holds: __assertfail(message) at `location` ("file:line:col"), which
/// prints the message with the block and thread and fails the launch (cudaErrorAssert).
void emitAssertFailure(KernelLowering &lowering, llvm::Value *failed, const std::string &message,
                       const std::string &location);

/// One register of an addi/subi/muli marked check_overflow, through
/// llvm.s{add,sub,mul}.with.overflow; its overflow bit is or-ed into `overflowed` (null: none
/// yet).
llvm::Value *emitCheckedArithmetic(KernelLowering &lowering, const ir::Operation &op,
                                   llvm::Value *lhs, llvm::Value *rhs, llvm::Value *&overflowed);

/// Fails a device assertion naming `op` and its source line where `overflowed` is set.
void emitOverflowAssert(KernelLowering &lowering, const ir::Operation &op, llvm::Value *overflowed);

} // namespace tessera::codegen
