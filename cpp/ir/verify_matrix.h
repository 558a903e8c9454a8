// Verifier rules of the tensor-core and shared-memory ops (dot, trans, local_alloc,
// local_load, async_copy, async_commit_group, async_wait, barrier); verifier.cpp calls them
// from its per-op switch. Kept apart so that these ops read as one unit.
#pragma once

#include "ir/ir.h"

namespace tessera::ir {

/// Checks the operand/result/attribute contract written beside the op in ops.def. Throws a
/// CompileError naming the op (emitError) when it is broken; no-op for other ops.
void verifyTensorCoreOp(const Operation &op);

/// Is this op one of those verifyTensorCoreOp checks?
bool isTensorCoreOp(OpCode code);

/// A tensor type whose encoding is a SharedEncoding: a handle to a shared-memory buffer.
bool isSharedBuffer(const Type &type);

} // namespace tessera::ir
