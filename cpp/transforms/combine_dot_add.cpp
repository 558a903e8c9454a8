// combine_dot_add: `acc + dot(a, b, 0)` becomes `dot(a, b, acc)` (as Triton's combine pass).
//
//   %p = dot %a, %b, %zeros : (...) -> tensor<128x128xf32>     // %zeros: constant 0.0
//   %s = addf %acc, %p : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
// becomes
//   %s = dot %a, %b, %acc : (...) -> tensor<128x128xf32>
//
// Why: `acc += tl.dot(a, b)` is how kernels are usually written, and without the rewrite the
// product lives in its own accumulator registers beside `acc` (a second 128 x 128 fp32 tile:
// 300 bytes of spills on sm_90a at 128 x 128 x 64 with 4 warps), then is added element by
// element. The tensor cores add into `acc` for free. Not bit-identical (the products are
// rounded into `acc` step by step instead of summed first), which is why this is not in
// canonicalize; it runs in the "tir" pipeline, so the interpreter computes what the GPU does.
// Only when the dot's accumulator is a zero constant, the sum is its only use, and both are
// in one block (a dot hoisted out of a loop stays there).
#include "ir/pass_manager.h"
#include "transforms/constant_folding.h"

namespace tessera::ir {

namespace {

/// The dot among `add`'s operands that can take the other operand as its accumulator.
Operation *foldableDot(Operation *add, unsigned &other) {
  for (unsigned i = 0; i < 2; ++i) {
    Operation *dot = add->operand(i)->definingOp();
    if (!dot || dot->code() != OpCode::Dot || dot->parentBlock() != add->parentBlock() ||
        !isZeroConstant(dot->operand(2)))
      continue;
    if (dot->result()->users().size() != 1 || !(dot->result()->type() == add->result()->type()))
      continue;
    other = 1 - i;
    return dot;
  }
  return nullptr;
}

void runCombineDotAdd(Module &module) {
  std::vector<Operation *> adds;
  module.walk([&](Operation *op) {
    if (op->code() == OpCode::AddF)
      adds.push_back(op);
  });
  for (Operation *add : adds) {
    unsigned other = 0;
    Operation *dot = foldableDot(add, other);
    if (!dot)
      continue;
    // The dot moves to the sum's place: its new accumulator may be defined after it.
    Value *accumulator = add->operand(other);
    std::unique_ptr<Operation> moved = dot->parentBlock()->remove(dot);
    Operation *placed = add->parentBlock()->insert(add, std::move(moved));
    placed->setOperand(2, accumulator);
    add->result()->replaceAllUsesWith(placed->result());
    add->erase();
  }
}

} // namespace

TESSERA_REGISTER_PASS(combine_dot_add, "combine_dot_add",
                      "fold acc + dot(a, b, 0) into dot(a, b, acc)", runCombineDotAdd);

} // namespace tessera::ir
