// The transfer functions of the AxisInfo analysis (axis_info.h): per op, its result's
// contiguity, divisibility and constancy from its operands'. The rules follow Triton's
// AxisInfo, with one correction: where a result's runs are shorter than an operand's, only the
// operand's alignment at that run length counts (AxisInfo::divisibilityAt). Index arithmetic
// is assumed not to overflow and, for division, remainder and comparisons, to be
// non-negative, as in Triton.
#include "analysis/axis_info.h"

#include <algorithm>
#include <array>
#include <numeric>

namespace tessera::analysis::detail {

using namespace ir;

namespace {

int64_t multiplyDivisors(int64_t a, int64_t b) {
  // Both are at most 2^31, so the product fits before capping.
  return std::min(a * b, kMaxDivisibility);
}

/// Sign-extends `value` from the element width of `type` (i1 stays 0/1), as the integer ops
/// of the IR wrap.
int64_t wrapTo(int64_t value, const Type &type) {
  int bits = type.bitWidth();
  if (bits == 1)
    return value & 1;
  if (bits >= 64)
    return value;
  uint64_t mask = (uint64_t(1) << bits) - 1, sign = uint64_t(1) << (bits - 1);
  uint64_t low = static_cast<uint64_t>(value) & mask;
  return static_cast<int64_t>((low ^ sign) - sign);
}

std::optional<int64_t> foldCompare(const std::string &predicate, int64_t a, int64_t b) {
  bool unsignedCompare = predicate[0] == 'u';
  if (unsignedCompare && (a < 0 || b < 0))
    return std::nullopt; // wrap-around order: not worth modelling
  std::string relation = unsignedCompare ? predicate.substr(1) : predicate;
  if (relation == "eq")
    return a == b;
  if (relation == "ne")
    return a != b;
  if (relation == "slt" || relation == "lt")
    return a < b;
  if (relation == "sle" || relation == "le")
    return a <= b;
  if (relation == "sgt" || relation == "gt")
    return a > b;
  if (relation == "sge" || relation == "ge")
    return a >= b;
  return std::nullopt;
}

std::optional<int64_t> foldBinary(const Operation &op, int64_t a, int64_t b) {
  switch (op.code()) {
  case OpCode::AddI: return a + b;
  case OpCode::SubI: return a - b;
  case OpCode::MulI: return a * b;
  case OpCode::DivSI:
  case OpCode::DivUI: return b == 0 ? std::nullopt : std::optional<int64_t>(a / b);
  case OpCode::RemSI:
  case OpCode::RemUI: return b == 0 ? std::nullopt : std::optional<int64_t>(a % b);
  case OpCode::AndI: return a & b;
  case OpCode::OrI: return a | b;
  case OpCode::XOrI: return a ^ b;
  case OpCode::ShLI: return b < 0 || b >= 63 ? std::nullopt : std::optional<int64_t>(a << b);
  case OpCode::ShRSI:
  case OpCode::ShRUI:
    return b < 0 || b >= 63 || a < 0 ? std::nullopt : std::optional<int64_t>(a >> b);
  case OpCode::MaxSI:
  case OpCode::MaxUI: return std::max(a, b);
  case OpCode::MinSI:
  case OpCode::MinUI: return std::min(a, b);
  case OpCode::CmpI: return foldCompare(op.stringAttr("predicate"), a, b);
  default: return std::nullopt;
  }
}

/// A tensor (or scalar) all of whose values equal `value`.
AxisInfo constantInfo(int64_t value, const std::vector<int64_t> &shape) {
  AxisInfo info = AxisInfo::unknown(static_cast<int>(shape.size()));
  for (size_t d = 0; d < shape.size(); ++d) {
    info.divisibility[d] = highestPowerOfTwoDivisor(value);
    info.constancy[d] = shape[d];
  }
  info.constantValue = value;
  return info;
}

bool isConstant(const AxisInfo &info, int64_t value) {
  return info.constantValue && *info.constantValue == value;
}

/// Elementwise ops this analysis has no rule for: equal inputs still give equal outputs.
AxisInfo constancyOnly(const Operation &op, const std::vector<const AxisInfo *> &ins, int rank) {
  AxisInfo info = AxisInfo::unknown(rank);
  for (int d = 0; d < rank; ++d) {
    int64_t constancy = shapeOf(op.result())[d];
    for (const AxisInfo *in : ins)
      constancy = std::gcd(constancy, in->constancy[d]);
    info.constancy[d] = constancy;
  }
  return info;
}

/// addi, subi, addptr: contiguous + constant stays contiguous; divisibility is the gcd.
AxisInfo addInfo(const Operation &op, const AxisInfo &l, const AxisInfo &r) {
  int64_t rhsScale = op.code() == OpCode::AddPtr ? pointeeBytes(op.operand(0)->type()) : 1;
  AxisInfo info = AxisInfo::unknown(l.rank());
  for (int d = 0; d < l.rank(); ++d) {
    int64_t contiguity = std::gcd(l.contiguity[d], r.constancy[d]);
    if (op.code() != OpCode::SubI) // constant - contiguous runs downwards
      contiguity = std::max(contiguity, std::gcd(l.constancy[d], r.contiguity[d]));
    info.contiguity[d] = contiguity;
    info.divisibility[d] = std::gcd(l.divisibilityAt(d, contiguity),
                                    multiplyDivisors(r.divisibilityAt(d, contiguity), rhsScale));
    info.constancy[d] = std::gcd(l.constancy[d], r.constancy[d]);
  }
  return info;
}

AxisInfo mulInfo(const AxisInfo &l, const AxisInfo &r) {
  AxisInfo info = AxisInfo::unknown(l.rank());
  for (int d = 0; d < l.rank(); ++d) {
    info.constancy[d] = std::gcd(l.constancy[d], r.constancy[d]);
    if (isConstant(r, 1) || isConstant(l, 1)) { // x * 1 = x
      const AxisInfo &x = isConstant(r, 1) ? l : r;
      info.contiguity[d] = x.contiguity[d];
      info.divisibility[d] = x.divisibility[d];
    } else {
      info.divisibility[d] = multiplyDivisors(l.divisibilityAt(d, 1), r.divisibilityAt(d, 1));
    }
  }
  return info;
}

/// divsi/divui by a value constant along each run of the dividend.
AxisInfo divInfo(const AxisInfo &l, const AxisInfo &r) {
  AxisInfo info = AxisInfo::unknown(l.rank());
  for (int d = 0; d < l.rank(); ++d) {
    int64_t constancy = std::gcd(l.constancy[d], r.constancy[d]);
    // A run of g consecutive values starting at a multiple of g, divided by a multiple of g,
    // never crosses a multiple of the divisor: the quotient is constant over the run.
    int64_t g =
        std::min({l.contiguity[d], l.divisibility[d], r.divisibilityAt(d, 1), r.constancy[d]});
    info.constancy[d] = std::max(constancy, g);
    if (isConstant(r, 1)) {
      info.contiguity[d] = l.contiguity[d];
      info.divisibility[d] = l.divisibility[d];
    } else if (r.constantValue && *r.constantValue > 0 &&
               highestPowerOfTwoDivisor(*r.constantValue) == *r.constantValue &&
               l.divisibilityAt(d, 1) % *r.constantValue == 0) {
      info.divisibility[d] = l.divisibilityAt(d, 1) / *r.constantValue; // exact shift
    } else if (isConstant(l, 0)) {
      info.divisibility[d] = l.divisibility[d];
    }
  }
  return info;
}

/// remsi/remui: x % m keeps the runs of x that start at multiples of m's alignment.
AxisInfo remInfo(const AxisInfo &l, const AxisInfo &r, const std::vector<int64_t> &shape) {
  if (isConstant(r, 1))
    return constantInfo(0, shape);
  AxisInfo info = AxisInfo::unknown(l.rank());
  for (int d = 0; d < l.rank(); ++d) {
    int64_t contiguity =
        std::min({l.contiguity[d], l.divisibility[d], r.divisibilityAt(d, 1), r.constancy[d]});
    info.contiguity[d] = contiguity;
    info.divisibility[d] = std::gcd(l.divisibilityAt(d, contiguity), r.divisibilityAt(d, 1));
    info.constancy[d] = std::gcd(l.constancy[d], r.constancy[d]);
  }
  return info;
}

/// andi/ori/xori/shifts/min/max: contiguity is lost; a few divisibility facts survive.
AxisInfo bitwiseInfo(const Operation &op, const AxisInfo &l, const AxisInfo &r) {
  AxisInfo info = AxisInfo::unknown(l.rank());
  for (int d = 0; d < l.rank(); ++d) {
    info.constancy[d] = std::gcd(l.constancy[d], r.constancy[d]);
    int64_t lDiv = l.divisibilityAt(d, 1), rDiv = r.divisibilityAt(d, 1);
    switch (op.code()) {
    case OpCode::AndI: // low zero bits of either operand stay zero
      info.divisibility[d] = std::max(lDiv, rDiv);
      break;
    case OpCode::ShLI:
      if (r.constantValue && *r.constantValue >= 0 && *r.constantValue < 32)
        info.divisibility[d] = multiplyDivisors(lDiv, int64_t(1) << *r.constantValue);
      break;
    case OpCode::ShRSI:
    case OpCode::ShRUI:
      if (r.constantValue && *r.constantValue >= 0 && *r.constantValue < 32)
        info.divisibility[d] = std::max<int64_t>(1, lDiv >> *r.constantValue);
      break;
    default: // or, xor, min, max: what divides both operands divides the result
      info.divisibility[d] = std::min(lDiv, rDiv);
    }
    if (isConstant(r, 0) &&
        (op.code() == OpCode::ShLI || op.code() == OpCode::ShRSI || op.code() == OpCode::ShRUI ||
         op.code() == OpCode::OrI || op.code() == OpCode::XOrI)) {
      info.contiguity[d] = l.contiguity[d]; // x op 0 = x
      info.divisibility[d] = l.divisibility[d];
    }
  }
  return info;
}

/// cmpi: `x < n` with x contiguous and n a constant aligned like x's runs is constant over
/// each run (the flip from true to false lands on a run boundary).
AxisInfo compareInfo(const Operation &op, const AxisInfo &l, const AxisInfo &r) {
  const std::string &predicate = op.stringAttr("predicate");
  bool lhsRuns =
      predicate == "slt" || predicate == "sge" || predicate == "ult" || predicate == "uge";
  bool rhsRuns =
      predicate == "sgt" || predicate == "sle" || predicate == "ugt" || predicate == "ule";
  AxisInfo info = AxisInfo::unknown(l.rank());
  for (int d = 0; d < l.rank(); ++d) {
    int64_t constancy = std::gcd(l.constancy[d], r.constancy[d]);
    const AxisInfo *runs = lhsRuns ? &l : rhsRuns ? &r : nullptr;
    const AxisInfo *bound = lhsRuns ? &r : &l;
    if (runs)
      constancy = std::max(constancy, std::min({runs->contiguity[d], runs->divisibility[d],
                                                bound->divisibilityAt(d, 1), bound->constancy[d]}));
    info.constancy[d] = constancy;
  }
  return info;
}

AxisInfo selectInfo(const AxisInfo &cond, const AxisInfo &a, const AxisInfo &b) {
  if (cond.constantValue)
    return *cond.constantValue ? a : b;
  AxisInfo info = AxisInfo::unknown(a.rank());
  for (int d = 0; d < a.rank(); ++d) {
    int64_t contiguity = std::min(std::gcd(a.contiguity[d], cond.constancy[d]),
                                  std::gcd(b.contiguity[d], cond.constancy[d]));
    info.contiguity[d] = contiguity;
    info.divisibility[d] =
        std::min(a.divisibilityAt(d, contiguity), b.divisibilityAt(d, contiguity));
    info.constancy[d] = std::gcd(std::gcd(a.constancy[d], b.constancy[d]), cond.constancy[d]);
  }
  if (a.constantValue && a.constantValue == b.constantValue)
    info.constantValue = a.constantValue;
  return info;
}

AxisInfo broadcastInfo(const AxisInfo &src, const std::vector<int64_t> &srcShape,
                       const std::vector<int64_t> &shape) {
  AxisInfo info = src;
  for (size_t d = 0; d < shape.size(); ++d)
    if (srcShape[d] != shape[d]) { // a size-1 dim repeated: constant along it
      info.contiguity[d] = 1;
      info.constancy[d] = shape[d];
    }
  return info;
}

/// Divisibility that holds for every single value: the best of the per-dim facts.
int64_t everyValueDivisibility(const AxisInfo &info) {
  if (info.constantValue)
    return highestPowerOfTwoDivisor(*info.constantValue);
  int64_t divisibility = 1;
  for (int d = 0; d < info.rank(); ++d)
    divisibility = std::max(divisibility, info.divisibilityAt(d, 1));
  return divisibility;
}

AxisInfo expandDimsInfo(const AxisInfo &src, int axis) {
  AxisInfo info = src;
  info.contiguity.insert(info.contiguity.begin() + axis, 1);
  info.divisibility.insert(info.divisibility.begin() + axis, everyValueDivisibility(src));
  info.constancy.insert(info.constancy.begin() + axis, 1);
  return info;
}

AxisInfo reshapeInfo(const AxisInfo &src, const std::vector<int64_t> &srcShape,
                     const std::vector<int64_t> &shape) {
  AxisInfo info = AxisInfo::unknown(static_cast<int>(shape.size()));
  bool allEqual = true;
  for (size_t d = 0; d < srcShape.size(); ++d)
    allEqual = allEqual && src.constancy[d] == srcShape[d];
  if (allEqual) { // every value the same: still so in any shape
    for (size_t d = 0; d < shape.size(); ++d)
      info.constancy[d] = shape[d];
    std::fill(info.divisibility.begin(), info.divisibility.end(), everyValueDivisibility(src));
    info.constantValue = src.constantValue;
  }
  return info;
}

// ---- The rule of each op: (op, operand infos) -> result info --------------------------------

using Ins = std::vector<const AxisInfo *>;

int rankOf(const Operation &op) { return static_cast<int>(shapeOf(op.result()).size()); }

AxisInfo constantRule(const Operation &op, const Ins &) {
  std::vector<int64_t> shape = shapeOf(op.result());
  const Attribute &value = op.attr("value");
  if (const auto *integer = std::get_if<int64_t>(&value))
    return constantInfo(*integer, shape);
  if (const auto *boolean = std::get_if<bool>(&value))
    return constantInfo(*boolean ? 1 : 0, shape);
  AxisInfo info = constantInfo(0, shape); // a float splat: equal values, nothing else
  info.divisibility.assign(shape.size(), 1);
  info.constantValue.reset();
  return info;
}

AxisInfo makeRangeRule(const Operation &op, const Ins &) {
  int64_t start = op.intAttr("start"), length = op.intAttr("end") - start;
  if (length == 1)
    return constantInfo(start, shapeOf(op.result()));
  AxisInfo info = AxisInfo::unknown(1);
  info.contiguity[0] = length;
  info.divisibility[0] = highestPowerOfTwoDivisor(start);
  return info;
}

AxisInfo splatRule(const Operation &op, const Ins &ins) {
  std::vector<int64_t> shape = shapeOf(op.result());
  int rank = static_cast<int>(shape.size());
  AxisInfo info = AxisInfo::unknown(rank);
  info.divisibility.assign(rank, ins[0]->divisibility[0]);
  info.constancy = shape;
  info.constantValue = ins[0]->constantValue;
  return info;
}

AxisInfo broadcastRule(const Operation &op, const Ins &ins) {
  return broadcastInfo(*ins[0], shapeOf(op.operand(0)), shapeOf(op.result()));
}

AxisInfo expandDimsRule(const Operation &op, const Ins &ins) {
  return expandDimsInfo(*ins[0], static_cast<int>(op.intAttr("axis")));
}

AxisInfo reshapeRule(const Operation &op, const Ins &ins) {
  return reshapeInfo(*ins[0], shapeOf(op.operand(0)), shapeOf(op.result()));
}

AxisInfo transRule(const Operation &op, const Ins &ins) { // result dim i is operand dim order[i]
  const std::vector<int64_t> &order = op.arrayAttr("order");
  int rank = rankOf(op);
  AxisInfo info = AxisInfo::unknown(rank);
  for (int i = 0; i < rank; ++i) {
    info.contiguity[i] = ins[0]->contiguity[order[i]];
    info.divisibility[i] = ins[0]->divisibility[order[i]];
    info.constancy[i] = ins[0]->constancy[order[i]];
  }
  info.constantValue = ins[0]->constantValue;
  return info;
}

AxisInfo sameAsOperandRule(const Operation &, const Ins &ins) { return *ins[0]; }

AxisInfo bitcastRule(const Operation &op, const Ins &ins) {
  const Type &from = op.operand(0)->type(), &to = op.result()->type();
  if (from.elementType() == to.elementType())
    return *ins[0];
  if (from.elementType().isPointer() && to.elementType().isPointer()) {
    // The same addresses (ptr.to(tl.pointer_type(T), bitcast=True)): divisibility (bytes) and
    // constancy stay; contiguity counts pointee elements, so it stays only for equal sizes.
    AxisInfo info = *ins[0];
    if (pointeeBytes(from) != pointeeBytes(to))
      info.contiguity.assign(rankOf(op), 1);
    return info;
  }
  return constancyOnly(op, ins, rankOf(op));
}

AxisInfo pointerIntegerRule(const Operation &op, const Ins &ins) {
  // Same bits; contiguity counted in elements no longer applies.
  AxisInfo info = *ins[0];
  info.contiguity.assign(rankOf(op), 1);
  return info;
}

AxisInfo constancyOnlyRule(const Operation &op, const Ins &ins) { // e.g. equal addresses
  return constancyOnly(op, ins, rankOf(op));                      // load equal values
}

AxisInfo selectRule(const Operation &, const Ins &ins) {
  return selectInfo(*ins[0], *ins[1], *ins[2]);
}

AxisInfo unknownRule(const Operation &op, const Ins &) { return AxisInfo::unknown(rankOf(op)); }

/// A binary integer op: its own rule, then constant folding and x * 0, x & 0.
using BinaryInfo = AxisInfo (*)(const Operation &op, const AxisInfo &l, const AxisInfo &r);
template <BinaryInfo rule> AxisInfo binaryRule(const Operation &op, const Ins &ins) {
  if (ins.size() != 2)
    return constancyOnly(op, ins, rankOf(op));
  const AxisInfo &l = *ins[0], &r = *ins[1];
  AxisInfo info = rule(op, l, r);
  std::vector<int64_t> shape = shapeOf(op.result());
  if (l.constantValue && r.constantValue && op.code() != OpCode::AddPtr)
    if (std::optional<int64_t> folded = foldBinary(op, *l.constantValue, *r.constantValue))
      return constantInfo(wrapTo(*folded, op.result()->type()), shape);
  if ((op.code() == OpCode::MulI || op.code() == OpCode::AndI) &&
      (isConstant(l, 0) || isConstant(r, 0)))
    return constantInfo(0, shape);
  return info;
}

AxisInfo mulBinary(const Operation &, const AxisInfo &l, const AxisInfo &r) {
  return mulInfo(l, r);
}
AxisInfo divBinary(const Operation &, const AxisInfo &l, const AxisInfo &r) {
  return divInfo(l, r);
}
AxisInfo remBinary(const Operation &op, const AxisInfo &l, const AxisInfo &r) {
  return remInfo(l, r, shapeOf(op.result()));
}

using RuleTable = std::array<AxisInfoRule, kNumOpCodes>;

RuleTable makeRuleTable() {
  RuleTable t{};
  auto set = [&](std::initializer_list<OpCode> codes, const char *name, AxisInfoFn fn) {
    for (OpCode code : codes)
      t[static_cast<size_t>(code)] = {name, fn};
  };
  set({OpCode::Constant}, "constant", constantRule);
  set({OpCode::MakeRange}, "make_range", makeRangeRule);
  set({OpCode::Splat}, "splat", splatRule);
  set({OpCode::Broadcast}, "broadcast", broadcastRule);
  set({OpCode::ExpandDims}, "expand_dims", expandDimsRule);
  set({OpCode::Reshape}, "reshape", reshapeRule);
  set({OpCode::Trans}, "trans", transRule);
  set({OpCode::ConvertLayout, OpCode::ExtSI, OpCode::ExtUI, OpCode::TruncI}, "same_as_operand",
      sameAsOperandRule);
  set({OpCode::Bitcast}, "bitcast", bitcastRule);
  set({OpCode::PtrToInt, OpCode::IntToPtr}, "pointer_integer", pointerIntegerRule);
  set({OpCode::Load}, "constancy_only", constancyOnlyRule);
  set({OpCode::Select}, "select", selectRule);
  set({OpCode::ProgramId, OpCode::NumPrograms}, "unknown", unknownRule);
  set({OpCode::AddI, OpCode::SubI, OpCode::AddPtr}, "add", binaryRule<addInfo>);
  set({OpCode::MulI}, "mul", binaryRule<mulBinary>);
  set({OpCode::DivSI, OpCode::DivUI}, "div", binaryRule<divBinary>);
  set({OpCode::RemSI, OpCode::RemUI}, "rem", binaryRule<remBinary>);
  set({OpCode::AndI, OpCode::OrI, OpCode::XOrI, OpCode::ShLI, OpCode::ShRSI, OpCode::ShRUI,
       OpCode::MaxSI, OpCode::MinSI, OpCode::MaxUI, OpCode::MinUI},
      "bitwise", binaryRule<bitwiseInfo>);
  set({OpCode::CmpI}, "compare", binaryRule<compareInfo>);
  // Every other elementwise op keeps only its operands' constancy; anything else: unknown.
  for (size_t i = 0; i < kNumOpCodes; ++i)
    if (!t[i].transfer)
      t[i] = hasTrait(static_cast<OpCode>(i), trait::ELEMENTWISE)
                 ? AxisInfoRule{"constancy_only", constancyOnlyRule}
                 : AxisInfoRule{"unknown", unknownRule};
  return t;
}

} // namespace

const AxisInfoRule &axisInfoRule(OpCode code) {
  static const RuleTable table = makeRuleTable();
  return table[static_cast<size_t>(code)];
}

AxisInfo transfer(const Operation &op, const std::vector<const AxisInfo *> &ins) {
  return axisInfoRule(op.code()).transfer(op, ins);
}

} // namespace tessera::analysis::detail
