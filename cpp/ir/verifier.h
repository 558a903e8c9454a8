// The verifier: structural and type rules of every op (operand counts, shapes, element types,
// terminators, region arguments, dominance within structured regions). Run by the pass manager
// after every pass; throws CompileError naming the op and its location.
#pragma once

#include "ir/ir.h"

namespace tessera::ir {

void verify(const Module &module);
void verify(const Operation &op);

} // namespace tessera::ir
