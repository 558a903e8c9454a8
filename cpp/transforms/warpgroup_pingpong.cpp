// warpgroup_pingpong: the two warpgroups of an 8-warp kernel take turns at issuing the wgmma
// products of a loop (FlashAttention-3's ping-pong), so that one warpgroup's non-tensor work
// (an attention step's softmax) runs while the other's products hold the tensor cores, instead
// of both warpgroups reaching their softmax together and the tensor cores idling.
//
// With the module attribute `pingpong` (knobs.pingpong), in every `for` whose body issues
// wgmma groups at its top level (none inside a nested region: the turns must be taken by both
// warpgroups the same number of times), each run of issues is bracketed (a run: issues with
// only register and address ops between them, no wait, barrier or region):
//
//   warpgroup_turn {turn = "open"}          warpgroup 1 hands the first turn to warpgroup 0
//   for ... {
//     warpgroup_turn {turn = "wait"}        bar.sync 2 + wg, 256: this warpgroup's turn
//     %s = dot ...                          its products issued (the waits stay where
//     warpgroup_turn {turn = "pass"}        bar.arrive 2 + (1 - wg), 256    wgmma_waits put them)
//     ... softmax of %s ...
//     warpgroup_turn {turn = "wait"}
//     %o = dot ...
//     warpgroup_turn {turn = "pass"}
//   }
//   warpgroup_turn {turn = "close"}         warpgroup 0 takes the hand-off left over
//
// Warpgroup 0 waits on barrier 2 once per run and once at "close"; warpgroup 1 arrives there
// once at "open" and once per run: the counts match, so no arrival is left over at the exit.
// Runs after wgmma_waits (a turn is passed right after the issue, before the wait for it).
// Not in warp-specialized kernels (their consumers already synchronize on barrier 1) and only
// with 8 warps (two warpgroups). docs/perf/attention_tma.md, "Ping-pong".
#include "transforms/passes.h"

#include "analysis/shared_access.h"
#include "analysis/shared_footprint.h"
#include "ir/builder.h"
#include "ir/pass_manager.h"

#include <vector>

namespace tessera::transforms {

namespace {

using ir::OpCode;

bool containsIssue(ir::Operation &op) {
  bool found = false;
  op.walk([&](ir::Operation *inner) { found |= analysis::leavesWgmmaGroup(*inner); });
  return found;
}

/// Whether `op` waits (for products, copies or other threads) or branches: a turn held across
/// it would hold the other warpgroup too. Register and address ops between two issues (the
/// operands of the second: a conversion of P, a view of a ring slot) join them in one turn.
bool waitsOrSynchronizes(const ir::Operation &op) {
  switch (op.code()) {
  case OpCode::WgmmaWait:
  case OpCode::Barrier:
  case OpCode::AsyncWait:
  case OpCode::MBarrierWait:
  case OpCode::MBarrierArrive:
  case OpCode::MBarrierInit:
  case OpCode::MBarrierInval: return true;
  default: return !op.regions().empty() || analysis::scratchBytes(op) > 0;
  }
}

void insertTurn(ir::Operation &at, const char *turn, bool after) {
  ir::Builder builder;
  if (after)
    builder.setInsertionPointAfter(&at);
  else
    builder.setInsertionPoint(&at);
  builder.setLocation(at.location());
  builder.create(OpCode::WarpgroupTurn, {}, {}, {{"turn", std::string(turn)}});
}

/// Brackets the runs of wgmma issues in `loop`'s body; false when the loop does not qualify.
bool pingpongLoop(ir::Operation &loop) {
  ir::Block &body = loop.body();
  std::vector<ir::Operation *> ops;
  for (auto &op : body.operations())
    ops.push_back(op.get());
  std::vector<std::pair<size_t, size_t>> runs; // [first, last] indices into ops
  bool open = false; // whether the last run may still grow: nothing waited for since it
  for (size_t i = 0; i < ops.size(); ++i) {
    if (analysis::leavesWgmmaGroup(*ops[i])) {
      if (open)
        runs.back().second = i;
      else
        runs.emplace_back(i, i);
      open = true;
    } else if (!ops[i]->regions().empty() && containsIssue(*ops[i])) {
      return false; // issues inside a nested region (an inner loop gets its own turns)
    } else if (waitsOrSynchronizes(*ops[i])) {
      open = false;
    }
  }
  if (runs.empty())
    return false;
  for (auto [first, last] : runs) {
    insertTurn(*ops[first], "wait", /*after=*/false);
    insertTurn(*ops[last], "pass", /*after=*/true);
  }
  insertTurn(loop, "open", /*after=*/false);
  insertTurn(loop, "close", /*after=*/true);
  return true;
}

} // namespace

void pingpongWarpgroups(ir::Module &module) {
  if (module.intAttrOr("pingpong", 0) == 0 || module.intAttrOr("num_warps", 4) != 8)
    return;
  for (ir::Operation *func : module.functions()) {
    bool skip = false;
    std::vector<ir::Operation *> loops;
    func->walk([&](ir::Operation *op) {
      skip |= op->code() == OpCode::WarpSpecialize || op->code() == OpCode::WarpgroupTurn;
      if (op->code() == OpCode::For)
        loops.push_back(op);
    });
    if (skip)
      continue;
    for (ir::Operation *loop : loops)
      pingpongLoop(*loop);
  }
}

TESSERA_REGISTER_PASS(warpgroup_pingpong, "warpgroup_pingpong",
                      "With module attribute pingpong and 8 warps: the two warpgroups take "
                      "turns (named barriers) at issuing each loop's wgmma products",
                      pingpongWarpgroups);

} // namespace tessera::transforms
