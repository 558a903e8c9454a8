// wgmma groups in codegen: which committed groups are waited for where. A dot's group is
// waited for (wgmma.wait_group N, tying its registers) before the first op that reads its
// result, a barrier (down to its `wgmma_pending`), control flow or a call; a `for` may leave
// the groups of the products it yields in flight across its back edge (lowerFor, with
// pipelineWgmma: docs/perf/wgmma_across_iterations.md).
#include "codegen/lower_matrix.h"
#include "codegen/lower_to_llvm.h"

#include "analysis/shared_access.h"
#include "layout/mma.h"

#include <algorithm>

namespace tessera::codegen {

using analysis::isWgmmaDot;

namespace {

/// Whether `op` may be lowered while wgmma groups are in flight (once it has waited for the
/// ones whose results it reads). Shared memory needs no case here: a write that could hit
/// bytes an in-flight wgmma reads comes after a barrier (membar orders every such pair, with
/// its own `barrier` or one inside an op's lowering), and every barrier waits for all groups
/// first (emitBarrier). Control flow does: a region's ops and the code after it would need the
/// pending state of every path, so ops with regions and terminators wait for everything, as
/// do calls (printf: ptxas serializes wgmma around calls anyway). The regions of reduce and
/// scan are combiners inlined as straight-line code (lowerInlineRegion), not control flow: a
/// softmax's row max runs while the next product is still on the tensor cores.
bool canRunBesideWgmma(const ir::Operation &op) {
  if (op.code() == ir::OpCode::Reduce || op.code() == ir::OpCode::Scan)
    return true;
  if (ir::hasTrait(op.code(), ir::trait::REGIONS) || ir::hasTrait(op.code(), ir::trait::TERM))
    return false;
  return op.code() != ir::OpCode::Print && op.code() != ir::OpCode::Assert;
}

} // namespace

void KernelLowering::settleWgmma(const ir::Operation &op) {
  if (pendingWgmma_.empty())
    return;
  if (!canRunBesideWgmma(op))
    return waitForWgmma(pendingWgmma_.size());
  size_t needed = 0;
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    // A wgmma accumulating into an in-flight wgmma's result of the same layout runs after it
    // on the tensor cores (PTX ISA: wgmma.mma_async, accumulator chaining): no wait.
    if (i == 2 && isWgmmaDot(op))
      continue;
    auto it = std::find_if(pendingWgmma_.begin(), pendingWgmma_.end(),
                           [&](const PendingWgmma &p) { return p.result == op.operand(i); });
    if (it != pendingWgmma_.end())
      needed = std::max(needed, static_cast<size_t>(it - pendingWgmma_.begin()) + 1);
  }
  if (needed > 0)
    waitForWgmma(needed);
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

namespace {

/// Whether nothing at the top level of a loop's body waits for every wgmma group: else the
/// product would be waited for there anyway (before the next one is issued, or before the
/// back edge), and keeping its accumulator reserved across the loop would only cost
/// registers (a tile staged through shared memory that the previous product reads, say).
bool keepsProductsInFlight(const ir::Block &body) {
  return std::none_of(body.operations().begin(), body.operations().end(),
                      [](const auto &op) { return analysis::drainsWgmmaGroups(*op); });
}

} // namespace

KernelLowering::CarriedGroups KernelLowering::carriedWgmmaGroups(const ir::Operation &loop) {
  CarriedGroups carried;
  const ir::Block &body = loop.regions()[0]->front();
  if (!pipelineWgmma() || !keepsProductsInFlight(body))
    return carried;
  for (unsigned index : analysis::carriedWgmmaAccumulators(loop)) { // body order: commit order
    const ir::Operation &dot = *body.terminator()->operand(index)->definingOp();
    const auto &mma = static_cast<const MmaEncoding &>(*dot.result()->type().encoding());
    std::vector<llvm::PHINode *> phis(wgmmaRegisterInputCount(dot, mma));
    for (llvm::PHINode *&phi : phis)
      phi = builder_.CreatePHI(builder_.getInt32Ty(), 2);
    carried.indices.push_back(index);
    carried.inputs.push_back(std::move(phis));
  }
  return carried;
}

size_t KernelLowering::carriedAtYield(const ir::Operation &yield, CarriedGroups &carried) const {
  // The newest pending groups, newest first, while each is a carried value's, older than the
  // one before it in the header's order, with the inputs its phis expect.
  carried.inFlight.assign(carried.indices.size(), false);
  size_t kept = 0, before = carried.indices.size();
  for (size_t g = pendingWgmma_.size(); g-- > 0; ++kept) {
    size_t position = 0;
    while (position < before && yield.operand(carried.indices[position]) != pendingWgmma_[g].result)
      ++position;
    if (position == before || pendingWgmma_[g].inputs.size() != carried.inputs[position].size())
      break;
    carried.inFlight[position] = true;
    before = position;
  }
  return kept;
}

} // namespace tessera::codegen
