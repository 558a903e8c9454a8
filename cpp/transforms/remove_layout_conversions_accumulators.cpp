// The first step of the remove_layout_conversions pass (not a pass of its own; the pass calls
// propagateAccumulatorLayouts, and its lit test is remove_layout_conversions_accumulators.ir):
// a dot's #mma accumulator layout flows forward into the values computed from the dot's
// result, retyping them in place (as the forward layout propagation of Triton's
// RemoveLayoutConversions, from dot anchors). Without it, the
// backward rematerialization recomputes a softmax chain in #mma for the next dot's operand
// while the original chain stays alive in #blocked for its other users: attention would run
// its exponentials twice.
//
//   %s = dot %q, %k, %z : (...) -> tensor<64x64xf32, #mma>
//   %c = convert_layout %s : (tensor<64x64xf32, #mma>) -> tensor<64x64xf32, #B>
//   %m = reduce %c {axis = 1} : (tensor<64x64xf32, #B>) -> tensor<64xf32, #slice<{dim = 1, parent =
//   #B}>>
// becomes
//   %m = reduce %s {axis = 1} : (tensor<64x64xf32, #mma>) -> tensor<64xf32, #slice<{dim = 1, parent
//   = #mma}>>
// (and %c, now unused, goes; a store of a propagated value gets a conversion before it).
//
// Plan:
// 1. From every dot result, walk users forward: ops that can compute in any layout
//    (elementwise, broadcast, expand_dims of a matching Slice, reduce into a Slice, scan) take
//    the layout their operand brings, and so do conversions into Blocked layouts (which
//    become no-ops, folded later); a yield, or a `for` init operand, carries it into the
//    loop's block argument and result. Anything else (store, load, dot, conversion, other
//    regions) stops the walk. A value reached first keeps the first layout.
// 2. Retype the chosen values.
// 3. Fix up every operand whose layout is no longer what its user needs with a conversion:
//    the other operands of a retyped op (splats, masks: the rematerialization then recomputes
//    them), loop inits, yields, and the stores and other anchors that keep their old layout.
#include "transforms/dot_layout_rules.h"
#include "transforms/layout_passes.h"

#include "layout/mma.h"

#include <map>
#include <set>

namespace tessera::transforms {

using namespace ir;

namespace {

/// Ops that can produce their results in a layout that one of their operands brings.
bool takesOperandLayout(const Operation &op) {
  if (op.code() == OpCode::Load || !op.hasTrait(trait::PURE))
    return false;
  return followsResultLayout(op) || op.code() == OpCode::Reduce || op.code() == OpCode::Scan;
}

/// A conversion into a register layout of the Blocked family (where assign_layouts and
/// coalesce put values), which the propagated layout makes a no-op; conversions into dot
/// operand or shared layouts stay.
bool isConversionToBlocked(const Operation &op) {
  if (op.code() != OpCode::ConvertLayout)
    return false;
  const Encoding *target = op.result()->type().encoding().get();
  while (const auto *slice = dynamic_cast<const SliceEncoding *>(target))
    target = slice->getParent().get();
  return dynamic_cast<const BlockedEncoding *>(target) != nullptr;
}

/// The layout of `op`'s results when its operand `index` is in `layout`; null when none.
EncodingPtr resultLayoutFor(const Operation &op, const EncodingPtr &layout) {
  switch (op.code()) {
  case OpCode::Reduce:
    return std::make_shared<const SliceEncoding>(static_cast<int>(op.intAttr("axis")), layout);
  case OpCode::ExpandDims: {
    const auto *slice = dynamic_cast<const SliceEncoding *>(layout.get());
    if (!slice || slice->getDim() != op.intAttr("axis"))
      return nullptr;
    return slice->getParent();
  }
  default: return layout;
  }
}

class AccumulatorPropagation {
public:
  explicit AccumulatorPropagation(Operation *func) : func_(func) {}

  bool run() {
    func_->walk([&](Operation *op) {
      if (op->code() == OpCode::Dot &&
          dynamic_cast<const MmaEncoding *>(op->result()->type().encoding().get()))
        visit(op->result(), op->result()->type().encoding());
    });
    while (!worklist_.empty()) {
      auto [value, layout] = worklist_.back();
      worklist_.pop_back();
      for (const OperandUse &use : usesOf(value))
        propagateInto(use, layout);
    }
    if (chosen_.empty())
      return false;
    retype();
    return true;
  }

private:
  void visit(Value *value, const EncodingPtr &layout) {
    if (visited_.insert(value).second)
      worklist_.emplace_back(value, layout);
  }

  /// Chooses `layout` for `value`; false when it already has another one chosen.
  bool choose(Value *value, const EncodingPtr &layout) {
    if (auto it = chosen_.find(value); it != chosen_.end())
      return sameEncoding(it->second, layout);
    if (visited_.count(value) && !sameEncoding(value->type().encoding(), layout))
      return false; // reached before in its own layout (a dot result)
    if (!sameEncoding(value->type().encoding(), layout))
      chosen_[value] = layout;
    return true;
  }

  void chooseCarried(Operation *loop, unsigned carried, const EncodingPtr &layout) {
    Value *argument = loop->body().argument(carried + 1), *result = loop->result(carried);
    if (!argument->type().isTensor())
      return;
    auto conflicts = [&](Value *value) {
      auto it = chosen_.find(value);
      return it != chosen_.end()
                 ? !sameEncoding(it->second, layout)
                 : visited_.count(value) && !sameEncoding(value->type().encoding(), layout);
    };
    if (conflicts(argument) || conflicts(result))
      return;
    choose(argument, layout);
    choose(result, layout);
    visit(argument, layout);
    visit(result, layout);
  }

  // Plan step 1.
  void propagateInto(const OperandUse &use, const EncodingPtr &layout) {
    Operation *user = use.user;
    Operation *parent = user->parentBlock() ? user->parentBlock()->parentOp() : nullptr;
    if (user->code() == OpCode::Yield && parent && parent->code() == OpCode::For) {
      chooseCarried(parent, use.index, layout);
      return;
    }
    if (user->code() == OpCode::For && use.index >= 3) {
      chooseCarried(user, use.index - 3, layout);
      return;
    }
    if (!takesOperandLayout(*user) && !isConversionToBlocked(*user))
      return;
    EncodingPtr resultLayout = resultLayoutFor(*user, layout);
    if (!resultLayout)
      return;
    for (auto &result : user->results()) {
      if (!result->type().isTensor() || result->type().rank() != resultLayout->rank())
        return;
      if (!choose(result.get(), resultLayout))
        return;
    }
    for (auto &result : user->results())
      visit(result.get(), resultLayout);
  }

  /// The layout operand `index` of `op` must have once the values are retyped; null when any
  /// will do (a conversion).
  EncodingPtr requiredLayout(Operation *op, unsigned index) {
    Operation *parent = op->parentBlock() ? op->parentBlock()->parentOp() : nullptr;
    if (op->code() == OpCode::ConvertLayout)
      return nullptr;
    if (op->code() == OpCode::Yield && parent && parent->code() == OpCode::For)
      return parent->body().argument(index + 1)->type().encoding();
    if (op->code() == OpCode::For && index >= 3)
      return op->body().argument(index - 2)->type().encoding();
    if (takesOperandLayout(*op) && op->numResults() >= 1 && op->result()->type().isTensor())
      return operandEncoding(*op, index, op->result()->type().encoding());
    auto it = original_.find(op->operand(index));
    return it == original_.end() ? nullptr : it->second;
  }

  // Plan steps 2 and 3.
  void retype() {
    for (auto &[value, layout] : chosen_) {
      original_[value] = value->type().encoding();
      value->setType(value->type().withEncoding(layout));
    }
    std::vector<Operation *> ops;
    func_->walk([&](Operation *op) {
      if (op != func_)
        ops.push_back(op);
    });
    for (Operation *op : ops)
      for (unsigned i = 0; i < op->numOperands(); ++i) {
        Value *operand = op->operand(i);
        if (!operand->type().isTensor())
          continue;
        EncodingPtr required = requiredLayout(op, i);
        if (!required || sameEncoding(required, operand->type().encoding()))
          continue;
        Builder builder;
        builder.setInsertionPoint(op);
        op->setOperand(i, createConvert(builder, operand, required));
      }
  }

  Operation *func_;
  std::vector<std::pair<Value *, EncodingPtr>> worklist_;
  std::set<Value *> visited_;
  std::map<Value *, EncodingPtr> chosen_, original_;
};

} // namespace

bool propagateAccumulatorLayouts(Operation *func) { return AccumulatorPropagation(func).run(); }

} // namespace tessera::transforms
