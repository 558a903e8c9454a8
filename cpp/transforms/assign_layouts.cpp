// assign_layouts: the first layout pass. Gives every tensor value of the layout-free tile IR
// (op results, for/while block arguments, if results) an encoding: the default Blocked layout
// of its shape, a Slice of it where a value feeds expand_dims, and convert_layout where users
// disagree. coalesce and remove_layout_conversions refine the result.
//
//   %r = make_range {end = 64, start = 0} : () -> tensor<64xi32>
//   %e = expand_dims %r {axis = 1} : (tensor<64xi32>) -> tensor<64x1xi32>
// becomes (P = the default blocked layout of 64x1)
//   %r = make_range {end = 64, start = 0} : () -> tensor<64xi32, #slice<{dim = 1, parent = P}>>
//   %e = expand_dims %r {axis = 1} : (tensor<64xi32, #slice<...>>) -> tensor<64x1xi32, P>
//
// Plan:
// 1. Values carried across region boundaries (for/while block arguments and results, if
//    results) get the default encoding of their shape: one type on both sides of a yield.
// 2. Ops are visited in reverse program order, so that all users of a value have their
//    layouts when the value's is chosen: the value takes the encoding its users need
//    (expand_dims: a Slice of its result's; elementwise ops, loads, broadcasts: their
//    result's; stores: the default). A reduce result is the Slice of its operands' default
//    layout along the reduced axis; a scan keeps its operands' layout.
// 3. Where users disagree, a value computed from scalars alone (make_range, splat, constant
//    and elementwise ops of those) is recomputed once per encoding; any other value takes
//    the encoding most of its uses want and convert_layout feeds the rest.
#include "transforms/layout_passes.h"

#include "ir/diagnostics.h"
#include "ir/pass_manager.h"

#include <map>

namespace tessera::transforms {

using namespace ir;

namespace {

bool isPowerOfTwo(int64_t value) { return value > 0 && (value & (value - 1)) == 0; }

void setEncoding(Value *value, EncodingPtr encoding) {
  value->setType(value->type().withEncoding(std::move(encoding)));
}

class LayoutAssigner {
public:
  LayoutAssigner(Operation *func, int numWarps) : func_(func), numWarps_(numWarps) {}

  void run() {
    func_->walk([&](Operation *op) { checkShapes(op); });
    func_->walk([&](Operation *op) { fixCarriedValues(op); });
    visitBlock(func_->body());
  }

private:
  EncodingPtr defaultFor(const Value *value) const {
    return defaultEncoding(value->type().shape(), numWarps_);
  }

  void checkShapes(Operation *op) {
    auto check = [&](const Value *value) {
      for (int64_t extent : value->type().shape())
        if (!isPowerOfTwo(extent))
          emitError(*op, "tensor extents must be powers of two to get a layout, got " +
                             value->type().str());
    };
    for (auto &result : op->results())
      check(result.get());
    for (auto &region : op->regions())
      for (auto &argument : region->front().arguments())
        check(argument.get());
  }

  // Plan step 1.
  void fixCarriedValues(Operation *op) {
    if (op->code() != OpCode::For && op->code() != OpCode::While && op->code() != OpCode::If)
      return;
    auto fix = [&](Value *value) {
      if (value->type().isTensor() && !value->type().encoding())
        setEncoding(value, defaultFor(value));
    };
    for (auto &result : op->results())
      fix(result.get());
    for (auto &region : op->regions())
      for (auto &argument : region->front().arguments())
        fix(argument.get());
  }

  void visitBlock(Block &block) {
    // A snapshot: clones and conversions get inserted while we walk.
    std::vector<Operation *> ops;
    for (auto &op : block.operations())
      ops.push_back(op.get());
    for (auto it = ops.rbegin(); it != ops.rend(); ++it)
      visitOp(*it);
  }

  void visitOp(Operation *op) {
    for (unsigned i = 0; i < op->numResults(); ++i) {
      Value *result = op->result(i);
      if (!result->type().isTensor())
        continue;
      if (!result->type().encoding())
        chooseEncoding(op, result);
      routeUses(result);
    }
    for (auto region = op->regions().rbegin(); region != op->regions().rend(); ++region) {
      Block &block = (*region)->front();
      visitBlock(block);
      for (auto &argument : block.arguments())
        if (argument->type().isTensor())
          routeUses(argument.get());
    }
  }

  /// The encoding `use` needs of `value` (null: no preference). Users come later in program
  /// order, so they already have their layouts.
  EncodingPtr wantOf(const OperandUse &use, Value *value) const {
    Operation *user = use.user;
    unsigned i = use.index;
    switch (user->code()) {
    case OpCode::Yield: {
      Operation *parent = user->parentOp();
      if (parent->code() == OpCode::While)
        return parent->body(0).argument(i)->type().encoding();
      return parent->result(i)->type().encoding();
    }
    case OpCode::Condition:
      return i == 0 ? nullptr : user->parentOp()->body(1).argument(i - 1)->type().encoding();
    case OpCode::For: return i < 3 ? nullptr : user->result(i - 3)->type().encoding();
    case OpCode::While: return user->body(0).argument(i)->type().encoding();
    case OpCode::ConvertLayout: return nullptr;
    case OpCode::Store: {
      EncodingPtr pointers = user->operand(0)->type().encoding();
      return pointers ? pointers : defaultFor(user->operand(0));
    }
    default: break;
    }
    if (followsResultLayout(*user))
      if (EncodingPtr layout = user->result()->type().encoding())
        return operandEncoding(*user, i, layout);
    return defaultFor(value);
  }

  // Plan steps 2 and 3.
  void chooseEncoding(Operation *op, Value *result) {
    if (op->code() == OpCode::Reduce) { // the default layout of the operands, sliced at axis
      int axis = static_cast<int>(op->intAttr("axis"));
      setEncoding(result, std::make_shared<const SliceEncoding>(axis, defaultFor(op->operand(0))));
      return;
    }
    if (!followsResultLayout(*op)) {
      setEncoding(result, defaultFor(result));
      return;
    }
    std::vector<std::pair<EncodingPtr, int>> wants; // distinct encodings, uses wanting each
    for (const OperandUse &use : usesOf(result)) {
      EncodingPtr want = wantOf(use, result);
      if (!want)
        continue;
      auto it = std::find_if(wants.begin(), wants.end(),
                             [&](auto &entry) { return sameEncoding(entry.first, want); });
      if (it == wants.end())
        wants.emplace_back(want, 1);
      else
        ++it->second;
    }
    if (wants.empty()) {
      setEncoding(result, defaultFor(result));
      return;
    }
    if (wants.size() > 1 && isRematerializable(result)) {
      setEncoding(result, wants[0].first);
      for (size_t k = 1; k < wants.size(); ++k)
        recomputeFor(op, wants[k].first);
      return;
    }
    EncodingPtr fallback = defaultFor(result);
    auto best = wants.begin();
    for (auto it = wants.begin(); it != wants.end(); ++it)
      if (it->second > best->second ||
          (it->second == best->second && sameEncoding(it->first, fallback)))
        best = it;
    setEncoding(result, best->first);
  }

  /// Clones `op` (right after it) with its result in `encoding` and moves the uses that want
  /// that encoding to the clone. The clone's operands are visited later, with their users.
  void recomputeFor(Operation *op, const EncodingPtr &encoding) {
    Value *original = op->result();
    std::vector<OperandUse> moving;
    for (const OperandUse &use : usesOf(original))
      if (sameEncoding(wantOf(use, original), encoding))
        moving.push_back(use);
    std::map<Value *, Value *> mapping;
    Builder builder;
    builder.setInsertionPointAfter(op);
    Operation *copy = builder.insert(op->clone(mapping));
    setEncoding(copy->result(), encoding);
    for (const OperandUse &use : moving)
      use.user->setOperand(use.index, copy->result());
  }

  /// Computed from scalars alone by ops that can produce any layout (no loads).
  bool isRematerializable(Value *value) {
    auto it = rematerializable_.find(value);
    if (it != rematerializable_.end())
      return it->second;
    Operation *def = value->definingOp();
    bool result = def && followsResultLayout(*def) && def->code() != OpCode::Load &&
                  def->hasTrait(trait::PURE);
    for (unsigned i = 0; result && i < def->numOperands(); ++i)
      if (def->operand(i)->type().isTensor() && !isRematerializable(def->operand(i)))
        result = false;
    rematerializable_[value] = result;
    return result;
  }

  /// Feeds every use that needs another encoding than `value` has through one
  /// convert_layout per encoding, placed right after the definition.
  void routeUses(Value *value) {
    EncodingPtr have = value->type().encoding();
    std::vector<std::pair<EncodingPtr, Value *>> converts;
    for (const OperandUse &use : usesOf(value)) {
      EncodingPtr want = wantOf(use, value);
      if (!want || sameEncoding(want, have))
        continue;
      auto it = std::find_if(converts.begin(), converts.end(),
                             [&](auto &entry) { return sameEncoding(entry.first, want); });
      if (it == converts.end()) {
        Builder builder;
        if (Operation *def = value->definingOp())
          builder.setInsertionPointAfter(def);
        else
          builder.setInsertionPoint(value->ownerBlock()->operations().front().get());
        converts.emplace_back(want, createConvert(builder, value, want));
        it = converts.end() - 1;
      }
      use.user->setOperand(use.index, it->second);
    }
  }

  Operation *func_;
  int numWarps_;
  std::map<Value *, bool> rematerializable_;
};

} // namespace

void assignLayouts(Module &module) {
  int numWarps = moduleNumWarps(module);
  for (Operation *func : module.functions())
    LayoutAssigner(func, numWarps).run();
}

TESSERA_REGISTER_PASS(assign_layouts, "assign_layouts",
                      "Give every tensor a layout encoding (default Blocked, Slice for "
                      "expand_dims operands, convert_layout where users disagree)",
                      assignLayouts);

} // namespace tessera::transforms
