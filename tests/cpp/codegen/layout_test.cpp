// Codegen of layout ops: expand_dims/broadcast in registers, reshape and convert_layout as
// register renamings when the linear layouts allow it, else through shared memory.
#include "codegen_test_utils.h"

#include <gtest/gtest.h>

using namespace tessera;
using namespace tessera::codegen_test;

namespace {

codegen::CodegenResult generateAndAssemble(const ir::Module &module, const std::string &arch) {
  codegen::CodegenOptions options;
  options.arch = arch;
  codegen::CodegenResult result = codegen::generate(module, options);
  if (!ptxasPath().empty()) {
    PtxasReport report = runPtxas(result.ptx, arch);
    EXPECT_TRUE(report.ok) << report.log << result.ptx;
    EXPECT_EQ(report.spillStores, 0) << report.log;
  }
  return result;
}

Type f32Tensor(std::vector<int64_t> shape, EncodingPtr layout) {
  return Type::tensor(std::move(shape), Type::f32(), std::move(layout));
}

} // namespace

TEST(CodegenLayout, TwoDimensionalTileFromExpandDimsAndBroadcast) {
  // out[r, c] = x[r * 64 + c] over a 64x64 tile, rows and columns from sliced ranges.
  EncodingPtr tile = blocked({1, 4}, {2, 16}, {4, 1}, {1, 0});
  auto rowsLayout = std::make_shared<SliceEncoding>(1, tile);
  auto colsLayout = std::make_shared<SliceEncoding>(0, tile);
  auto i32Tensor = [&](std::vector<int64_t> shape) {
    return Type::tensor(shape, Type::i32(), tile);
  };
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("tile", {pointer, pointer}, {16, 16});
  Value *rows = k.op(OpCode::ExpandDims, {k.range(0, 64, rowsLayout)}, i32Tensor({64, 1}),
                     {{"axis", int64_t(1)}});
  Value *cols = k.op(OpCode::ExpandDims, {k.range(0, 64, colsLayout)}, i32Tensor({1, 64}),
                     {{"axis", int64_t(0)}});
  Value *stride = k.splat(k.constant(64, Type::i32()), i32Tensor({64, 1}));
  Value *rowOffsets = k.op(OpCode::MulI, {rows, stride}, i32Tensor({64, 1}));
  Value *offsets = k.op(OpCode::AddI,
                        {k.op(OpCode::Broadcast, {rowOffsets}, i32Tensor({64, 64})),
                         k.op(OpCode::Broadcast, {cols}, i32Tensor({64, 64}))},
                        i32Tensor({64, 64}));
  k.effect(OpCode::Store, {k.at(k.arg(1), offsets), k.load(k.at(k.arg(0), offsets))});
  k.finish();

  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_90a");
  EXPECT_EQ(result.sharedBytes, 0); // expand_dims and broadcast only rename registers
  EXPECT_FALSE(contains(result.ptx, "bar.sync")) << result.ptx;
  // 32 elements per thread, 4 consecutive ones per access.
  EXPECT_EQ(countInstructions(result.ptx, "ld.global", "v4"), 8) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", "v4"), 8) << result.ptx;
}

TEST(CodegenLayout, ConvertLayoutAcrossLanesGoesThroughSharedMemory) {
  EncodingPtr source = blocked({4}, {32}, {4}, {0}), destination = blocked({1}, {32}, {4}, {0});
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("convert", {pointer, pointer}, {16, 16});
  Value *loaded = k.load(k.at(k.arg(0), k.range(0, 1024, source)));
  Value *converted = k.op(OpCode::ConvertLayout, {loaded}, f32Tensor({1024}, destination));
  k.effect(OpCode::Store, {k.at(k.arg(1), k.range(0, 1024, destination)), converted});
  k.finish();
  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_90a");
  EXPECT_EQ(result.sharedBytes, 1024 * 4);
  EXPECT_TRUE(contains(result.ptx, ".extern .shared .align 1024 .b8 global_smem[]")) << result.ptx;
  // Between the stores and the loads only: nothing used shared memory before (membar).
  EXPECT_EQ(countOf(result.ptx, "bar.sync"), 1) << result.ptx;
  // The source holds 4 consecutive elements per access: 2 vector stores; the destination
  // has one element per 128-element row of threads: 8 scalar loads.
  EXPECT_EQ(countInstructions(result.ptx, "st.shared", "v4"), 2) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "ld.shared", ""), 8) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", ""), 8) << result.ptx;
}

TEST(CodegenLayout, ConvertLayoutThatOnlyReordersRegistersIsFree) {
  // Same lanes and warps; the registers walk the dims in the other order.
  EncodingPtr rowMajor = blocked({2, 4}, {1, 32}, {1, 4}, {1, 0});
  EncodingPtr columnMajor = blocked({2, 4}, {1, 32}, {1, 4}, {0, 1});
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("permute", {pointer, pointer}, {16, 16});
  Value *loaded = k.load(k.splat(k.arg(0), Type::tensor({2, 512}, pointer, rowMajor)));
  Value *converted = k.op(OpCode::ConvertLayout, {loaded}, f32Tensor({2, 512}, columnMajor));
  k.effect(OpCode::Store, {k.splat(k.arg(1), Type::tensor({2, 512}, pointer, columnMajor)),
                           converted});
  k.finish();
  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_80");
  EXPECT_EQ(result.sharedBytes, 0);
  EXPECT_FALSE(contains(result.ptx, "bar.sync")) << result.ptx;
  EXPECT_FALSE(contains(result.ptx, ".shared")) << result.ptx;
}

TEST(CodegenLayout, ReshapeWithMatchingLayoutsIsFree) {
  // [1024] with 4 per thread == [2, 512] with 2x4 per thread once the index is flattened.
  EncodingPtr flat = blocked({4}, {32}, {4}, {0});
  EncodingPtr rows = blocked({2, 4}, {1, 32}, {1, 4}, {1, 0});
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("reshape", {pointer, pointer}, {16, 16});
  Value *range = k.range(0, 1024, flat);
  Value *reshaped = k.op(OpCode::Reshape, {k.load(k.at(k.arg(0), range))},
                         f32Tensor({2, 512}, rows));
  Value *back = k.op(OpCode::Reshape, {reshaped}, f32Tensor({1024}, flat));
  k.effect(OpCode::Store, {k.at(k.arg(1), range), back});
  k.finish();
  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_90a");
  EXPECT_EQ(result.sharedBytes, 0);
  EXPECT_EQ(countInstructions(result.ptx, "ld.global", "v4"), 2) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", "v4"), 2) << result.ptx;
}

TEST(CodegenLayout, ReshapeAcrossThreadsUsesSharedMemory) {
  // [32, 32] rows of threads -> [1024] flat: the elements move between lanes.
  EncodingPtr square = blocked({1, 4}, {4, 8}, {4, 1}, {1, 0});
  EncodingPtr flat = blocked({1}, {32}, {4}, {0});
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("reshape2", {pointer, pointer}, {16, 16});
  Value *loaded = k.load(k.splat(k.arg(0), Type::tensor({32, 32}, pointer, square)));
  Value *reshaped = k.op(OpCode::Reshape, {loaded}, f32Tensor({1024}, flat));
  k.effect(OpCode::Store, {k.at(k.arg(1), k.range(0, 1024, flat)), reshaped});
  k.finish();
  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_90a");
  EXPECT_EQ(result.sharedBytes, 1024 * 4);
  EXPECT_EQ(countOf(result.ptx, "bar.sync"), 1) << result.ptx;
}
