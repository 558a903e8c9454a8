// cse: common subexpression elimination on the tile IR, run after canonicalize. Merges pure
// ops with the same opcode, operands (in any order for commutative ops), attributes and result
// types. Scopes follow the structured regions: an op may reuse an equal op of its own block or
// of an enclosing one (which dominates it), never one from a sibling or nested region.
//
//   %2 = muli %0, %1 : (i32, i32) -> i32
//   %3 = muli %1, %0 : (i32, i32) -> i32
//   %4 = for ... { %5 = muli %0, %1 : ... }     // %5 is %2 too
// becomes
//   %2 = muli %0, %1 : (i32, i32) -> i32        // every use of %3 and %5 now uses %2
#include "ir/pass_manager.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>

namespace tessera::ir {

namespace {

/// Whether cse may merge `op` with an equal one: a pure, region-free, non-terminator op.
bool isMergeable(const Operation &op) {
  return op.hasTrait(trait::PURE) && !op.hasTrait(trait::TERM) && op.numRegions() == 0 &&
         op.numResults() > 0;
}

/// A text key equal for exactly the ops cse merges. Attributes are compared in their printed
/// form, which tells -0.0 from 0.0 (equal as doubles, yet different constants).
std::string signature(const Operation &op) {
  std::vector<const Value *> operands(op.operands().begin(), op.operands().end());
  if (op.hasTrait(trait::COMM))
    std::sort(operands.begin(), operands.end());
  std::ostringstream key;
  key << op.name() << '(';
  for (const Value *operand : operands)
    key << operand << ',';
  key << "){";
  for (auto &[name, value] : op.attributes())
    key << name << '=' << attributeStr(value) << ',';
  key << "}->";
  for (auto &result : op.results())
    key << result->type().str() << ',';
  return key.str();
}

class CommonSubexpressionEliminator {
public:
  void runOnBlock(Block &block) {
    scopes_.emplace_back();
    for (auto it = block.operations().begin(); it != block.operations().end();) {
      Operation *op = (it++)->get();
      if (isMergeable(*op)) {
        std::string key = signature(*op);
        if (Operation *existing = lookup(key)) {
          for (unsigned i = 0; i < op->numResults(); ++i)
            op->result(i)->replaceAllUsesWith(existing->result(i));
          op->erase();
          continue;
        }
        scopes_.back()[key] = op;
      }
      for (auto &region : op->regions())
        runOnBlock(region->front());
    }
    scopes_.pop_back();
  }

private:
  Operation *lookup(const std::string &key) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      auto it = scope->find(key);
      if (it != scope->end())
        return it->second;
    }
    return nullptr;
  }

  std::vector<std::unordered_map<std::string, Operation *>> scopes_;
};

void runCommonSubexpressionElimination(Module &module) {
  // Functions are isolated from each other: each starts with empty scopes.
  for (Operation *func : module.functions())
    CommonSubexpressionEliminator().runOnBlock(func->body());
}

} // namespace

TESSERA_REGISTER_PASS(cse, "cse", "merge identical pure ops, scoped by structured regions",
                      runCommonSubexpressionElimination);

} // namespace tessera::ir
