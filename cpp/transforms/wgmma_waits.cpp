// wgmma_waits: places the waits for in-flight wgmma groups as `wgmma_wait {pending = N}` ops
// (wait until at most the N newest committed groups are in flight), so that codegen emits
// wgmma.wait_group where the IR says and decides nothing. The last pass of tgir: it reads
// membar's `wgmma_pending` and allocate_shared's scratch. A dot's group is waited for right
// before the first op that reads its result, leaving the groups committed since in flight:
//
//   %s = dot %q, %k, %zero              %s = dot %q, %k, %zero
//   %p = dot %a, %b, %zero       ->     %p = dot %a, %b, %zero
//   %m = reduce %s ...                  wgmma_wait {pending = 1}
//                                       %m = reduce %s ...
//
// The rules, in program order (docs/perf/wgmma_across_iterations.md):
// 1. an op reading a pending result waits down to that group (a wgmma dot accumulating into
//    one does not: the tensor cores chain them); `wgmma_overlap = 0`: each dot waits at once;
// 2. control flow, terminators and debug calls wait for every group (a region would need the
//    pending groups of every path); the combiners of reduce and scan are straight-line code;
// 3. a barrier waits down to membar's `wgmma_pending` (with `wgmma_pipeline`, else to 0), as
//    does an mbarrier_arrive releasing a slot; an op whose lowering has a barrier of its own
//    (scratch, mbarrier setup) waits for every group right before that barrier, after its
//    stores into scratch: attribute `inner_wgmma_wait = N`, N = membar's
//    `inner_wgmma_pending` with `wgmma_pipeline` (the newest groups that nothing written
//    after that barrier may overlap), else 0 (its loads and stores still run beside the
//    products);
// 4. with `wgmma_pipeline`, a `for` whose body never drains every group carries the groups of
//    its chained accumulators across its back edge (attribute `wgmma_carried`: their indices
//    among the yielded values); the yield waits for the rest, the loop's exit for all. With
//    `wgmma_carry_rescaled` also a yielded product read otherwise next step (rule 1 waits for
//    it before that reader), except in a loop the pipeliner marked `wgmma_rescaled_wait` (a
//    two-slot ring: pipeline.cpp).
#include "transforms/passes.h"

#include "analysis/shared_access.h"
#include "analysis/shared_footprint.h"
#include "ir/builder.h"
#include "ir/pass_manager.h"

#include <algorithm>

namespace tessera::transforms {

namespace {

using ir::OpCode;
using Pending = std::vector<const ir::Value *>; // the groups in flight, in commit order

/// Whether `op` may run while wgmma groups are in flight, once it waited for those it reads
/// (rule 2; codegen's straight-line ops). Reduce and scan regions are inlined combiners.
bool runsBesideWgmma(const ir::Operation &op) {
  if (op.code() == OpCode::Reduce || op.code() == OpCode::Scan)
    return true;
  if (op.hasTrait(ir::trait::REGIONS) || op.hasTrait(ir::trait::TERM))
    return false;
  return op.code() != OpCode::Print && op.code() != OpCode::Assert;
}

/// Whether the lowering of `op` has a bar.sync of its own (rule 3): past it other warps may
/// write shared memory an in-flight wgmma reads, so every group is waited for first.
bool hasOwnBarrier(const ir::Operation &op) {
  return op.code() == OpCode::MBarrierInit || op.code() == OpCode::MBarrierInval ||
         analysis::scratchBytes(op) > 0;
}

class WaitPlacer {
public:
  WaitPlacer(bool overlap, bool pipeline, bool rescaled)
      : overlap_(overlap), pipeline_(overlap && pipeline), rescaled_(rescaled) {}

  /// Places the waits of `block`'s ops. `carried`: the loop's `wgmma_carried` indices when
  /// `block` is a for body; `controlFlow`: whether its terminator merges paths (rule 2).
  void placeInBlock(ir::Block &block, Pending &pending, bool controlFlow,
                    const std::vector<int64_t> *carried = nullptr) {
    for (auto it = block.operations().begin(); it != block.operations().end(); ++it) {
      ir::Operation &op = **it;
      if (op.code() == OpCode::Yield || op.code() == OpCode::Condition) {
        if (controlFlow)
          waitBefore(op, pending, carried ? carriedAtYield(op, *carried, pending) : 0);
        return;
      }
      waitBefore(op, pending, groupsKept(op, pending));
      if (hasOwnBarrier(op) && !pending.empty()) {
        size_t keep = innerKept(op, pending);
        op.setAttr("inner_wgmma_wait", static_cast<int64_t>(keep));
        pending.erase(pending.begin(), pending.end() - static_cast<std::ptrdiff_t>(keep));
      }
      if (op.code() == OpCode::For)
        placeInFor(op, pending);
      else if (op.code() == OpCode::If || op.code() == OpCode::While)
        for (auto &region : op.regions())
          placeInBlock(region->front(), pending, /*controlFlow=*/true);
      else if (op.code() == OpCode::WarpSpecialize) // the producer's straight-line region
        placeInBlock(op.body(), pending, /*controlFlow=*/false);
      else if (analysis::leavesWgmmaGroup(op)) {
        pending.push_back(op.result());
        if (!overlap_)
          waitBefore(**std::next(it), pending, 0);
      }
    }
  }

private:
  /// How many of the newest pending groups may stay in flight across `op` (rules 1-3).
  size_t groupsKept(const ir::Operation &op, const Pending &pending) const {
    if (!runsBesideWgmma(op))
      return 0;
    size_t kept = pending.size();
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      if (i == 2 && analysis::isWgmmaDot(op)) // an accumulator chained on the tensor cores
        continue;
      auto found = std::find(pending.begin(), pending.end(), op.operand(i));
      if (found != pending.end())
        kept = std::min(kept, static_cast<size_t>(pending.end() - found) - 1);
    }
    if (op.code() == OpCode::Barrier || op.code() == OpCode::MBarrierArrive) {
      int64_t keep = pipeline_ && op.hasAttr("wgmma_pending") ? op.intAttr("wgmma_pending") : 0;
      kept = std::min(kept, static_cast<size_t>(std::max<int64_t>(keep, 0)));
    }
    return kept;
  }

  /// The newest pending groups `op`'s own barrier leaves in flight (rule 3): membar's
  /// `inner_wgmma_pending` with `wgmma_pipeline` (none of them read what is written after
  /// it before the next barrier; membar gives it to scratch ops only: an mbarrier's setup
  /// retires every group), else none.
  size_t innerKept(const ir::Operation &op, const Pending &pending) const {
    if (!pipeline_ || !op.hasAttr("inner_wgmma_pending"))
      return 0;
    return std::min(pending.size(),
                    static_cast<size_t>(std::max<int64_t>(op.intAttr("inner_wgmma_pending"), 0)));
  }

  /// A `wgmma_wait` before `op` when more than `keep` groups are pending.
  static void waitBefore(ir::Operation &op, Pending &pending, size_t keep) {
    if (pending.size() <= keep)
      return;
    ir::Builder builder;
    builder.setInsertionPoint(&op);
    builder.setLocation(op.location());
    builder.create(OpCode::WgmmaWait, {}, {}, {{"pending", static_cast<int64_t>(keep)}});
    pending.erase(pending.begin(), pending.end() - static_cast<std::ptrdiff_t>(keep));
  }

  /// Rule 4. The body starts with the carried groups pending (their block arguments, oldest
  /// first), the exit with the loop's results; the exit waits for them at once.
  void placeInFor(ir::Operation &loop, Pending &pending) {
    loop.attributes().erase("wgmma_carried");
    ir::Block &body = loop.body();
    std::vector<int64_t> carried;
    if (pipeline_ && std::none_of(body.operations().begin(), body.operations().end(),
                                  [](const auto &op) { return analysis::drainsWgmmaGroups(*op); }))
      for (unsigned index : analysis::carriedWgmmaAccumulators(
               loop, rescaled_ && !loop.hasAttr("wgmma_rescaled_wait")))
        carried.push_back(index);
    Pending inBody;
    for (int64_t index : carried)
      inBody.push_back(body.argument(static_cast<unsigned>(index) + 1));
    placeInBlock(body, inBody, /*controlFlow=*/true, &carried);
    if (carried.empty())
      return;
    loop.setAttr("wgmma_carried", carried);
    for (int64_t index : carried)
      pending.push_back(loop.result(static_cast<unsigned>(index)));
    auto next = std::next(loop.parentBlock()->find(&loop));
    waitBefore(**next, pending, 0);
  }

  /// How many of the newest pending groups the loop's yield carries: newest first, each a
  /// carried value's, older than the one before it in `carried`'s order (the header's).
  static size_t carriedAtYield(const ir::Operation &yield, const std::vector<int64_t> &carried,
                               const Pending &pending) {
    size_t kept = 0, before = carried.size();
    for (size_t g = pending.size(); g-- > 0; ++kept) {
      size_t position = 0;
      while (position < before &&
             yield.operand(static_cast<unsigned>(carried[position])) != pending[g])
        ++position;
      if (position == before)
        break;
      before = position;
    }
    return kept;
  }

  bool overlap_, pipeline_, rescaled_;
};

/// Erases the waits of an earlier run, so that the pass places them afresh.
void eraseWaits(ir::Operation &func) {
  std::vector<ir::Operation *> waits;
  func.walk([&](ir::Operation *op) {
    op->attributes().erase("inner_wgmma_wait");
    if (op->code() == OpCode::WgmmaWait)
      waits.push_back(op);
  });
  for (ir::Operation *wait : waits)
    wait->erase();
}

} // namespace

void placeWgmmaWaits(ir::Module &module) {
  bool overlap = module.intAttrOr("wgmma_overlap", 1) != 0;
  bool pipeline = module.intAttrOr("wgmma_pipeline", 0) != 0;
  bool rescaled = analysis::carriesRescaledProducts(module);
  for (ir::Operation *func : module.functions()) {
    eraseWaits(*func);
    Pending pending;
    WaitPlacer(overlap, pipeline, rescaled)
        .placeInBlock(func->body(), pending, /*controlFlow=*/true);
  }
}

TESSERA_REGISTER_PASS(wgmma_waits, "wgmma_waits",
                      "Place wgmma_wait ops: each wgmma group waited for before the first op "
                      "that reads its result, a barrier, control flow or a loop's exit",
                      placeWgmmaWaits);

} // namespace tessera::transforms
