// The verifier: structural and type rules of every op (operand counts, shapes, element types,
// terminators, region arguments, dominance within structured regions). Run by the pass manager
// after every pass; throws CompileError naming the op and its location.
#pragma once

#include "ir/ir.h"

namespace tessera::ir {

void verify(const Module &module);
void verify(const Operation &op);

namespace detail {
/// Rules of `reduce` and `scan` (verify_reduction.cpp), called by verify().
void verifyReductionOp(const Operation &op);
void verifyReductionEncodings(const Operation &op);
/// Rules of the math ops and the atomics (verify_math.cpp), called by verify().
void verifyMathOp(const Operation &op);
void verifyExternElementwise(const Operation &op);
void verifyAtomicOp(const Operation &op);
} // namespace detail

} // namespace tessera::ir
