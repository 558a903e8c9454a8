// wgmma groups in codegen: the bookkeeping behind the IR's `wgmma_wait` ops. Where groups are
// waited for is decided by the wgmma_waits pass (transforms/wgmma_waits.cpp); codegen keeps
// the committed groups (their results' untied registers, their register A words) and, at a
// `wgmma_wait {pending = N}`, emits wgmma.wait_group N tying the retired groups' registers. A
// `for`'s `wgmma_carried` groups stay pending across its back edge (lowerFor).
#include "codegen/lower_matrix.h"
#include "codegen/lower_to_llvm.h"

#include "analysis/shared_access.h"
#include "ir/diagnostics.h"
#include "layout/mma.h"

#include <algorithm>

namespace tessera::codegen {

using analysis::isWgmmaDot;

void KernelLowering::checkWgmmaWaited(const ir::Operation &op) const {
  if (pendingWgmma_.empty())
    return;
  // The pass's rules, as a check: an op reading an in-flight result (not a wgmma dot chaining
  // onto it) or control flow with groups in flight means the waits were not placed.
  bool controlFlow = op.code() != ir::OpCode::Reduce && op.code() != ir::OpCode::Scan &&
                     (op.hasTrait(ir::trait::REGIONS) || op.hasTrait(ir::trait::TERM));
  bool reads = false;
  for (unsigned i = 0; i < op.numOperands(); ++i)
    reads |= !(i == 2 && isWgmmaDot(op)) &&
             std::any_of(pendingWgmma_.begin(), pendingWgmma_.end(),
                         [&](const PendingWgmma &p) { return p.result == op.operand(i); });
  if (controlFlow || reads)
    ir::emitError(op, "codegen: a wgmma result is read, or control flow reached, with its "
                      "group in flight: run the wgmma_waits pass");
}

bool KernelLowering::hasUnloweredUse(const ir::Value *value) const {
  for (const ir::Operation *user : value->users())
    if (!loweredOps_.count(user))
      return true;
  return false;
}

void KernelLowering::waitForWgmma(size_t groups) {
  if (groups == 0)
    return;
  // A result no op reads any more is not tied: a loop's accumulator waited for after the next
  // step's product took its registers (chained) would otherwise stay live beside them.
  auto tie = [&](const ir::Value *result) { return !pipelineWgmma() || hasUnloweredUse(result); };
  Registers tied;
  std::vector<llvm::Value *> inputs;
  for (size_t g = 0; g < groups; ++g) {
    if (tie(pendingWgmma_[g].result)) {
      const Registers &registers = registersOf(pendingWgmma_[g].result);
      tied.insert(tied.end(), registers.begin(), registers.end());
    }
    inputs.insert(inputs.end(), pendingWgmma_[g].inputs.begin(), pendingWgmma_[g].inputs.end());
  }
  emitWgmmaWait(*this, tied, static_cast<int>(pendingWgmma_.size() - groups), inputs);
  size_t next = 0;
  for (size_t g = 0; g < groups; ++g) {
    const ir::Value *result = pendingWgmma_[g].result;
    if (!tie(result))
      continue;
    size_t count = registersOf(result).size();
    setRegisters(result, Registers(tied.begin() + next, tied.begin() + next + count));
    next += count;
  }
  pendingWgmma_.erase(pendingWgmma_.begin(), pendingWgmma_.begin() + groups);
}

void KernelLowering::emitWgmmaOrderMark() {
  if (pendingWgmma_.empty()) // nothing in flight for ptxas to wait for
    return;
  Registers none;
  emitWgmmaWait(*this, none, static_cast<int>(pendingWgmma_.size()), {});
}

KernelLowering::CarriedGroups KernelLowering::carriedWgmmaGroups(const ir::Operation &loop) {
  CarriedGroups carried;
  if (!loop.hasAttr("wgmma_carried"))
    return carried;
  const ir::Block &body = loop.regions()[0]->front();
  for (int64_t index : loop.arrayAttr("wgmma_carried")) { // body order: commit order
    const ir::Value *yielded = body.terminator()->operand(static_cast<unsigned>(index));
    const ir::Operation *dot = yielded->definingOp();
    if (!dot || !isWgmmaDot(*dot))
      ir::emitError(loop, "codegen: wgmma_carried names a value that no wgmma dot yields");
    const auto &mma = static_cast<const MmaEncoding &>(*dot->result()->type().encoding());
    std::vector<llvm::PHINode *> phis(wgmmaRegisterInputCount(*dot, mma));
    for (llvm::PHINode *&phi : phis)
      phi = builder_.CreatePHI(builder_.getInt32Ty(), 2);
    carried.indices.push_back(static_cast<unsigned>(index));
    carried.inputs.push_back(std::move(phis));
  }
  return carried;
}

void KernelLowering::markCarriedInFlight(const ir::Operation &yield, CarriedGroups &carried) {
  // What the wgmma_wait before the yield left in flight must be carried values' groups with
  // the register A words the header's phis expect.
  carried.inFlight.assign(carried.indices.size(), false);
  for (const PendingWgmma &group : pendingWgmma_) {
    size_t position = 0;
    while (position < carried.indices.size() &&
           yield.operand(carried.indices[position]) != group.result)
      ++position;
    if (position == carried.indices.size() ||
        group.inputs.size() != carried.inputs[position].size())
      ir::emitError(yield, "codegen: a wgmma group in flight at the end of a loop body that "
                           "the loop does not carry: run the wgmma_waits pass");
    carried.inFlight[position] = true;
  }
}

} // namespace tessera::codegen
