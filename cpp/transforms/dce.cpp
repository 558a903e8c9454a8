// dce: dead code elimination on the tile IR, run after canonicalize and cse. Removes
// side-effect-free ops (and non-volatile loads) whose results are unused (to a fixpoint, inside
// regions too) and the carried values of `for` loops that only feed themselves.
//
//   %3 = muli %1, %1 : (i32, i32) -> i32                      // unused: erased
//   %4, %5 = for %lb, %ub, %step, %x, %y : (...) -> (f32, f32) {
//   ^bb(%i: i32, %a: f32, %b: f32):
//     %6 = addf %b, %b : (f32, f32) -> f32                    // feeds only carried value 1
//     yield %a, %6 : (f32, f32) -> ()
//   }                                                         // %5 unused
// becomes
//   %4 = for %lb, %ub, %step, %x : (i32, i32, i32, f32) -> f32 {
//   ^bb(%i: i32, %a: f32):
//     yield %a : (f32) -> ()
//   }
#include "ir/pass_manager.h"
#include "transforms/passes.h"

#include <set>

namespace tessera::ir {

bool isSideEffectFree(const Operation &op) {
  if (op.hasTrait(trait::TERM))
    return false;
  if (op.code() == OpCode::Load) // it only reads: unused, it goes (unless volatile)
    return !op.flagAttr("volatile");
  if (op.numRegions() == 0)
    return op.hasTrait(trait::PURE);
  // A `while` may not terminate, so it stays even when its body is pure. reduce and scan
  // (PURE with a combiner region) go when unused.
  if (op.code() != OpCode::For && op.code() != OpCode::If && !op.hasTrait(trait::PURE))
    return false;
  for (auto &region : op.regions())
    for (auto &nested : region->front().operations())
      if (!(nested->code() == OpCode::Yield || isSideEffectFree(*nested)))
        return false;
  return true;
}

bool isTriviallyDead(const Operation &op) {
  for (auto &result : op.results())
    if (result->hasUses())
      return false;
  return isSideEffectFree(op);
}

void eraseIfDead(const std::vector<Operation *> &ops) {
  std::vector<Operation *> worklist(ops.rbegin(), ops.rend());
  // Only erasures happen below (no allocation), so an erased pointer cannot come back as a
  // new op: the set safely tells which worklist entries are gone.
  std::set<Operation *> erased;
  while (!worklist.empty()) {
    Operation *op = worklist.back();
    worklist.pop_back();
    if (erased.count(op) || !op->parentBlock() || !isTriviallyDead(*op))
      continue;
    for (Value *operand : op->operands())
      if (operand->definingOp())
        worklist.push_back(operand->definingOp());
    op->erase();
    erased.insert(op);
  }
}

namespace {

/// Carried value k of `forOp` is dead when result k is unused and block argument k+1 reaches,
/// through side-effect-free ops only, nothing but operand k of the body's yield.
bool isCarriedValueDead(Operation &forOp, unsigned k) {
  if (forOp.result(k)->hasUses())
    return false;
  Block &body = forOp.body();
  Operation *yield = body.terminator();
  std::vector<Value *> worklist = {body.argument(k + 1)};
  std::set<Value *> seen(worklist.begin(), worklist.end());
  while (!worklist.empty()) {
    Value *value = worklist.back();
    worklist.pop_back();
    for (Operation *user : value->users()) {
      if (user == yield) {
        for (unsigned i = 0; i < yield->numOperands(); ++i)
          if (yield->operand(i) == value && i != k)
            return false;
        continue;
      }
      if (user->numRegions() || !isSideEffectFree(*user))
        return false;
      for (auto &result : user->results())
        if (seen.insert(result.get()).second)
          worklist.push_back(result.get());
    }
  }
  return true;
}

bool eraseDeadCarriedValues(Operation &forOp) {
  bool changed = false;
  Block &body = forOp.body();
  for (unsigned k = forOp.numResults(); k-- > 0;) {
    if (!isCarriedValueDead(forOp, k))
      continue;
    body.terminator()->eraseOperand(k);
    forOp.eraseOperand(3 + k);
    forOp.eraseResult(k);
    eraseDeadOps(body); // the ops that computed the dropped yield operand
    body.eraseArgument(k + 1);
    changed = true;
  }
  return changed;
}

} // namespace

bool eraseDeadOps(Block &block) {
  bool changedAny = false;
  for (bool changed = true; changed;) {
    changed = false;
    // Users come after their operands' definitions: walking backwards frees whole chains.
    std::vector<Operation *> ops;
    for (auto &op : block.operations())
      ops.push_back(op.get());
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      Operation *op = *it;
      for (auto &region : op->regions())
        changed |= eraseDeadOps(region->front());
      if (op->code() == OpCode::For)
        changed |= eraseDeadCarriedValues(*op);
      if (isTriviallyDead(*op)) {
        op->erase();
        changed = true;
      }
    }
    changedAny |= changed;
  }
  return changedAny;
}

namespace {

void runDeadCodeElimination(Module &module) {
  for (Operation *func : module.functions())
    eraseDeadOps(func->body());
}

} // namespace

TESSERA_REGISTER_PASS(dce, "dce", "remove unused side-effect-free ops and dead loop-carried values",
                      runDeadCodeElimination);

} // namespace tessera::ir
