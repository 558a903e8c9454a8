// licm: loop-invariant code motion on the tile IR, run after cse and dce. Hoists pure ops out
// of `for` and `while` bodies when every operand is defined outside the loop. Inner loops go
// first, so an op can climb out of a whole loop nest.
//
//   for %lb, %ub, %step, %acc : (...) -> f32 {
//   ^bb(%i: i32, %a: f32):
//     %s = mulf %x, %y : (f32, f32) -> f32      // %x, %y defined above the loop
//     %t = addf %a, %s : (f32, f32) -> f32
//     yield %t : (f32) -> ()
//   }
// becomes
//   %s = mulf %x, %y : (f32, f32) -> f32
//   for ... { %t = addf %a, %s ...; yield %t }
//
// A hoisted op runs even when the loop runs zero times, so only ops that cannot fault or
// produce undefined behaviour move: integer division and remainder stay unless the divisor is
// a constant other than 0 (and other than -1 for the signed ones, since INT_MIN / -1
// overflows).
#include "ir/pass_manager.h"
#include "transforms/constant_folding.h"

namespace tessera::ir {

namespace {

bool isDefinedOutside(const Value *value, const Operation *loop) {
  const Operation *owner = value->definingOp();
  if (!owner)
    owner = value->ownerBlock() ? value->ownerBlock()->parentOp() : nullptr;
  return owner != loop && !(owner && owner->isInside(loop));
}

/// Integer division by a constant other than 0 (and -1 when signed) cannot trap or overflow.
bool isSafeDivisor(const Value *divisor, bool isSigned) {
  const Operation *def = divisor->definingOp();
  Type element = divisor->type().elementType();
  if (!def || def->code() != OpCode::Constant || !def->hasAttr("value") || !element.isScalar())
    return false;
  std::optional<uint64_t> bits = integerBits(def->attr("value"), element.scalarKind());
  if (!bits || *bits == 0)
    return false;
  std::optional<uint64_t> minusOne = integerBits(int64_t(-1), element.scalarKind());
  return !isSigned || *bits != *minusOne;
}

bool isSpeculatable(const Operation &op) {
  switch (op.code()) {
  case OpCode::DivSI:
  case OpCode::RemSI: return isSafeDivisor(op.operand(1), true);
  case OpCode::DivUI:
  case OpCode::RemUI: return isSafeDivisor(op.operand(1), false);
  default: return true;
  }
}

bool isHoistable(const Operation &op, const Operation &loop) {
  if (!op.hasTrait(trait::PURE) || op.hasTrait(trait::TERM) || op.numRegions() != 0)
    return false;
  for (const Value *operand : op.operands())
    if (!isDefinedOutside(operand, &loop))
      return false;
  return isSpeculatable(op);
}

/// Moves the invariant ops of the loop's top-level blocks before the loop, in order (an op
/// whose operands were just hoisted becomes invariant in the same sweep).
void hoistInvariants(Operation &loop) {
  for (auto &region : loop.regions()) {
    Block &block = region->front();
    for (auto it = block.operations().begin(); it != block.operations().end();) {
      Operation *op = (it++)->get();
      if (isHoistable(*op, loop))
        loop.parentBlock()->insert(&loop, block.remove(op));
    }
  }
}

void runLoopInvariantCodeMotion(Module &module) {
  std::vector<Operation *> loops;
  module.walk([&](Operation *op) {
    // tl.condition(..., disable_licm=True) marks a while loop to keep its code inside.
    if ((op->code() == OpCode::For || op->code() == OpCode::While) && !op->hasAttr("disable_licm"))
      loops.push_back(op);
  });
  // The walk is pre-order, so reversed it lists every loop after the loops nested in it.
  for (auto it = loops.rbegin(); it != loops.rend(); ++it)
    hoistInvariants(**it);
}

} // namespace

TESSERA_REGISTER_PASS(licm, "licm", "hoist loop-invariant pure ops out of for and while loops",
                      runLoopInvariantCodeMotion);

} // namespace tessera::ir
