// coalesce: gives each global load and store the Blocked layout that lets a thread access up
// to 16 contiguous bytes at once (as Triton's Coalesce), from the axis info of its pointers.
// Runs after assign_layouts; the convert_layout ops it leaves around each access are for
// remove_layout_conversions to dissolve.
//
//   %v = load %p : (tensor<1024xptr<f16>, #B4>) -> tensor<1024xf16, #B4>
// becomes, when %p is contiguous and 16-byte aligned (#B8: sizePerThread = [8])
//   %q = convert_layout %p : (tensor<1024xptr<f16>, #B4>) -> tensor<1024xptr<f16>, #B8>
//   %w = load %q : (tensor<1024xptr<f16>, #B8>) -> tensor<1024xf16, #B8>
//   %v = convert_layout %w : (tensor<1024xf16, #B8>) -> tensor<1024xf16, #B4>
//
// Plan:
// 1. Axis info of the func, computed once on the IR as it comes in.
// 2. Per access: order = the pointer's dims by contiguity; its own width = the pointer's
//    alignment along order[0] (contiguity, and divisibility in elements), capped by the
//    mask's constancy, 16 bytes and the extent.
// 3. Accesses tied together by def-use chains, of one shape and order, share a width: loads
//    take the largest of the group (the L1 cache absorbs the gaps), stores at most their own
//    (a wider store would leave holes in a warp's writes). Capped so every thread has work.
// 4. Blocked{sizePerThread = width along order[0], lanes then warps along order}, except that
//    when the access's group is reduced along order[0] only (softmax and norm rows), warps
//    go to the other dims first, keeping a row within a warp; operands are converted to it
//    and a load's result converted back.
#include "transforms/layout_passes.h"

#include "analysis/axis_info.h"
#include "ir/pass_manager.h"

#include <map>
#include <set>

namespace tessera::transforms {

using namespace ir;

namespace {

/// Union-find over tensor values: the def-use components of plan step 3.
class ValueGroups {
public:
  Value *find(Value *value) {
    auto it = parent_.find(value);
    if (it == parent_.end() || it->second == value)
      return value;
    return it->second = find(it->second);
  }
  void unite(Value *a, Value *b) {
    if (!a->type().isTensor() || !b->type().isTensor())
      return;
    parent_[find(a)] = find(b);
  }

private:
  std::map<Value *, Value *> parent_;
};

ValueGroups connectedTensors(Operation *func) {
  ValueGroups groups;
  func->walk([&](Operation *op) {
    std::vector<Value *> values(op->operands());
    for (auto &result : op->results())
      values.push_back(result.get());
    Operation *parent = op->parentOp();
    if (op->code() == OpCode::Yield && parent && parent->code() == OpCode::While) {
      for (unsigned i = 0; i < op->numOperands(); ++i)
        groups.unite(op->operand(i), parent->body(0).argument(i));
    } else if (op->code() == OpCode::Yield && parent && parent != func) { // for, if
      for (unsigned i = 0; i < op->numOperands(); ++i)
        groups.unite(op->operand(i), parent->result(i));
    } else if (op->code() == OpCode::Condition) {
      for (unsigned i = 1; i < op->numOperands(); ++i) {
        groups.unite(op->operand(i), parent->result(i - 1));
        groups.unite(op->operand(i), parent->body(1).argument(i - 1));
      }
    } else if (op->code() == OpCode::For) {
      for (unsigned i = 3; i < op->numOperands(); ++i)
        groups.unite(op->operand(i), op->body().argument(i - 2));
      for (unsigned i = 0; i < op->numResults(); ++i)
        groups.unite(op->result(i), op->body().argument(i + 1));
    } else if (op->code() == OpCode::While) {
      for (unsigned i = 0; i < op->numOperands(); ++i)
        groups.unite(op->operand(i), op->body(0).argument(i));
    } else if (op->numRegions() == 0) {
      for (size_t i = 1; i < values.size(); ++i)
        groups.unite(values[0], values[i]);
    }
  });
  return groups;
}

struct Access {
  Operation *op;
  std::vector<int> order;
  int64_t ownWidth;
};

int pointeeBits(const Value *pointers) {
  return std::max(8, pointers->type().elementType().pointee().bitWidth());
}

// Plan step 2.
Access describeAccess(Operation *op, const analysis::AxisInfoAnalysis &axisInfo) {
  Value *pointers = op->operand(0);
  Access access{op, analysis::orderByContiguity(axisInfo.get(pointers)), 1};
  int fastest = access.order[0];
  int64_t width =
      std::min(axisInfo.pointerAlignment(pointers, fastest), pointers->type().shape()[fastest]);
  width = std::min<int64_t>(width, std::max(1, 128 / pointeeBits(pointers)));
  unsigned maskIndex = op->code() == OpCode::Load ? 1 : 2;
  if (op->numOperands() > maskIndex)
    width = std::min(width, axisInfo.maskAlignment(op->operand(maskIndex), fastest));
  access.ownWidth = width;
  return access;
}

/// Blocked layout with the given sizePerThread and order: lanes, then warps, go to the dims
/// in `order` as far as each can use them; the slowest dim takes the rest (as Triton). With
/// `warpsAcrossRows`, warps go to the other dims first and to order[0] last, so that a row
/// along order[0] stays within one warp (see rowReductions).
EncodingPtr blockedLayout(const std::vector<int64_t> &shape, const std::vector<int> &sizePerThread,
                          const std::vector<int> &order, int numWarps, bool warpsAcrossRows) {
  int rank = static_cast<int>(shape.size());
  std::vector<int> lanes(rank, 1), warps(rank, 1);
  int64_t remainingThreads = int64_t(numWarps) * kThreadsPerWarp;
  int remainingLanes = kThreadsPerWarp, remainingWarps = numWarps;
  for (int k = 0; k + 1 < rank; ++k) {
    int dim = order[k];
    int64_t useful = std::max<int64_t>(1, shape[dim] / sizePerThread[dim]);
    int64_t threads = std::clamp<int64_t>(remainingThreads, 1, useful);
    lanes[dim] = static_cast<int>(std::min<int64_t>(threads, remainingLanes));
    warps[dim] = static_cast<int>(std::clamp<int64_t>(threads / lanes[dim], 1, remainingWarps));
    remainingLanes /= lanes[dim];
    remainingWarps /= warps[dim];
    remainingThreads /= threads;
  }
  lanes[order[rank - 1]] = remainingLanes;
  warps[order[rank - 1]] = remainingWarps;
  if (warpsAcrossRows && rank > 1) {
    std::vector<int> warpOrder(order.begin() + 1, order.end());
    warpOrder.push_back(order[0]);
    std::fill(warps.begin(), warps.end(), 1);
    remainingWarps = numWarps;
    for (int k = 0; k + 1 < rank; ++k) {
      int dim = warpOrder[k];
      int64_t useful =
          std::max<int64_t>(1, shape[dim] / (int64_t(sizePerThread[dim]) * lanes[dim]));
      warps[dim] = static_cast<int>(std::clamp<int64_t>(useful, 1, remainingWarps));
      remainingWarps /= warps[dim];
    }
    warps[warpOrder.back()] = remainingWarps;
  }
  return std::make_shared<const BlockedEncoding>(sizePerThread, lanes, warps, order);
}

/// The groups (by root) whose tensors some `reduce` reduces along an axis, with that axis.
/// A reduction across warps goes through shared memory with barriers; along a warp it is
/// shuffles. Softmax and the norms reduce their rows, so their loads keep a row (order[0])
/// within a warp when the tile has rows enough for every warp (a row split over two warps costs
/// barriers on every tile: docs/perf/pass_decisions.md).
/// Each axis is recorded with the rank of the tensor reduced (a group spans shapes).
std::map<Value *, std::set<std::pair<size_t, int64_t>>> rowReductions(Operation *func,
                                                                      ValueGroups &groups) {
  std::map<Value *, std::set<std::pair<size_t, int64_t>>> axes;
  func->walk([&](Operation *op) {
    if (op->code() == OpCode::Reduce && op->numOperands() > 0 && op->operand(0)->type().isTensor())
      axes[groups.find(op->operand(0))].insert(
          {op->operand(0)->type().shape().size(), op->intAttr("axis")});
  });
  return axes;
}

// Plan step 4.
void rewriteAccess(Operation *op, const EncodingPtr &encoding) {
  Builder builder;
  builder.setInsertionPoint(op);
  for (unsigned i = 0; i < op->numOperands(); ++i) {
    Value *operand = op->operand(i);
    if (operand->type().isTensor() && !sameEncoding(operand->type().encoding(), encoding))
      op->setOperand(i, createConvert(builder, operand, encoding));
  }
  if (op->code() != OpCode::Load)
    return;
  Value *result = op->result();
  EncodingPtr original = result->type().encoding();
  result->setType(result->type().withEncoding(encoding));
  builder.setInsertionPointAfter(op);
  Value *back = createConvert(builder, result, original);
  result->replaceAllUsesWith(back);
  back->definingOp()->setOperand(0, result);
}

void coalesceFunction(Operation *func, int numWarps) {
  analysis::AxisInfoAnalysis axisInfo(func);
  ValueGroups groups = connectedTensors(func);
  std::map<Value *, std::set<std::pair<size_t, int64_t>>> reduced = rowReductions(func, groups);
  std::vector<Access> accesses;
  func->walk([&](Operation *op) {
    if ((op->code() == OpCode::Load || op->code() == OpCode::Store) &&
        op->operand(0)->type().isTensor())
      accesses.push_back(describeAccess(op, axisInfo));
  });

  std::vector<std::pair<Operation *, EncodingPtr>> decisions;
  for (const Access &access : accesses) {
    Value *pointers = access.op->operand(0);
    const std::vector<int64_t> &shape = pointers->type().shape();
    int64_t groupWidth = access.ownWidth;
    for (const Access &other : accesses) // plan step 3
      if (other.order == access.order && other.op->operand(0)->type().shape() == shape &&
          groups.find(other.op->operand(0)) == groups.find(pointers))
        groupWidth = std::max(groupWidth, other.ownWidth);
    if (access.op->code() == OpCode::Store)
      groupWidth = std::min(groupWidth, access.ownWidth);
    int64_t threads = int64_t(numWarps) * kThreadsPerWarp;
    groupWidth =
        std::min(groupWidth, std::max<int64_t>(1, pointers->type().numElements() / threads));

    std::vector<int> sizePerThread(shape.size(), 1);
    sizePerThread[access.order[0]] = static_cast<int>(groupWidth);
    // Rows reduced along order[0] stay within a warp, unless the group also reduces along
    // another axis (then neither choice is free, and Triton's order stays).
    auto it = reduced.find(groups.find(pointers));
    bool acrossRows =
        it != reduced.end() && it->second.size() == 1 &&
        *it->second.begin() == std::pair<size_t, int64_t>(shape.size(), access.order[0]);
    decisions.emplace_back(access.op,
                           blockedLayout(shape, sizePerThread, access.order, numWarps, acrossRows));
  }
  for (auto &[op, encoding] : decisions)
    if (!sameEncoding(op->operand(0)->type().encoding(), encoding))
      rewriteAccess(op, encoding);
}

} // namespace

void coalesce(Module &module) {
  int numWarps = moduleNumWarps(module);
  for (Operation *func : module.functions())
    coalesceFunction(func, numWarps);
}

TESSERA_REGISTER_PASS(coalesce, "coalesce",
                      "Give loads and stores the Blocked layout of up to 16-byte accesses per "
                      "thread (from axis info), with convert_layout around them",
                      coalesce);

} // namespace tessera::transforms
