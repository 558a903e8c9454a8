// stage_invariant_operands: a loop-invariant dot operand that licm hoisted as a conversion
// into its #dot_op layout holds its fragments in registers for the whole loop. When such
// operands together take more than a budget of registers per thread (attention's backward at
// head dim 128 keeps K and V, or Q and dO), the largest are staged in shared memory instead:
// written once before the loop, read by the dot with ldmatrix at every step, so their
// fragments live only while the dot runs. Runs after licm, before the pipeliner.
//
//   %a = convert_layout %k : (tensor<64x128xf16, #B>) -> tensor<64x128xf16, #dot_op<{opIdx = 0,
//   ...}>> for ... { %s = dot %a, %b, %c ... }
// becomes
//   %buf = local_alloc %k : (tensor<64x128xf16, #B>) -> tensor<64x128xf16, #shared<...>>
//   for ... { %a = local_load %buf : (...) -> tensor<64x128xf16, #dot_op<...>>
//             %s = dot %a, %b, %c ... }
//
// Plan, per `for` loop:
// 1. Candidates: conversions into #mma dot-operand layouts, before the loop in its block, whose
//    every user is a dot at the top level of the loop body.
// 2. While their registers per thread (from the layout: replicated fragments count fully)
//    exceed the budget, stage the largest: a local_alloc of the conversion's source before
//    it, a local_load before each dot.
#include "transforms/layout_passes.h"

#include "analysis/shared_footprint.h"
#include "ir/pass_manager.h"
#include "layout/dot_operand.h"
#include "layout/swizzled_shared.h"
#include "transforms/passes.h"

#include <algorithm>

namespace tessera::transforms {

using namespace ir;

namespace {

/// Registers per thread the loop-invariant operands may keep for a whole loop.
constexpr int64_t kRegisterBudget = 32;

struct Candidate {
  Operation *convert;
  int64_t registers;
};

int64_t registersPerThread(const Type &type) {
  LinearLayout layout = type.encoding()->toLinearLayout(type.shape());
  return (layout.getInDimSize(kRegisterDim) * type.bitWidth() + 31) / 32;
}

// Plan step 1.
std::vector<Candidate> candidatesOf(Operation *loop) {
  std::vector<Candidate> candidates;
  Block *block = loop->parentBlock();
  for (auto &owned : block->operations()) {
    Operation *op = owned.get();
    if (op == loop)
      break;
    if (op->code() != OpCode::ConvertLayout || op->result()->type().rank() != 2)
      continue;
    const auto *operand =
        dynamic_cast<const DotOperandEncoding *>(op->result()->type().encoding().get());
    if (!operand || !operand->getMmaParent() || !op->operand(0)->type().encoding() ||
        operand->getMmaParent()->isWgmma()) // always staged: materialize_wgmma_operands
      continue;
    const std::vector<Operation *> &users = op->result()->users();
    bool onlyDotsInLoop =
        !users.empty() && std::all_of(users.begin(), users.end(), [&](Operation *user) {
          return user->code() == OpCode::Dot && user->parentBlock() == &loop->body();
        });
    if (onlyDotsInLoop)
      candidates.push_back({op, registersPerThread(op->result()->type())});
  }
  return candidates;
}

// Plan step 2, for one operand.
void stage(Operation *convert) {
  const Type &type = convert->operand(0)->type();
  int fastest = analysis::fastestDim(type.encoding()->toLinearLayout(type.shape()));
  stageThroughSharedMemory(
      convert, dotOperandSharedEncoding(type.shape(), {fastest, 1 - fastest}, type.bitWidth() / 8));
}

void stageInvariantOperands(Module &module) {
  for (Operation *func : module.functions()) {
    std::vector<Operation *> loops;
    func->walk([&](Operation *op) {
      if (op->code() == OpCode::For)
        loops.push_back(op);
    });
    for (Operation *loop : loops) {
      std::vector<Candidate> candidates = candidatesOf(loop);
      std::stable_sort(
          candidates.begin(), candidates.end(),
          [](const Candidate &a, const Candidate &b) { return a.registers > b.registers; });
      int64_t total = 0;
      for (const Candidate &candidate : candidates)
        total += candidate.registers;
      for (const Candidate &candidate : candidates) {
        if (total <= kRegisterBudget)
          break;
        total -= candidate.registers;
        stage(candidate.convert);
      }
    }
  }
}

} // namespace

void stageThroughSharedMemory(Operation *convert, const EncodingPtr &shared) {
  Value *source = convert->operand(0);
  Builder builder;
  builder.setInsertionPoint(convert);
  builder.setLocation(convert->location());
  Value *buffer =
      builder.create(OpCode::LocalAlloc, {source}, {source->type().withEncoding(shared)})->result();
  for (const OperandUse &use : usesOf(convert->result())) {
    Builder at;
    at.setInsertionPoint(use.user);
    at.setLocation(convert->location());
    Value *read = at.create(OpCode::LocalLoad, {buffer}, {convert->result()->type()})->result();
    use.user->setOperand(use.index, read);
  }
  convert->erase();
}

TESSERA_REGISTER_PASS(stage_invariant_operands, "stage_invariant_operands",
                      "Keep loop-invariant dot operands in shared memory (ldmatrix at each step) "
                      "when their register fragments would exceed a per-thread budget",
                      stageInvariantOperands);

} // namespace tessera::transforms
