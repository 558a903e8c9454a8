// Constant folding arithmetic against independent references: the compiler's own _Float16 and
// float conversions, a bit-level bfloat16 rounding, and 128-bit integer arithmetic.
#include "ir/builder.h"
#include "transforms/constant_folding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

using namespace tessera::ir;

namespace {

/// float -> bfloat16 by the usual bit trick (round to nearest even on the top 16 bits).
double bfloat16Reference(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7fff + ((bits >> 16) & 1);
  bits &= 0xffff0000u;
  float rounded;
  std::memcpy(&rounded, &bits, sizeof rounded);
  return rounded;
}

bool sameDouble(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

/// Folds `code` on two scalar constants of `type` through a real op.
std::optional<Attribute> fold(OpCode code, Type type, Attribute a, Attribute b,
                              const std::string &predicate = "") {
  Block block;
  Builder builder(&block);
  Value *x = builder.create(OpCode::Constant, {}, {type}, {{"value", a}})->result();
  Value *y = builder.create(OpCode::Constant, {}, {type}, {{"value", b}})->result();
  std::map<std::string, Attribute> attrs;
  if (!predicate.empty())
    attrs["predicate"] = predicate;
  Type resultType = predicate.empty() ? type : Type::i1();
  Operation *op = builder.create(code, {x, y}, {resultType}, attrs);
  return foldConstantOp(*op, {a, b});
}

int64_t foldInt(OpCode code, Type type, int64_t a, int64_t b) {
  std::optional<Attribute> result = fold(code, type, a, b);
  EXPECT_TRUE(result.has_value()) << opName(code);
  return result ? std::get<int64_t>(*result) : 0;
}

} // namespace

TEST(ConstantFolding, RoundsLikeTheHardwareConversions) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> exponent(-30, 20);
  std::uniform_real_distribution<double> mantissa(-2.0, 2.0);
  for (int i = 0; i < 100000; ++i) {
    double x = std::ldexp(mantissa(rng), exponent(rng));
    EXPECT_TRUE(sameDouble(*roundToFloatKind(x, ScalarKind::F16), double(_Float16(x)))) << x;
    EXPECT_TRUE(sameDouble(*roundToFloatKind(x, ScalarKind::F32), double(float(x)))) << x;
    float f = float(x);
    EXPECT_TRUE(sameDouble(*roundToFloatKind(f, ScalarKind::BF16), bfloat16Reference(f))) << f;
    if (HasFailure())
      return;
  }
  // Exact midpoints between neighbours (normal and subnormal) must round to the even one.
  std::uniform_int_distribution<int> significand(1024, 2047);
  for (int i = 0; i < 10000; ++i) {
    double tie = std::ldexp(significand(rng) + 0.5, exponent(rng) - 10);
    EXPECT_TRUE(sameDouble(*roundToFloatKind(tie, ScalarKind::F16), double(_Float16(tie))))
        << tie;
    float tieBf16 = std::ldexp(float(significand(rng) / 8) + 0.5f, exponent(rng));
    EXPECT_TRUE(sameDouble(*roundToFloatKind(tieBf16, ScalarKind::BF16),
                           bfloat16Reference(tieBf16)))
        << tieBf16;
    if (HasFailure())
      return;
  }
  EXPECT_TRUE(std::isinf(*roundToFloatKind(65520.0, ScalarKind::F16))); // ties to even: 2^16
  EXPECT_EQ(*roundToFloatKind(65519.0, ScalarKind::F16), 65504.0);
  EXPECT_FALSE(roundToFloatKind(1.0, ScalarKind::F8E4M3).has_value());
}

TEST(ConstantFolding, IntegerOpsWrapLikeWideArithmetic) {
  std::mt19937_64 rng(11);
  const ScalarKind kinds[] = {ScalarKind::I8, ScalarKind::I16, ScalarKind::I32, ScalarKind::I64};
  for (int i = 0; i < 20000; ++i) {
    ScalarKind kind = kinds[i % 4];
    int width = scalarBitWidth(kind);
    Type type = Type::scalar(kind);
    int64_t a = int64_t(rng()), b = int64_t(rng());
    // Reference: exact arithmetic in 128 bits, then the low `width` bits, sign-extended.
    auto wrap = [&](__int128 exact) {
      unsigned __int128 low = static_cast<unsigned __int128>(exact) << (128 - width);
      return int64_t(static_cast<__int128>(low) >> (128 - width));
    };
    auto typed = [&](int64_t v) { return wrap(v); }; // the constant as its type reads it
    __int128 x = typed(a), y = typed(b);
    EXPECT_EQ(foldInt(OpCode::AddI, type, a, b), wrap(x + y));
    EXPECT_EQ(foldInt(OpCode::SubI, type, a, b), wrap(x - y));
    EXPECT_EQ(foldInt(OpCode::MulI, type, a, b), wrap(x * y));
    if (y != 0 && !(y == -1 && x == -(__int128(1) << (width - 1)))) {
      EXPECT_EQ(foldInt(OpCode::DivSI, type, a, b), wrap(x / y));
      EXPECT_EQ(foldInt(OpCode::RemSI, type, a, b), wrap(x % y));
    }
    unsigned __int128 ux = uint64_t(x) & (width == 64 ? ~0ull : (1ull << width) - 1);
    unsigned __int128 uy = uint64_t(y) & (width == 64 ? ~0ull : (1ull << width) - 1);
    if (uy != 0)
      EXPECT_EQ(foldInt(OpCode::DivUI, type, a, b), wrap(__int128(ux / uy)));
    EXPECT_EQ(std::get<bool>(*fold(OpCode::CmpI, type, a, b, "slt")), x < y);
    EXPECT_EQ(std::get<bool>(*fold(OpCode::CmpI, type, a, b, "ult")), ux < uy);
    if (HasFailure())
      return;
  }
}

TEST(ConstantFolding, DeclinesUndefinedResults) {
  Type i32 = Type::i32();
  EXPECT_FALSE(fold(OpCode::DivSI, i32, int64_t(5), int64_t(0)).has_value());
  EXPECT_FALSE(fold(OpCode::DivSI, i32, int64_t(INT32_MIN), int64_t(-1)).has_value());
  EXPECT_FALSE(fold(OpCode::RemUI, i32, int64_t(5), int64_t(0)).has_value());
  EXPECT_FALSE(fold(OpCode::ShLI, i32, int64_t(1), int64_t(32)).has_value());
  EXPECT_FALSE(fold(OpCode::MaxNumF, Type::f32(), 0.0, -0.0).has_value());
  EXPECT_EQ(foldInt(OpCode::ShLI, i32, 1, 31), INT32_MIN);
  EXPECT_FALSE(fold(OpCode::CmpI, i32, int64_t(1), int64_t(2), "no_such_predicate"));
}
