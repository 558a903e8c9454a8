// Verifier rules of the TMA and mbarrier ops (ops.def: mbarrier_*, tma_load) and of a `load`
// that carries its tensor map (attribute `tma`); verifier.cpp calls them from its switch.
#pragma once

#include "ir/ir.h"

namespace tessera::ir {

/// Checks the contract written beside the op in ops.def (emitError when broken).
void verifyTmaOp(const Operation &op);

/// A `load` with attribute `tma`: (ptr, mask, other, tensormap, coords...) with one i32
/// coordinate per dim of the result and a ptr<i8> tensor map.
void verifyTmaLoadOperands(const Operation &op);

/// A `store` with attribute `tma` (TESSERA_TMA_STORE), or an `atomic_rmw` with it (a
/// descriptor reduction, TESSERA_TMA_REDUCE): (ptr, value, mask, tensormap, coords...) with
/// one i32 coordinate per dim of the descriptor and a ptr<i8> tensor map.
void verifyTmaStoreOperands(const Operation &op);

/// The number of operands of a `load` before its tensor-map operands (3 with `tma`, else all).
unsigned plainLoadOperands(const Operation &op);

} // namespace tessera::ir
