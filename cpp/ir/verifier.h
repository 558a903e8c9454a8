// The verifier: structural and type rules of every op (operand counts, shapes, element types,
// terminators, region arguments, dominance within structured regions). Run by the pass manager
// after every pass; throws CompileError naming the op and its location.
#pragma once

#include "ir/ir.h"

namespace tessera::ir {

void verify(const Module &module);
void verify(const Operation &op);

/// The rule that checks one op's contract (ops.def), by op code.
struct VerifierRule {
  const char *name; // the function's name, e.g. "verifyMathOp"
  void (*check)(const Operation &op);
};
/// The op's rule; nullptr for an op without one (ops.def's NO_RULE: its enclosing op checks it).
const VerifierRule *verifierRule(OpCode code);

namespace detail {
/// Rules of `reduce` and `scan` (verify_reduction.cpp), called by verify().
void verifyReductionOp(const Operation &op);
void verifyReductionEncodings(const Operation &op);
/// Rules of the math ops (verify_math.cpp), called by verify().
void verifyMathOp(const Operation &op);
void verifyExternElementwise(const Operation &op);
/// Rules of the atomics (verify_atomic.cpp), called by verify().
void verifyAtomicOp(const Operation &op);
} // namespace detail

} // namespace tessera::ir
