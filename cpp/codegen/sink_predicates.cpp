// sink_predicates: recomputes predicates (i1 compares and their and/or/xor) next to uses that
// lie past a loop. A pass over LLVM IR, run after O3 (nvptx_target.cpp); alone:
// `tessera-opt k.ll --sink_predicates` (tests/lit/codegen/sink_predicates.ll).
//
// Why: a masked load before a loop and a masked store after it test the same rows
// (`offs_m < S`), and LLVM's CSE leaves one compare whose i1 results stay live across the loop.
// SASS has 7 predicate registers; eight live row predicates (one per 16-byte vector of a
// 128-row tile) cost ptxas its freedom in the loop body: it stops interleaving the softmax's
// exp2 with the P@V wgmma of an attention forward (docs/perf/pass_decisions.md has the
// measurements). A compare is one instruction; recomputing it after the loop keeps only its
// (already live) integer operands across. This
// is what CodeGenPrepare's sinkCmpExpression does for targets with one condition register;
// NVPTX has many, so LLVM leaves it to us. The backend runs GVN and MachineCSE, which would
// merge the copy back into the compare before the loop: one operand of the copy goes through an
// empty `mov` (inline asm with side effects, which neither CSEs), and ptxas folds the mov away.
#include "codegen/nvptx_target.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/Analysis/CFG.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>

#include <vector>

namespace tessera::codegen {

namespace {

/// A predicate we recompute: a compare, or and/or/xor of i1 values.
bool isPredicate(const llvm::Instruction &inst) {
  if (!inst.getType()->isIntegerTy(1))
    return false;
  if (llvm::isa<llvm::CmpInst>(inst))
    return true;
  unsigned op = inst.getOpcode();
  return op == llvm::Instruction::And || op == llvm::Instruction::Or ||
         op == llvm::Instruction::Xor;
}

/// `value` through a `mov` that LLVM cannot see through, at `builder`; `value` itself where the
/// type has no PTX register constraint.
llvm::Value *opaqueCopy(llvm::IRBuilder<> &builder, llvm::Value *value) {
  llvm::Type *type = value->getType();
  const char *constraint = type->isIntegerTy(16)   ? "=h,h"
                           : type->isIntegerTy(32) ? "=r,r"
                           : type->isIntegerTy(64) ? "=l,l"
                           : type->isFloatTy()     ? "=f,f"
                           : type->isDoubleTy()    ? "=d,d"
                                                   : nullptr;
  const char *mov = type->isIntegerTy(16)                        ? "mov.b16 $0, $1;"
                    : type->isIntegerTy(32) || type->isFloatTy() ? "mov.b32 $0, $1;"
                                                                 : "mov.b64 $0, $1;";
  if (!constraint || llvm::isa<llvm::Constant>(value))
    return value;
  auto *asmType = llvm::FunctionType::get(type, {type}, false);
  return builder.CreateCall(llvm::InlineAsm::get(asmType, mov, constraint, true), {value});
}

/// A copy of `inst` at the start of `block`, kept apart from `inst` by the backend's CSE.
llvm::Instruction *recompute(llvm::Instruction *inst, llvm::BasicBlock *block) {
  llvm::IRBuilder<> builder(block, block->getFirstInsertionPt());
  llvm::Instruction *clone = inst->clone();
  clone->setName(inst->getName());
  if (llvm::isa<llvm::CmpInst>(inst))
    for (unsigned i = 0; i < 2; ++i)
      if (!llvm::isa<llvm::Constant>(clone->getOperand(i))) {
        clone->setOperand(i, opaqueCopy(builder, clone->getOperand(i)));
        break;
      }
  builder.Insert(clone);
  return clone;
}

/// Whether a loop at `use`'s own depth runs between `def` and `use`: one that `def` dominates
/// and from which `use` is reachable. Uses inside a loop the definition is outside of are never
/// taken (recomputing there would add work to every iteration).
bool loopBetween(llvm::BasicBlock *def, llvm::BasicBlock *use, const llvm::DominatorTree &tree,
                 const llvm::LoopInfo &loops) {
  llvm::Loop *useLoop = loops.getLoopFor(use);
  llvm::Loop *defLoop = loops.getLoopFor(def);
  if (useLoop && (!defLoop || !useLoop->contains(defLoop)))
    return false;
  const std::vector<llvm::Loop *> &siblings =
      useLoop ? useLoop->getSubLoops() : loops.getTopLevelLoops();
  for (llvm::Loop *loop : siblings) {
    if (loop->contains(def) || loop->contains(use))
      continue;
    if (tree.dominates(def, loop->getHeader()) &&
        llvm::isPotentiallyReachable(loop->getHeader(), use, nullptr, &tree, &loops))
      return true;
  }
  return false;
}

} // namespace

void sinkPredicatesPastLoops(llvm::Function &function) {
  if (function.isDeclaration())
    return;
  llvm::DominatorTree tree(function);
  llvm::LoopInfo loops(tree);
  // Uses before definitions: a clone's i1 operands are then visited after it was made.
  std::vector<llvm::Instruction *> predicates;
  for (llvm::Instruction &inst : llvm::instructions(function))
    if (isPredicate(inst))
      predicates.push_back(&inst);
  while (!predicates.empty()) {
    llvm::Instruction *inst = predicates.back();
    predicates.pop_back();
    llvm::DenseMap<llvm::BasicBlock *, llvm::Instruction *> clones;
    for (llvm::Use &use : llvm::make_early_inc_range(inst->uses())) {
      auto *user = llvm::cast<llvm::Instruction>(use.getUser());
      llvm::BasicBlock *block = user->getParent();
      if (llvm::isa<llvm::PHINode>(user) || block == inst->getParent() ||
          !loopBetween(inst->getParent(), block, tree, loops))
        continue;
      llvm::Instruction *&clone = clones[block];
      if (!clone) {
        clone = recompute(inst, block);
        predicates.push_back(clone);
      }
      use.set(clone);
    }
    if (inst->use_empty())
      inst->eraseFromParent();
  }
}

} // namespace tessera::codegen
