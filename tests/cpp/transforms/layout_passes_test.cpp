// The layout passes (assign_layouts, coalesce, remove_layout_conversions) on hand-built
// kernels: every tensor gets an encoding and the IR verifies; coalescing picks 16-byte
// accesses where axis info allows; the standard kernels end with no convert_layout; and the
// reference interpreter stores the same values before and after.
#include "../analysis/kernel_builders.h"
#include "../analysis/reference_interpreter.h"
#include "analysis/axis_info.h"
#include "ir/diagnostics.h"
#include "ir/pass_manager.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "transforms/layout_passes.h"

#include <gtest/gtest.h>

using namespace tessera;
using namespace tessera::ir;
using namespace tessera::testing;
using tessera::transforms::assignLayouts;
using tessera::transforms::coalesce;
using tessera::transforms::removeLayoutConversions;

namespace {

const BlockedEncoding *blockedOf(const Value *value) {
  return dynamic_cast<const BlockedEncoding *>(value->type().encoding().get());
}

int countOps(Module &module, OpCode code) {
  int count = 0;
  module.walk([&](Operation *op) { count += op->code() == code; });
  return count;
}

/// Every tensor value (op results, block arguments) carries an encoding of its rank.
void expectAllTensorsHaveLayouts(Module &module) {
  auto check = [&](const Value *value) {
    const Type &type = value->type();
    if (!type.isTensor())
      return;
    ASSERT_NE(type.encoding(), nullptr) << type.str() << "\n" << toString(module);
    EXPECT_EQ(type.encoding()->rank(), type.rank()) << type.str();
  };
  module.walk([&](Operation *op) {
    for (auto &result : op->results())
      check(result.get());
    for (auto &region : op->regions())
      for (auto &argument : region->front().arguments())
        check(argument.get());
  });
}

/// What the kernel stores, per program, for each argument set (the reference semantics).
std::vector<std::map<int64_t, int64_t>> storesOf(Operation *func,
                                                 const std::vector<V> &argumentSets) {
  std::vector<std::map<int64_t, int64_t>> all;
  for (const V &arguments : argumentSets)
    for (int64_t pid : {0, 2}) {
      Interpreter interpreter;
      interpreter.run(func, arguments, pid, [](Value *, const Concrete &) {});
      all.push_back(interpreter.stores);
    }
  return all;
}

void runLayoutPipeline(Module &module) {
  PassManager pm;
  for (const char *name : {"assign_layouts", "coalesce", "remove_layout_conversions"})
    pm.add(name);
  pm.run(module); // verifies after each pass
}

std::vector<int> sizePerThreadOf(Operation *access) {
  return blockedOf(access->operand(0))->getSizePerThread();
}

} // namespace

// ---------------------------------------------------------------- assign_layouts

TEST(AssignLayouts, VectorAddGetsTheDefaultLayoutEverywhere) {
  KernelBuilder k(vectorAddArguments(ScalarKind::F32), {16, 16, 16, 16});
  VectorAdd add = buildVectorAdd(k, ScalarKind::F32, 1024);
  assignLayouts(k.module);
  expectAllTensorsHaveLayouts(k.module);
  ASSERT_NO_THROW(verify(k.module));
  EXPECT_EQ(add.offsets->type().encoding()->str(),
            "#blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], "
            "order = [0]}>");
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 0);
  EXPECT_TRUE(k.arg(0)->type().isPointer()); // the signature stays as it was
}

TEST(AssignLayouts, RangesFeedingExpandDimsAreSlicesOfTheTile) {
  KernelBuilder k(tileCopyArguments(ScalarKind::F32), {16, 16, 16, 16, 16}, 8);
  TileCopy copy = buildTileCopy(k, 64, 32);
  assignLayouts(k.module);
  expectAllTensorsHaveLayouts(k.module);
  ASSERT_NO_THROW(verify(k.module)) << toString(k.module);
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 0) << toString(k.module);
  EncodingPtr tile = copy.offsets->type().encoding();
  EXPECT_TRUE(tile->equals(*defaultBlocked({64, 32}, 8)));
  int slices = 0;
  k.module.walk([&](Operation *op) {
    if (op->code() != OpCode::MakeRange)
      return;
    auto *slice = dynamic_cast<const SliceEncoding *>(op->result()->type().encoding().get());
    ASSERT_NE(slice, nullptr) << toString(k.module);
    EXPECT_TRUE(slice->getParent()->equals(*tile)); // [64, 1] values live in the tile layout
    slices |= 1 << slice->getDim();
  });
  EXPECT_EQ(slices, 3); // one range is a column (dim 1 sliced away), one a row (dim 0)
}

TEST(AssignLayouts, OneRangeUsedAsRowAndColumnIsRecomputedNotConverted) {
  KernelBuilder k({Type::pointer(Type::f32())}, {16});
  Value *range = k.range(0, 64);
  Value *rows = k.broadcast(k.expandDims(range, 1), {64, 64});
  Value *cols = k.broadcast(k.expandDims(range, 0), {64, 64});
  Value *offsets = k.binary(OpCode::AddI, rows, cols);
  Value *pointers = k.pointers(k.arg(0), offsets);
  k.store(pointers, k.load(pointers)->result());
  k.finish();
  assignLayouts(k.module);
  ASSERT_NO_THROW(verify(k.module));
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 0) << toString(k.module);
  EXPECT_EQ(countOps(k.module, OpCode::MakeRange), 2) << toString(k.module);
}

TEST(AssignLayouts, ALoadedValueUsedTwoWaysGetsOneConversion) {
  KernelBuilder k({Type::pointer(Type::i32())}, {16});
  Operation *load = k.load(k.pointers(k.arg(0), k.range(0, 64)));
  Value *rows = k.broadcast(k.expandDims(load->result(), 1), {64, 64});
  Value *cols = k.broadcast(k.expandDims(load->result(), 0), {64, 64});
  Value *pointers = k.pointers(k.arg(0), k.binary(OpCode::AddI, rows, cols));
  k.store(pointers, rows);
  k.finish();
  assignLayouts(k.module);
  ASSERT_NO_THROW(verify(k.module)) << toString(k.module);
  expectAllTensorsHaveLayouts(k.module);
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 1) << toString(k.module);
  EXPECT_EQ(countOps(k.module, OpCode::Load), 1); // loads are never duplicated
}

TEST(AssignLayouts, RejectsNonPowerOfTwoShapes) {
  KernelBuilder k({Type::pointer(Type::f32())}, {16});
  k.store(k.pointers(k.arg(0), k.range(0, 48)), k.splat(k.constant(0, Type::f32()), {48}));
  k.finish();
  EXPECT_THROW(assignLayouts(k.module), CompileError);
}

// ---------------------------------------------------------------- coalesce

TEST(Coalesce, VectorAddF32Uses16ByteAccesses) {
  KernelBuilder k(vectorAddArguments(ScalarKind::F32), {16, 16, 16, 16});
  VectorAdd add = buildVectorAdd(k, ScalarKind::F32, 1024);
  assignLayouts(k.module);
  coalesce(k.module);
  ASSERT_NO_THROW(verify(k.module));
  for (Operation *access : {add.loadX, add.loadY, add.store})
    EXPECT_EQ(sizePerThreadOf(access), std::vector<int>{4});
  EXPECT_EQ(blockedOf(add.store->operand(0))->getThreadsPerWarp(), std::vector<int>{32});
  EXPECT_EQ(blockedOf(add.store->operand(0))->getWarpsPerCTA(), std::vector<int>{4});
}

TEST(Coalesce, VectorAddF16UsesEightPerThreadAndLeavesNoConversion) {
  KernelBuilder k(vectorAddArguments(ScalarKind::F16), {16, 16, 16, 16});
  VectorAdd add = buildVectorAdd(k, ScalarKind::F16, 1024);
  std::vector<V> argumentSets = {{4096, 8192, 16384, 1600}, {0, 4096, 16, 1040}};
  auto before = storesOf(k.func, argumentSets);
  assignLayouts(k.module);
  coalesce(k.module);
  ASSERT_NO_THROW(verify(k.module));
  for (Operation *access : {add.loadX, add.loadY, add.store})
    EXPECT_EQ(sizePerThreadOf(access), std::vector<int>{8});
  EXPECT_GT(countOps(k.module, OpCode::ConvertLayout), 0); // default layouts hold 4 each

  removeLayoutConversions(k.module);
  ASSERT_NO_THROW(verify(k.module)) << toString(k.module);
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 0) << toString(k.module);
  analysis::AxisInfoAnalysis axisInfo(k.func);
  for (Operation *access : {add.loadX, add.loadY, add.store})
    EXPECT_EQ(analysis::accessVectorWidth(axisInfo, *access), 8); // ld.global.v4.b32
  EXPECT_EQ(storesOf(k.func, argumentSets), before);
}

TEST(Coalesce, FourByteAlignedPointersGetOneElementPerThread) {
  KernelBuilder k(vectorAddArguments(ScalarKind::F32), {4, 4, 4, 16});
  VectorAdd add = buildVectorAdd(k, ScalarKind::F32, 1024);
  runLayoutPipeline(k.module);
  for (Operation *access : {add.loadX, add.loadY, add.store})
    EXPECT_EQ(sizePerThreadOf(access), std::vector<int>{1});
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 0) << toString(k.module);
}

TEST(Coalesce, LoadsFollowTheWidestAccessOfTheirChainStoresDoNot) {
  // x is only 4-byte aligned, out is 16-byte aligned: the load may still take 4 (the L1
  // absorbs the gaps; codegen uses scalar loads), so no conversion is needed.
  KernelBuilder k(vectorAddArguments(ScalarKind::F32), {4, 16, 16, 16});
  VectorAdd add = buildVectorAdd(k, ScalarKind::F32, 1024);
  runLayoutPipeline(k.module);
  EXPECT_EQ(sizePerThreadOf(add.loadX), std::vector<int>{4});
  EXPECT_EQ(sizePerThreadOf(add.store), std::vector<int>{4});
  analysis::AxisInfoAnalysis axisInfo(k.func);
  EXPECT_EQ(analysis::accessVectorWidth(axisInfo, *add.loadX), 1);
  EXPECT_EQ(analysis::accessVectorWidth(axisInfo, *add.loadY), 4);
}

TEST(Coalesce, UnalignedMaskBoundLimitsTheWidth) {
  KernelBuilder k(vectorAddArguments(ScalarKind::F32), {16, 16, 16, 0});
  VectorAdd add = buildVectorAdd(k, ScalarKind::F32, 1024);
  runLayoutPipeline(k.module);
  EXPECT_EQ(sizePerThreadOf(add.store), std::vector<int>{1});
}

TEST(Coalesce, TileCopyF16IsRowMajorWithEightPerThread) {
  KernelBuilder k(tileCopyArguments(ScalarKind::F16), {16, 16, 16, 16, 16});
  TileCopy copy = buildTileCopy(k, 64, 64);
  std::vector<V> argumentSets = {{4096, 65536, 64, 40, 48}, {1024, 131072, 80, 64, 16}};
  auto before = storesOf(k.func, argumentSets);
  runLayoutPipeline(k.module);
  expectAllTensorsHaveLayouts(k.module);
  const BlockedEncoding *layout = blockedOf(copy.load->operand(0));
  ASSERT_NE(layout, nullptr);
  EXPECT_EQ(layout->getSizePerThread(), (std::vector<int>{1, 8}));
  EXPECT_EQ(layout->getThreadsPerWarp(), (std::vector<int>{4, 8}));
  EXPECT_EQ(layout->getOrder(), (std::vector<int>{1, 0}));
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 0) << toString(k.module);
  analysis::AxisInfoAnalysis axisInfo(k.func);
  EXPECT_EQ(analysis::accessVectorWidth(axisInfo, *copy.load), 8);
  EXPECT_EQ(storesOf(k.func, argumentSets), before);
}

TEST(Coalesce, ColumnMajorPointersPutTheThreadsDownTheColumns) {
  // in[m + n * stride]: contiguous along dim 0.
  KernelBuilder k(tileCopyArguments(ScalarKind::F32), {16, 16, 16, 16, 16});
  Value *column = k.expandDims(k.range(0, 64), 1), *row = k.expandDims(k.range(0, 64), 0);
  Value *offsets = k.binary(OpCode::AddI, k.broadcast(column, {64, 64}),
                            k.broadcast(k.binary(OpCode::MulI, row, k.splat(k.arg(2), {1, 64})),
                                        {64, 64}));
  Operation *load = k.load(k.pointers(k.arg(0), offsets));
  k.store(k.pointers(k.arg(1), offsets), load->result());
  k.finish();
  runLayoutPipeline(k.module);
  EXPECT_EQ(blockedOf(load->operand(0))->getOrder(), (std::vector<int>{0, 1}));
  EXPECT_EQ(sizePerThreadOf(load), (std::vector<int>{4, 1}));
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 0) << toString(k.module);
}

// ---------------------------------------------------------------- remove_layout_conversions

TEST(RemoveLayoutConversions, ATransposeKeepsExactlyOneConversion) {
  // Read row-major, write column-major: some thread must hand its values to another.
  KernelBuilder k(tileCopyArguments(ScalarKind::F32), {16, 16, 16, 16, 16});
  Value *column = k.expandDims(k.range(0, 64), 1), *row = k.expandDims(k.range(0, 64), 0);
  auto scaled = [&](Value *v, std::vector<int64_t> shape) {
    return k.binary(OpCode::MulI, v, k.splat(k.arg(2), std::move(shape)));
  };
  Value *rowMajor = k.binary(OpCode::AddI, k.broadcast(scaled(column, {64, 1}), {64, 64}),
                             k.broadcast(row, {64, 64}));
  Value *columnMajor = k.binary(OpCode::AddI, k.broadcast(column, {64, 64}),
                                k.broadcast(scaled(row, {1, 64}), {64, 64}));
  Operation *load = k.load(k.pointers(k.arg(0), rowMajor));
  k.store(k.pointers(k.arg(1), columnMajor), load->result());
  k.finish();
  std::vector<V> argumentSets = {{4096, 65536, 64, 0, 0}};
  auto before = storesOf(k.func, argumentSets);
  runLayoutPipeline(k.module);
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 1) << toString(k.module);
  EXPECT_EQ(storesOf(k.func, argumentSets), before);
}

TEST(RemoveLayoutConversions, LoopCarriedPointersMoveToTheLoadLayout) {
  // for (k = 0; k < K; k += 1024) { store(out + offs, load(ptrs)); ptrs += 1024 } in f16.
  KernelBuilder k({Type::pointer(Type::scalar(ScalarKind::F16)),
                   Type::pointer(Type::scalar(ScalarKind::F16)), Type::i32()},
                  {16, 16, 16});
  Value *offsets = k.range(0, 1024);
  Value *pointers = k.pointers(k.arg(0), offsets);
  Value *step = k.constant(1024);
  Operation *loop = k.create(OpCode::For, {k.constant(0), k.arg(2), step, pointers},
                             {pointers->type()}, {}, 1);
  Block &body = loop->body();
  body.addArgument(Type::i32());
  Value *carried = body.addArgument(pointers->type());
  k.builder.setInsertionPointToEnd(&body);
  Operation *load = k.load(carried);
  Value *outPointers = k.pointers(k.arg(1), k.binary(OpCode::AddI, offsets,
                                                     k.splat(body.argument(0), {1024})));
  k.store(outPointers, load->result());
  Value *next = k.op(OpCode::AddPtr, {carried, k.splat(step, {1024})}, pointers->type());
  k.create(OpCode::Yield, {next}, {});
  k.builder.setInsertionPointToEnd(&k.func->body());
  k.finish();
  ASSERT_NO_THROW(verify(k.module));
  std::vector<V> argumentSets = {{4096, 65536, 3072}};
  auto before = storesOf(k.func, argumentSets);
  runLayoutPipeline(k.module);
  expectAllTensorsHaveLayouts(k.module);
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 0) << toString(k.module);
  EXPECT_EQ(loop->numResults(), 1u) << toString(k.module); // the old carried value is gone
  EXPECT_EQ(blockedOf(loop->result(0))->getSizePerThread(), std::vector<int>{8});
  EXPECT_EQ(storesOf(k.func, argumentSets), before);
}

TEST(RemoveLayoutConversions, AnAccumulatorFedByACoalescedLoadIsCarriedInItsLayout) {
  // acc = 0; for (k = 0; k < K; k += 1024) acc += (i32) x[k + offs]; out[offs] = acc, with x
  // i16: the load takes 8 per thread, the accumulator's default layout holds 4.
  KernelBuilder k({Type::pointer(Type::scalar(ScalarKind::I16)), Type::pointer(Type::i32()),
                   Type::i32()},
                  {16, 16, 16});
  Value *offsets = k.range(0, 1024);
  Value *zeros = k.splat(k.constant(0), {1024});
  Operation *loop = k.create(OpCode::For, {k.constant(0), k.arg(2), k.constant(1024), zeros},
                             {zeros->type()}, {}, 1);
  Block &body = loop->body();
  Value *index = body.addArgument(Type::i32()), *sum = body.addArgument(zeros->type());
  k.builder.setInsertionPointToEnd(&body);
  Value *elementOffsets = k.binary(OpCode::AddI, offsets, k.splat(index, {1024}));
  Operation *load = k.load(k.pointers(k.arg(0), elementOffsets));
  Value *widened = k.op(OpCode::ExtSI, {load->result()}, zeros->type());
  k.create(OpCode::Yield, {k.binary(OpCode::AddI, sum, widened)}, {});
  k.builder.setInsertionPointToEnd(&k.func->body());
  k.store(k.pointers(k.arg(1), offsets), loop->result(0));
  k.finish();
  ASSERT_NO_THROW(verify(k.module));
  std::vector<V> argumentSets = {{4096, 65536, 3072}};
  auto before = storesOf(k.func, argumentSets);
  runLayoutPipeline(k.module);
  expectAllTensorsHaveLayouts(k.module);
  int convertsInLoop = 0;
  loop->walk([&](Operation *op) { convertsInLoop += op->code() == OpCode::ConvertLayout; });
  EXPECT_EQ(convertsInLoop, 0) << toString(k.module);
  ASSERT_EQ(loop->numResults(), 1u) << toString(k.module);
  EXPECT_EQ(blockedOf(loop->result(0))->getSizePerThread(), std::vector<int>{8});
  EXPECT_EQ(sizePerThreadOf(load), std::vector<int>{8});
  EXPECT_LE(countOps(k.module, OpCode::ConvertLayout), 1) << toString(k.module);
  EXPECT_EQ(storesOf(k.func, argumentSets), before);
}

TEST(RemoveLayoutConversions, FoldsChainsAndNoOps) {
  KernelBuilder k({Type::pointer(Type::f32())}, {16});
  Value *pointers = k.pointers(k.arg(0), k.range(0, 256));
  k.store(pointers, k.load(pointers)->result());
  k.finish();
  assignLayouts(k.module);
  Operation *load = nullptr;
  k.module.walk([&](Operation *op) { load = op->code() == OpCode::Load ? op : load; });
  EncodingPtr original = load->result()->type().encoding();
  EncodingPtr other = std::make_shared<const BlockedEncoding>(
      std::vector<int>{1}, std::vector<int>{32}, std::vector<int>{4}, std::vector<int>{0});
  Builder builder;
  builder.setInsertionPointAfter(load);
  Value *there = transforms::createConvert(builder, load->result(), other);
  Value *back = transforms::createConvert(builder, there, original);
  Value *same = transforms::createConvert(builder, back, original);
  load->result()->replaceAllUsesWith(same);
  there->definingOp()->setOperand(0, load->result());
  ASSERT_NO_THROW(verify(k.module));
  removeLayoutConversions(k.module);
  ASSERT_NO_THROW(verify(k.module));
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 0) << toString(k.module);
}

TEST(LayoutPipeline, RunsWithTheCleanupPassesAroundIt) {
  KernelBuilder k(tileCopyArguments(ScalarKind::F16), {16, 16, 16, 16, 16});
  buildTileCopy(k, 32, 128);
  PassManager pm;
  for (const char *name : {"canonicalize", "cse", "dce", "licm", "assign_layouts", "coalesce",
                           "remove_layout_conversions", "canonicalize", "cse", "dce"})
    pm.add(name);
  ASSERT_NO_THROW(pm.run(k.module));
  expectAllTensorsHaveLayouts(k.module);
  EXPECT_EQ(countOps(k.module, OpCode::ConvertLayout), 0) << toString(k.module);
  EXPECT_EQ(countOps(k.module, OpCode::MakeRange), 2) << toString(k.module); // cse merged
}

TEST(LayoutVerifier, RejectsTensorsThatDisagreeOnTheirLayout) {
  KernelBuilder k(tileCopyArguments(ScalarKind::F32), {16, 16, 16, 16, 16});
  TileCopy copy = buildTileCopy(k, 32, 32);
  assignLayouts(k.module);
  ASSERT_NO_THROW(verify(k.module));
  // An elementwise op whose operand is in another layout than its result.
  Value *offsets = copy.offsets;
  EncodingPtr tile = offsets->type().encoding();
  offsets->setType(offsets->type().withEncoding(defaultBlocked({32, 32}, 2)));
  EXPECT_THROW(verify(k.module), CompileError);
  offsets->setType(offsets->type().withEncoding(tile));
  ASSERT_NO_THROW(verify(k.module));
  // expand_dims needs its operand in a Slice of the result's layout along its axis.
  Operation *expand = nullptr;
  k.module.walk([&](Operation *op) { expand = op->code() == OpCode::ExpandDims ? op : expand; });
  Value *range = expand->operand(0);
  EncodingPtr slice = range->type().encoding();
  range->setType(range->type().withEncoding(defaultBlocked(range->type().shape(), 4)));
  EXPECT_THROW(verify(k.module), CompileError);
  range->setType(range->type().withEncoding(slice));
  EXPECT_NO_THROW(verify(k.module));
}
