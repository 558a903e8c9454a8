// Constant arithmetic for the canonicalize pass (see constant_folding.h). Float ops are
// computed in double and rounded once to the element type: for +, -, *, / that equals the
// correctly rounded result in f32, f16 and bf16, because double carries more than 2p+2 bits
// for each (Figueroa's double-rounding bound); fmod, negation and min/max are exact.
#include "transforms/constant_folding.h"

#include <cmath>
#include <limits>

namespace tessera::ir {

namespace {

uint64_t lowBitsMask(int width) { return width >= 64 ? ~0ull : (1ull << width) - 1; }

int64_t signExtend(uint64_t bits, int width) {
  if (width >= 64)
    return static_cast<int64_t>(bits);
  uint64_t sign = 1ull << (width - 1);
  return static_cast<int64_t>(((bits & lowBitsMask(width)) ^ sign) - sign);
}

/// Rounds to a binary float format with `mantissaBits` stored fraction bits and exponents in
/// [minExponent, maxExponent], with subnormals, ties to even, and overflow to infinity.
double roundToFormat(double value, int mantissaBits, int minExponent, int maxExponent) {
  if (!std::isfinite(value) || value == 0)
    return value;
  int exponent;
  std::frexp(value, &exponent); // value = m * 2^exponent, 0.5 <= |m| < 1
  int unbiased = std::max(exponent - 1, minExponent);
  double quantum = std::ldexp(1.0, unbiased - mantissaBits);  // one unit in the last place
  double rounded = std::nearbyint(value / quantum) * quantum; // default mode: ties to even
  double largest = std::ldexp(2.0 - std::ldexp(1.0, -mantissaBits), maxExponent);
  if (std::fabs(rounded) > largest)
    return std::copysign(std::numeric_limits<double>::infinity(), value);
  return rounded;
}

std::optional<bool> compareIntegers(const std::string &predicate, uint64_t a, uint64_t b,
                                    int width) {
  int64_t sa = signExtend(a, width), sb = signExtend(b, width);
  if (predicate == "eq")
    return a == b;
  if (predicate == "ne")
    return a != b;
  if (predicate == "slt")
    return sa < sb;
  if (predicate == "sle")
    return sa <= sb;
  if (predicate == "sgt")
    return sa > sb;
  if (predicate == "sge")
    return sa >= sb;
  if (predicate == "ult")
    return a < b;
  if (predicate == "ule")
    return a <= b;
  if (predicate == "ugt")
    return a > b;
  if (predicate == "uge")
    return a >= b;
  return std::nullopt;
}

std::optional<bool> compareFloats(const std::string &predicate, double a, double b) {
  bool unordered = std::isnan(a) || std::isnan(b);
  if (predicate == "ord")
    return !unordered;
  if (predicate == "uno")
    return unordered;
  if (predicate.size() != 3 || (predicate[0] != 'o' && predicate[0] != 'u'))
    return std::nullopt;
  std::string relation = predicate.substr(1);
  bool holds;
  if (relation == "eq")
    holds = a == b;
  else if (relation == "ne")
    holds = a != b;
  else if (relation == "lt")
    holds = a < b;
  else if (relation == "le")
    holds = a <= b;
  else if (relation == "gt")
    holds = a > b;
  else if (relation == "ge")
    holds = a >= b;
  else
    return std::nullopt;
  // a != b is true for NaN operands; the ordered form still requires both to be numbers.
  return predicate[0] == 'o' ? !unordered && holds : unordered || holds;
}

/// Integer binary ops on low-bit patterns; nullopt where the op is undefined (LLVM poison).
std::optional<uint64_t> foldIntegerBinary(OpCode code, uint64_t a, uint64_t b, int width) {
  int64_t sa = signExtend(a, width), sb = signExtend(b, width);
  bool signedOverflow = width > 1 && sa == signExtend(1ull << (width - 1), width) && sb == -1;
  switch (code) {
  case OpCode::AddI: return a + b;
  case OpCode::SubI: return a - b;
  case OpCode::MulI: return a * b;
  case OpCode::DivSI:
    if (sb == 0 || signedOverflow || width == 1)
      return std::nullopt;
    return static_cast<uint64_t>(sa / sb);
  case OpCode::RemSI:
    if (sb == 0 || signedOverflow || width == 1)
      return std::nullopt;
    return static_cast<uint64_t>(sa % sb);
  case OpCode::DivUI: return b == 0 ? std::nullopt : std::optional<uint64_t>(a / b);
  case OpCode::RemUI: return b == 0 ? std::nullopt : std::optional<uint64_t>(a % b);
  case OpCode::AndI: return a & b;
  case OpCode::OrI: return a | b;
  case OpCode::XOrI: return a ^ b;
  case OpCode::ShLI:
  case OpCode::ShRSI:
  case OpCode::ShRUI:
    if (b >= static_cast<uint64_t>(width))
      return std::nullopt;
    if (code == OpCode::ShLI)
      return a << b;
    return code == OpCode::ShRUI ? a >> b : static_cast<uint64_t>(sa >> b);
  case OpCode::MaxSI: return sa > sb ? a : b;
  case OpCode::MinSI: return sa < sb ? a : b;
  case OpCode::MaxUI: return a > b ? a : b;
  case OpCode::MinUI: return a < b ? a : b;
  default: return std::nullopt;
  }
}

/// Float binary ops in double (rounded by the caller); nullopt where the result is unspecified.
std::optional<double> foldFloatBinary(OpCode code, double a, double b) {
  switch (code) {
  case OpCode::AddF: return a + b;
  case OpCode::SubF: return a - b;
  case OpCode::MulF: return a * b;
  case OpCode::DivF: return a / b;
  case OpCode::RemF: return std::fmod(a, b);
  case OpCode::MaxNumF:
  case OpCode::MinNumF:
    // maxnum(+0, -0) may return either zero: leave it to the target.
    if (a == 0 && b == 0 && std::signbit(a) != std::signbit(b))
      return std::nullopt;
    return code == OpCode::MaxNumF ? std::fmax(a, b) : std::fmin(a, b);
  case OpCode::MaximumF:
  case OpCode::MinimumF: {
    if (std::isnan(a) || std::isnan(b))
      return std::numeric_limits<double>::quiet_NaN();
    bool isMax = code == OpCode::MaximumF;
    if (a == b) // equal, or zeros of either sign: -0 < +0 here
      return isMax == std::signbit(a) ? b : a;
    return isMax ? std::max(a, b) : std::min(a, b);
  }
  default: return std::nullopt;
  }
}

std::optional<Attribute> foldCast(OpCode code, const Attribute &operand, ScalarKind from,
                                  ScalarKind to) {
  int fromWidth = scalarBitWidth(from), toWidth = scalarBitWidth(to);
  const double exactIntegerLimit = std::ldexp(1.0, 53); // doubles hold integers up to 2^53
  if (code == OpCode::ExtSI || code == OpCode::ExtUI || code == OpCode::TruncI ||
      code == OpCode::SIToFP || code == OpCode::UIToFP) {
    std::optional<uint64_t> bits = integerBits(operand, from);
    if (!bits)
      return std::nullopt;
    int64_t asSigned = signExtend(*bits, fromWidth);
    if (code == OpCode::ExtSI)
      return integerAttribute(static_cast<uint64_t>(asSigned), to);
    if (code == OpCode::ExtUI || code == OpCode::TruncI)
      return integerAttribute(*bits, to);
    double exact =
        code == OpCode::SIToFP ? static_cast<double>(asSigned) : static_cast<double>(*bits);
    if (std::fabs(exact) > exactIntegerLimit) // would round twice
      return std::nullopt;
    std::optional<double> rounded = roundToFloatKind(exact, to);
    return rounded ? std::optional<Attribute>(*rounded) : std::nullopt;
  }
  std::optional<double> value = floatValue(operand);
  if (value)
    value = roundToFloatKind(*value, from);
  if (!value)
    return std::nullopt;
  if (code == OpCode::ExtF || code == OpCode::TruncF) {
    std::optional<double> rounded = roundToFloatKind(*value, to);
    return rounded ? std::optional<Attribute>(*rounded) : std::nullopt;
  }
  if (code != OpCode::FPToSI && code != OpCode::FPToUI)
    return std::nullopt;
  double truncated = std::trunc(*value); // NaN fails both range checks below
  if (code == OpCode::FPToSI) {
    double limit = std::ldexp(1.0, toWidth - 1);
    if (!(truncated >= -limit && truncated < limit))
      return std::nullopt;
    return integerAttribute(static_cast<uint64_t>(static_cast<int64_t>(truncated)), to);
  }
  if (!(truncated >= 0 && truncated < std::ldexp(1.0, toWidth)))
    return std::nullopt;
  return integerAttribute(static_cast<uint64_t>(truncated), to);
}

} // namespace

Attribute integerAttribute(uint64_t bits, ScalarKind kind) {
  int width = scalarBitWidth(kind);
  if (kind == ScalarKind::I1)
    return (bits & 1) != 0;
  return signExtend(bits & lowBitsMask(width), width);
}

std::optional<uint64_t> integerBits(const Attribute &value, ScalarKind kind) {
  uint64_t mask = lowBitsMask(scalarBitWidth(kind));
  if (auto *b = std::get_if<bool>(&value))
    return static_cast<uint64_t>(*b);
  if (auto *i = std::get_if<int64_t>(&value))
    return static_cast<uint64_t>(*i) & mask;
  return std::nullopt;
}

bool isZeroConstant(const Value *value) {
  const Operation *def = value->definingOp();
  if (def && def->code() == OpCode::Splat)
    def = def->operand(0)->definingOp();
  if (!def || def->code() != OpCode::Constant || !def->hasAttr("value"))
    return false;
  std::optional<double> constant = floatValue(def->attr("value"));
  return constant && *constant == 0.0;
}

std::optional<double> floatValue(const Attribute &value) {
  if (auto *d = std::get_if<double>(&value))
    return *d;
  if (auto *i = std::get_if<int64_t>(&value))
    return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<double> roundToFloatKind(double value, ScalarKind kind) {
  switch (kind) {
  case ScalarKind::F64: return value;
  case ScalarKind::F32: return roundToFormat(value, 23, -126, 127);
  case ScalarKind::F16: return roundToFormat(value, 10, -14, 15);
  case ScalarKind::BF16: return roundToFormat(value, 7, -126, 127);
  default: return std::nullopt;
  }
}

std::optional<Attribute> foldConstantOp(const Operation &op,
                                        const std::vector<Attribute> &operands) {
  if (op.numResults() != 1 || operands.size() != op.numOperands() || operands.empty())
    return std::nullopt;
  Type fromType = op.operand(0)->type().elementType();
  Type toType = op.result()->type().elementType();
  if (!fromType.isScalar() || !toType.isScalar())
    return std::nullopt;
  ScalarKind from = fromType.scalarKind(), to = toType.scalarKind();
  int width = scalarBitWidth(from);
  OpCode code = op.code();

  if (op.hasAttr("rounding")) // truncf toward zero: not modelled here
    return std::nullopt;
  if (operands.size() == 1 && code != OpCode::NegF)
    return foldCast(code, operands[0], from, to);
  if (code == OpCode::NegF) {
    std::optional<double> a = floatValue(operands[0]);
    if (a)
      a = roundToFloatKind(*a, from);
    return a ? std::optional<Attribute>(-*a) : std::nullopt;
  }
  if (operands.size() != 2)
    return std::nullopt;
  std::string predicate;
  if (op.hasAttr("predicate") && std::holds_alternative<std::string>(op.attr("predicate")))
    predicate = op.stringAttr("predicate");

  if (fromType.isInteger()) {
    std::optional<uint64_t> a = integerBits(operands[0], from), b = integerBits(operands[1], from);
    if (!a || !b)
      return std::nullopt;
    if (code == OpCode::CmpI) {
      std::optional<bool> holds = compareIntegers(predicate, *a, *b, width);
      return holds ? std::optional<Attribute>(*holds) : std::nullopt;
    }
    std::optional<uint64_t> bits = foldIntegerBinary(code, *a, *b, width);
    return bits ? std::optional<Attribute>(integerAttribute(*bits, to)) : std::nullopt;
  }
  // A constant's attribute may hold more precision than its type: use the typed value.
  std::optional<double> a = floatValue(operands[0]), b = floatValue(operands[1]);
  if (!a || !b || !(a = roundToFloatKind(*a, from)) || !(b = roundToFloatKind(*b, from)))
    return std::nullopt;
  if (code == OpCode::CmpF) {
    std::optional<bool> holds = compareFloats(predicate, *a, *b);
    return holds ? std::optional<Attribute>(*holds) : std::nullopt;
  }
  std::optional<double> exact = foldFloatBinary(code, *a, *b);
  if (!exact)
    return std::nullopt;
  std::optional<double> rounded = roundToFloatKind(*exact, to);
  return rounded ? std::optional<Attribute>(*rounded) : std::nullopt;
}

} // namespace tessera::ir
