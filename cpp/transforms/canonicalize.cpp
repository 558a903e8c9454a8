// canonicalize: local simplifications of the tile IR, applied to a fixpoint right after the
// front end. Constant folding (constant_folding.h), exact algebraic identities, shape ops on
// uniform tensors, and structured control flow with a known condition or trip count.
//
//   %0 = constant {value = 3} : () -> i32
//   %1 = constant {value = 4} : () -> i32
//   %2 = addi %0, %1 : (i32, i32) -> i32
//   %3 = muli %x, %one : (i32, i32) -> i32
//   %4 = if %true : (i1) -> i32 { yield %2 : (i32) -> () } { yield %3 : (i32) -> () }
// becomes
//   %0 = constant {value = 7} : () -> i32      // %4 is now %0
//
// Only rewrites that keep every result bit-identical: x*0 -> 0 holds for integers but not for
// floats (NaN, inf, -0), so float identities are limited to x*1, x/1, x-(+0) and x+(-0).
#include "ir/pass_manager.h"
#include "transforms/constant_folding.h"
#include "transforms/passes.h"

#include <cmath>

namespace tessera::ir {

namespace {

/// The "value" of the constant (scalar or splat tensor) that defines `value`, if any.
const Attribute *constantOf(const Value *value) {
  const Operation *def = value->definingOp();
  if (!def || def->code() != OpCode::Constant || !def->hasAttr("value"))
    return nullptr;
  return &def->attr("value");
}

/// Is `value` an integer constant equal to `expected` at its width (-1 means all ones)?
bool isInteger(const Value *value, int64_t expected) {
  const Attribute *attr = constantOf(value);
  Type element = value->type().elementType();
  if (!attr || !element.isScalar() || !element.isInteger())
    return false;
  std::optional<uint64_t> bits = integerBits(*attr, element.scalarKind());
  return bits && *bits == *integerBits(expected, element.scalarKind());
}

/// Is `value` a float constant equal to `expected`, sign of zero included?
bool isFloat(const Value *value, double expected) {
  const Attribute *attr = constantOf(value);
  if (!attr || !value->type().isFloat())
    return false;
  std::optional<double> actual = floatValue(*attr);
  return actual && *actual == expected && std::signbit(*actual) == std::signbit(expected);
}

std::optional<bool> constantCondition(const Value *value) {
  const Attribute *attr = constantOf(value);
  if (!attr || value->type().elementType() != Type::i1())
    return std::nullopt;
  std::optional<uint64_t> bits = integerBits(*attr, ScalarKind::I1);
  return bits ? std::optional<bool>(*bits != 0) : std::nullopt;
}

class Canonicalizer {
public:
  void run(Module &module) {
    // Each sweep visits operands before users; a rewrite that moves ops earlier (an inlined
    // `if`) is picked up by the next sweep. The cap only guards against a rule cycle.
    for (int sweep = 0; sweep < 100; ++sweep) {
      changed_ = false;
      for (Operation *func : module.functions())
        simplifyBlock(func->body());
      if (!changed_)
        return;
    }
  }

private:
  void simplifyBlock(Block &block) {
    for (auto it = block.operations().begin(); it != block.operations().end();) {
      Operation *op = (it++)->get(); // rewrites erase `op` or insert before it, never after
      for (auto &region : op->regions())
        simplifyBlock(region->front());
      changed_ |= simplify(op);
    }
  }

  bool simplify(Operation *op) {
    switch (op->code()) {
    case OpCode::If: return simplifyIf(op);
    case OpCode::For: return simplifyFor(op);
    case OpCode::Select: return simplifySelect(op);
    case OpCode::Splat:
    case OpCode::Broadcast:
    case OpCode::ExpandDims:
    case OpCode::Reshape:
    case OpCode::ConvertLayout: return simplifyShapeOp(op);
    case OpCode::AddPtr:
      return op->result()->type() == op->operand(0)->type() && isInteger(op->operand(1), 0) &&
             replace(op, op->operand(0));
    default: break;
    }
    if (!op->hasTrait(trait::ELEMENTWISE | trait::PURE) || op->numResults() != 1)
      return false;
    if (foldConstants(op))
      return true;
    if (op->numOperands() != 2)
      return false;
    return op->operand(0)->type().isInteger() ? simplifyIntegerIdentity(op)
                                              : simplifyFloatIdentity(op);
  }

  /// Replaces op's results by `values`, erases op and whatever it alone kept alive.
  bool replace(Operation *op, const std::vector<Value *> &values) {
    for (unsigned i = 0; i < op->numResults(); ++i)
      op->result(i)->replaceAllUsesWith(values[i]);
    std::vector<Operation *> definers;
    for (Value *operand : op->operands())
      if (operand->definingOp())
        definers.push_back(operand->definingOp());
    op->erase();
    eraseIfDead(definers);
    return true;
  }
  bool replace(Operation *op, Value *value) { return replace(op, std::vector<Value *>{value}); }

  Value *createBefore(Operation *before, OpCode code, const std::vector<Value *> &operands,
                      Type type, std::map<std::string, Attribute> attrs = {}) {
    auto created = Operation::create(code, operands, {type}, std::move(attrs));
    created->setLocation(before->location());
    return before->parentBlock()->insert(before, std::move(created))->result();
  }

  bool replaceWithConstant(Operation *op, const Attribute &value) {
    return replace(
        op, createBefore(op, OpCode::Constant, {}, op->result()->type(), {{"value", value}}));
  }

  bool foldConstants(Operation *op) {
    std::vector<Attribute> values;
    for (Value *operand : op->operands()) {
      const Attribute *attr = constantOf(operand);
      if (!attr)
        return false;
      values.push_back(*attr);
    }
    std::optional<Attribute> folded = foldConstantOp(*op, values);
    return folded && replaceWithConstant(op, *folded);
  }

  /// Identities exact for two's-complement integers (and compares of one value with itself).
  bool simplifyIntegerIdentity(Operation *op) {
    Value *lhs = op->operand(0), *rhs = op->operand(1);
    Type type = op->result()->type();
    Attribute zero = integerAttribute(0, type.elementType().scalarKind());
    bool wide = type.elementType().bitWidth() > 1; // i1 "1" is -1 when signed
    switch (op->code()) {
    case OpCode::AddI:
    case OpCode::OrI:
    case OpCode::XOrI:
      if (isInteger(rhs, 0) || isInteger(lhs, 0))
        return replace(op, isInteger(rhs, 0) ? lhs : rhs);
      if (op->code() == OpCode::XOrI && lhs == rhs)
        return replaceWithConstant(op, zero);
      if (op->code() == OpCode::OrI && (isInteger(lhs, -1) || isInteger(rhs, -1)))
        return replace(op, isInteger(lhs, -1) ? lhs : rhs);
      return op->code() == OpCode::OrI && lhs == rhs && replace(op, lhs);
    case OpCode::SubI:
      if (lhs == rhs)
        return replaceWithConstant(op, zero);
      return isInteger(rhs, 0) && replace(op, lhs);
    case OpCode::MulI:
    case OpCode::AndI: {
      int64_t unit = op->code() == OpCode::MulI ? 1 : -1;
      if (isInteger(rhs, 0) || isInteger(lhs, 0))
        return replace(op, isInteger(rhs, 0) ? rhs : lhs);
      if (isInteger(rhs, unit) || isInteger(lhs, unit))
        return replace(op, isInteger(rhs, unit) ? lhs : rhs);
      return op->code() == OpCode::AndI && lhs == rhs && replace(op, lhs);
    }
    case OpCode::DivSI:
    case OpCode::DivUI: return wide && isInteger(rhs, 1) && replace(op, lhs);
    case OpCode::RemSI:
    case OpCode::RemUI: return wide && isInteger(rhs, 1) && replaceWithConstant(op, zero);
    case OpCode::ShLI:
    case OpCode::ShRSI:
    case OpCode::ShRUI: return isInteger(rhs, 0) && replace(op, lhs);
    case OpCode::MaxSI:
    case OpCode::MinSI:
    case OpCode::MaxUI:
    case OpCode::MinUI: return lhs == rhs && replace(op, lhs);
    case OpCode::CmpI: {
      if (lhs != rhs || !op->hasAttr("predicate") ||
          !std::holds_alternative<std::string>(op->attr("predicate")))
        return false;
      const std::string &predicate = op->stringAttr("predicate");
      bool reflexive = predicate == "eq" || predicate == "sle" || predicate == "sge" ||
                       predicate == "ule" || predicate == "uge";
      bool irreflexive = predicate == "ne" || predicate == "slt" || predicate == "sgt" ||
                         predicate == "ult" || predicate == "ugt";
      return (reflexive || irreflexive) && replaceWithConstant(op, reflexive);
    }
    default: return false;
    }
  }

  /// The float identities that hold for every input, NaN, infinities and -0 included.
  bool simplifyFloatIdentity(Operation *op) {
    Value *lhs = op->operand(0), *rhs = op->operand(1);
    switch (op->code()) {
    case OpCode::MulF:
      if (isFloat(lhs, 1.0))
        return replace(op, rhs);
      return isFloat(rhs, 1.0) && replace(op, lhs);
    case OpCode::DivF: return isFloat(rhs, 1.0) && replace(op, lhs);
    case OpCode::SubF: // x - (+0) == x, even for x = -0
      return isFloat(rhs, 0.0) && replace(op, lhs);
    case OpCode::AddF: // x + (-0) == x, but -0 + (+0) == +0
      if (isFloat(lhs, -0.0))
        return replace(op, rhs);
      return isFloat(rhs, -0.0) && replace(op, lhs);
    default: return false;
    }
  }

  bool simplifySelect(Operation *op) {
    if (std::optional<bool> condition = constantCondition(op->operand(0)))
      return replace(op, op->operand(*condition ? 1 : 2));
    return op->operand(1) == op->operand(2) && replace(op, op->operand(1));
  }

  /// Shape ops of a uniform tensor stay uniform: constant -> constant, splat -> splat.
  bool simplifyShapeOp(Operation *op) {
    Value *source = op->operand(0);
    Type type = op->result()->type();
    if (const Attribute *value = constantOf(source))
      return replaceWithConstant(op, *value);
    if (op->code() == OpCode::Splat)
      return false;
    if (source->type() == type)
      return replace(op, source);
    Operation *def = source->definingOp();
    if (def && def->code() == OpCode::Splat)
      return replace(op, createBefore(op, OpCode::Splat, {def->operand(0)}, type));
    // A reshape undoing a reshape (both keep the row-major element order): a descriptor load
    // of a [1, BLOCK, D] block is a 2-D tile reshaped to 3-D (language/
    // block_pointer_semantic.py), which the kernel reshapes back to [BLOCK, D].
    auto reshapes = [](const Operation *o) {
      return o && (o->code() == OpCode::Reshape || o->code() == OpCode::ExpandDims);
    };
    if (reshapes(op) && reshapes(def) && def->operand(0)->type() == type)
      return replace(op, def->operand(0));
    return false;
  }

  /// `if` on a constant: the chosen region's ops move before the `if`.
  bool simplifyIf(Operation *op) {
    std::optional<bool> condition = constantCondition(op->operand(0));
    if (!condition)
      return false;
    Block &chosen = op->body(*condition ? 0 : 1);
    Operation *yield = chosen.terminator();
    while (chosen.operations().front().get() != yield)
      op->parentBlock()->insert(op, chosen.remove(chosen.operations().front().get()));
    std::vector<Value *> values = yield->operands(); // a copy: erasing op clears the yield's
    return replace(op, values);
  }

  bool simplifyFor(Operation *op) {
    std::vector<Value *> inits(op->operands().begin() + 3, op->operands().end());
    // Zero trips (lb >= ub, signed): the results are the inits.
    const Attribute *lower = constantOf(op->operand(0)), *upper = constantOf(op->operand(1));
    if (lower && upper && op->operand(0)->type() == op->operand(1)->type()) {
      ScalarKind kind = op->operand(0)->type().scalarKind();
      std::optional<uint64_t> lb = integerBits(*lower, kind), ub = integerBits(*upper, kind);
      auto asSigned = [&](uint64_t bits) {
        return std::get<int64_t>(integerAttribute(bits, kind));
      };
      if (lb && ub && kind != ScalarKind::I1 && asSigned(*lb) >= asSigned(*ub))
        return replace(op, inits);
    }
    // A carried value yielded unchanged is its init throughout (dce then drops it).
    Block &body = op->body();
    Operation *yield = body.terminator();
    bool changed = false;
    for (unsigned k = 0; k < inits.size(); ++k) {
      Value *argument = body.argument(k + 1);
      if (yield->operand(k) != argument)
        continue;
      if (op->result(k)->hasUses() || argument->users().size() > 1) {
        op->result(k)->replaceAllUsesWith(inits[k]);
        argument->replaceAllUsesWith(inits[k]);
        changed = true;
      }
    }
    return changed;
  }

  bool changed_ = false;
};

void runCanonicalize(Module &module) { Canonicalizer().run(module); }

} // namespace

TESSERA_REGISTER_PASS(canonicalize, "canonicalize",
                      "fold constants, apply exact identities, simplify known control flow",
                      runCanonicalize);

} // namespace tessera::ir
