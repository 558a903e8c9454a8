// AxisInfo: expected facts on the standard kernels (vector add, 2D tile, loops) and a
// soundness check against a reference: a small interpreter evaluates every value of random
// integer kernels for many argument values, and every claimed run must really be there.
#include "analysis/axis_info.h"
#include "kernel_builders.h"
#include "reference_interpreter.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

using namespace tessera;
using namespace tessera::ir;
using namespace tessera::testing;
using analysis::AxisInfo;
using analysis::AxisInfoAnalysis;

namespace {

/// Checks that the runs `info` claims exist in `value`. `step` is what one element adds
/// within a contiguity run (the element size for pointers).
void expectFactsHold(const AxisInfo &info, const Concrete &value, int64_t step,
                     const std::string &what) {
  int rank = static_cast<int>(value.shape.size());
  ASSERT_EQ(info.rank(), rank) << what;
  V strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * value.shape[d + 1];
  for (int d = 0; d < rank; ++d) {
    int64_t contiguity = info.contiguity[d], constancy = info.constancy[d];
    ASSERT_EQ(value.shape[d] % contiguity, 0) << what << " contiguity " << info.str();
    ASSERT_EQ(value.shape[d] % constancy, 0) << what << " constancy " << info.str();
    for (int64_t flat = 0; flat < static_cast<int64_t>(value.data.size()); ++flat) {
      int64_t index = flat / strides[d] % value.shape[d];
      int64_t runStart = flat - (index % contiguity) * strides[d];
      int64_t expected = value.data[runStart] + (index % contiguity) * step;
      ASSERT_EQ(value.data[flat], expected) << what << " not contiguous: " << info.str();
      ASSERT_EQ(value.data[runStart] % info.divisibility[d], 0)
          << what << " run start " << value.data[runStart] << ": " << info.str();
      int64_t constantStart = flat - (index % constancy) * strides[d];
      ASSERT_EQ(value.data[flat], value.data[constantStart]) << what << " not constant: "
                                                              << info.str();
      if (info.constantValue)
        ASSERT_EQ(value.data[flat], *info.constantValue) << what;
    }
  }
}

/// Runs the reference over several argument sets and checks every value's facts.
void expectSound(Operation *func, const std::vector<V> &argumentSets) {
  AxisInfoAnalysis analysis(func);
  for (const V &arguments : argumentSets)
    for (int64_t pid : {0, 1, 3, 6}) {
      Interpreter interpreter;
      interpreter.run(func, arguments, pid, [&](Value *value, const Concrete &concrete) {
        Type element = value->type().elementType();
        int64_t step = element.isPointer() ? element.pointee().bitWidth() / 8 : 1;
        expectFactsHold(analysis.get(value), concrete, step, value->type().str());
      });
    }
}

} // namespace

// ---------------------------------------------------------------- expected facts

TEST(AxisInfo, VectorAddOffsetsPointersAndMask) {
  KernelBuilder k(vectorAddArguments(ScalarKind::F32), {16, 16, 16, 16});
  VectorAdd add = buildVectorAdd(k, ScalarKind::F32, 1024);
  ASSERT_NO_THROW(verify(k.module));
  AxisInfoAnalysis analysis(k.func);
  const AxisInfo &offsets = analysis.get(add.offsets);
  EXPECT_EQ(offsets.contiguity, V{1024});
  EXPECT_EQ(offsets.divisibility, V{1024}); // pid * 1024 + 0
  EXPECT_EQ(offsets.constancy, V{1});
  const AxisInfo &pointers = analysis.get(add.xPointers);
  EXPECT_EQ(pointers.contiguity, V{1024});
  EXPECT_EQ(pointers.divisibility, V{16}); // bytes: the argument's alignment
  EXPECT_EQ(analysis.pointerAlignment(add.xPointers, 0), 4); // 16 bytes of f32
  EXPECT_EQ(analysis.get(add.mask).constancy, V{16}); // n % 16 == 0: offs < n in runs of 16
  EXPECT_EQ(analysis.maskAlignment(add.mask, 0), 16);
  EXPECT_EQ(analysis.get(add.loadX->result()).contiguity, V{1});
  expectSound(k.func, {{4096, 8192, 16384, 160}, {16, 4112, 8208, 32}});
}

TEST(AxisInfo, UnhintedArgumentsLimitAlignmentAndMask) {
  KernelBuilder k(vectorAddArguments(ScalarKind::F32), {4, 16, 16, 0});
  VectorAdd add = buildVectorAdd(k, ScalarKind::F32, 256);
  AxisInfoAnalysis analysis(k.func);
  EXPECT_EQ(analysis.get(add.xPointers).divisibility, V{4});
  EXPECT_EQ(analysis.pointerAlignment(add.xPointers, 0), 1);
  EXPECT_EQ(analysis.get(add.mask).constancy, V{1}); // n unknown: any lane may flip
  expectSound(k.func, {{4, 4096, 8192, 77}, {36, 16, 32, 300}});
}

TEST(AxisInfo, TileOffsetsAreContiguousAlongRows) {
  KernelBuilder k(tileCopyArguments(ScalarKind::F32), {16, 16, 16, 16, 16});
  TileCopy copy = buildTileCopy(k, 32, 64);
  ASSERT_NO_THROW(verify(k.module));
  AxisInfoAnalysis analysis(k.func);
  const AxisInfo &offsets = analysis.get(copy.offsets);
  EXPECT_EQ(offsets.contiguity, (V{1, 64}));
  EXPECT_EQ(offsets.divisibility, (V{1, 16}));
  const AxisInfo &pointers = analysis.get(copy.inPointers);
  EXPECT_EQ(pointers.contiguity, (V{1, 64}));
  EXPECT_EQ(pointers.divisibility, (V{4, 16}));
  EXPECT_EQ(analysis::orderByContiguity(pointers), (std::vector<int>{1, 0}));
  EXPECT_EQ(analysis.get(copy.mask).constancy, (V{16, 16}));
  expectSound(k.func, {{1024, 65536, 64, 32, 48}, {16, 32, 80, 16, 64}});
}

TEST(AxisInfo, ConstantsFoldAndDivisionRules) {
  KernelBuilder k({Type::i32()}, {16});
  Value *twelve = k.binary(OpCode::MulI, k.constant(3), k.constant(4));
  Value *range = k.range(0, 128);
  Value *quotient = k.binary(OpCode::DivSI, range, k.splat(k.constant(8), {128}));
  Value *remainder = k.binary(OpCode::RemSI, range, k.splat(k.constant(8), {128}));
  Value *scaled = k.binary(OpCode::MulI, range, k.splat(k.arg(0), {128}));
  Value *shifted = k.binary(OpCode::AddI, k.range(16, 144), k.splat(k.constant(2), {128}));
  Value *reversed = k.compare("sgt", k.splat(k.arg(0), {128}), range);
  k.finish();
  AxisInfoAnalysis analysis(k.func);
  EXPECT_EQ(analysis.get(twelve).constantValue, 12);
  EXPECT_EQ(analysis.get(twelve).divisibility, V{4});
  EXPECT_EQ(analysis.get(quotient).constancy, V{8});
  EXPECT_EQ(analysis.get(remainder).contiguity, V{8});
  EXPECT_EQ(analysis.get(scaled).divisibility, V{16}); // contiguity lost, arg's 16 remains
  EXPECT_EQ(analysis.get(scaled).contiguity, V{1});
  EXPECT_EQ(analysis.get(shifted).contiguity, V{128});
  EXPECT_EQ(analysis.get(shifted).divisibility, V{2});
  EXPECT_EQ(analysis.get(reversed).constancy, V{16}); // n > offs: flips at a multiple of 16
  expectSound(k.func, {{16}, {48}, {160}});
}

namespace {

/// for k in range(0, K, 32): acc += load(ptrs); ptrs += 32; count += 4; odd += 3
/// with ptrs = x + arange(0, 128). Returns the for op.
Operation *buildLoop(KernelBuilder &k) {
  Value *pointers = k.pointers(k.arg(0), k.range(0, 128));
  Value *zero = k.constant(0), *bound = k.arg(1), *step = k.constant(32);
  Operation *loop = k.create(OpCode::For, {zero, bound, step, pointers, zero, zero},
                             {pointers->type(), Type::i32(), Type::i32()}, {}, 1);
  Block &body = loop->body();
  body.addArgument(Type::i32());
  Value *carriedPointers = body.addArgument(pointers->type());
  Value *count = body.addArgument(Type::i32()), *odd = body.addArgument(Type::i32());
  k.builder.setInsertionPointToEnd(&body);
  k.load(carriedPointers);
  Value *next = k.op(OpCode::AddPtr, {carriedPointers, k.splat(k.constant(32), {128})},
                     pointers->type());
  Value *nextCount = k.binary(OpCode::AddI, count, k.constant(4));
  Value *nextOdd = k.binary(OpCode::AddI, odd, k.constant(3));
  k.create(OpCode::Yield, {next, nextCount, nextOdd}, {});
  k.builder.setInsertionPointToEnd(&k.func->body());
  k.finish();
  return loop;
}

} // namespace

TEST(AxisInfo, LoopCarriedValuesReachAFixpoint) {
  KernelBuilder k({Type::pointer(Type::f32()), Type::i32()}, {16, 16});
  Operation *loop = buildLoop(k);
  ASSERT_NO_THROW(verify(k.module));
  AxisInfoAnalysis analysis(k.func);
  const AxisInfo &pointers = analysis.get(loop->result(0));
  EXPECT_EQ(pointers.contiguity, V{128});
  EXPECT_EQ(pointers.divisibility, V{16});
  EXPECT_EQ(analysis.get(loop->body().argument(1)).contiguity, V{128});
  EXPECT_EQ(analysis.get(loop->result(1)).divisibility, V{4}); // 0, 4, 8, ...
  EXPECT_FALSE(analysis.get(loop->result(1)).constantValue.has_value());
  EXPECT_EQ(analysis.get(loop->result(2)).divisibility, V{1}); // 0, 3, 6, ...
  EXPECT_EQ(analysis.get(loop->body().argument(0)).divisibility, V{32}); // 0, 32, ...
  expectSound(k.func, {{4096, 128}, {64, 96}});
}

TEST(AxisInfo, JoinKeepsOnlyWhatBothSidesKnow) {
  AxisInfo a = AxisInfo::unknown(1), b = AxisInfo::unknown(1);
  a.contiguity = {64};
  a.divisibility = {1024};
  b.contiguity = {8};
  b.divisibility = {16};
  AxisInfo both = analysis::join(a, b);
  EXPECT_EQ(both.contiguity, V{8});
  EXPECT_EQ(both.divisibility, V{8}); // a's runs of 8 start at 1024k + 8j
  EXPECT_EQ(a.divisibilityAt(0, 64), 1024);
  EXPECT_EQ(a.divisibilityAt(0, 4), 4);
}

// ---------------------------------------------------------------- random soundness

namespace {

/// Random integer kernels over tensors of shape [8, 16] built from ranges, splats of
/// arguments and constants, and every integer op with a rule (non-negative values, no
/// division by zero: the analysis' documented assumptions).
class RandomKernel {
public:
  explicit RandomKernel(unsigned seed) : random_(seed) {}

  void build(KernelBuilder &k) {
    for (int i = 0; i < 3; ++i)
      pool_.push_back(leaf(k));
    for (int i = 0; i < 24; ++i)
      pool_.push_back(combine(k));
    k.pointers(k.arg(2), pick()); // addptr on the result of everything above
    k.finish();
  }

private:
  int64_t choose(const V &options) { return options[random_() % options.size()]; }
  Value *pick() { return pool_[random_() % pool_.size()]; }

  Value *leaf(KernelBuilder &k) {
    switch (random_() % 4) {
    case 0: { // column of a range: [8, 1] -> [8, 16]
      int64_t start = choose({0, 8, 16});
      return k.broadcast(k.expandDims(k.range(start, start + 8), 1), shape_);
    }
    case 1:
      return k.broadcast(k.expandDims(k.range(0, 16), 0), shape_);
    case 2:
      return k.splat(k.arg(random_() % 2), shape_);
    default:
      return k.splat(k.constant(choose({0, 1, 2, 3, 4, 8, 16, 48, 64})), shape_);
    }
  }

  Value *positive(KernelBuilder &k) {
    if (random_() % 2)
      return k.splat(k.arg(random_() % 2), shape_);
    return k.splat(k.constant(choose({1, 2, 3, 4, 8, 12, 16, 32})), shape_);
  }

  Value *combine(KernelBuilder &k) {
    static const OpCode kCodes[] = {OpCode::AddI,  OpCode::MulI,  OpCode::DivSI, OpCode::RemSI,
                                    OpCode::AndI,  OpCode::OrI,   OpCode::XOrI,  OpCode::ShLI,
                                    OpCode::ShRSI, OpCode::MaxSI, OpCode::MinSI, OpCode::CmpI};
    OpCode code = kCodes[random_() % (sizeof(kCodes) / sizeof(kCodes[0]))];
    Value *a = pick();
    switch (code) {
    case OpCode::DivSI:
    case OpCode::RemSI:
      return k.binary(code, a, positive(k));
    case OpCode::ShLI:
    case OpCode::ShRSI:
      return k.binary(code, a, k.splat(k.constant(choose({0, 1, 2, 3})), shape_));
    case OpCode::MulI: // keep products small: multiply by a leaf only
      return k.binary(code, a, leaf(k));
    case OpCode::CmpI: {
      static const char *kPredicates[] = {"eq", "ne", "slt", "sle", "sgt", "sge"};
      Value *condition = k.compare(kPredicates[random_() % 6], a, pick());
      return k.op(OpCode::Select, {condition, pick(), pick()}, a->type());
    }
    default:
      return k.binary(code, a, pick());
    }
  }

  std::mt19937 random_;
  std::vector<Value *> pool_;
  V shape_{8, 16};
};

} // namespace

TEST(AxisInfo, RandomKernelsNeverClaimWhatIsNotThere) {
  for (unsigned seed = 0; seed < 300; ++seed) {
    KernelBuilder k({Type::i32(), Type::i32(), Type::pointer(Type::scalar(ScalarKind::F16))}, {16, 0, 16});
    RandomKernel(seed).build(k);
    ASSERT_NO_THROW(verify(k.module)) << "seed " << seed;
    SCOPED_TRACE("seed " + std::to_string(seed));
    expectSound(k.func, {{16, 5, 4096}, {48, 12, 64}, {32, 1, 1024}});
    if (HasFatalFailure())
      return;
  }
}
