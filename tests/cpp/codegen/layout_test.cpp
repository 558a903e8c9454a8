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

/// Copies `source` (a pointer tensor's offsets computed in `loadLayout`) to `out`, with the
/// value converted to `storeLayout` in between.
void copyThrough(KernelBuilder &k, int64_t size, EncodingPtr loadLayout, EncodingPtr storeLayout) {
  Type pointer = Type::pointer(Type::f32());
  auto typed = [&](Type element, EncodingPtr layout) { return Type::tensor({size}, element, layout); };
  Value *in = k.op(OpCode::AddPtr, {k.splat(k.arg(0), typed(pointer, loadLayout)), k.range(0, size, loadLayout)},
                   typed(pointer, loadLayout));
  Value *values = k.op(OpCode::Load, {in}, typed(Type::f32(), loadLayout));
  Value *converted = k.op(OpCode::ConvertLayout, {values}, typed(Type::f32(), storeLayout));
  Value *out = k.op(OpCode::AddPtr, {k.splat(k.arg(1), typed(pointer, storeLayout)), k.range(0, size, storeLayout)},
                    typed(pointer, storeLayout));
  k.effect(OpCode::Store, {out, converted});
}

} // namespace

TEST(CodegenLayout, TwoDimensionalTileFromExpandDimsAndBroadcast) {
  // out[r, c] = x[r * 64 + c] over a 64x64 tile, rows and columns from sliced ranges.
  EncodingPtr tile = blocked({1, 4}, {2, 16}, {4, 1}, {1, 0});
  auto rowsLayout = std::make_shared<SliceEncoding>(1, tile);
  auto colsLayout = std::make_shared<SliceEncoding>(0, tile);
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("tile", {pointer, pointer}, {16, 16});
  auto tensor2d = [&](std::vector<int64_t> shape, Type element) { return Type::tensor(shape, element, tile); };
  Value *rows = k.op(OpCode::ExpandDims, {k.range(0, 64, rowsLayout)}, tensor2d({64, 1}, Type::i32()),
                     {{"axis", int64_t(1)}});
  Value *cols = k.op(OpCode::ExpandDims, {k.range(0, 64, colsLayout)}, tensor2d({1, 64}, Type::i32()),
                     {{"axis", int64_t(0)}});
  Value *rowOffsets = k.op(OpCode::MulI, {rows, k.splat(k.constant(64, Type::i32()), tensor2d({64, 1}, Type::i32()))},
                           tensor2d({64, 1}, Type::i32()));
  Value *offsets = k.op(OpCode::AddI,
                        {k.op(OpCode::Broadcast, {rowOffsets}, tensor2d({64, 64}, Type::i32())),
                         k.op(OpCode::Broadcast, {cols}, tensor2d({64, 64}, Type::i32()))},
                        tensor2d({64, 64}, Type::i32()));
  auto at = [&](Value *base) {
    return k.op(OpCode::AddPtr, {k.splat(base, tensor2d({64, 64}, pointer)), offsets}, tensor2d({64, 64}, pointer));
  };
  k.effect(OpCode::Store, {at(k.arg(1)), k.op(OpCode::Load, {at(k.arg(0))}, tensor2d({64, 64}, Type::f32()))});
  k.finish();

  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_90a");
  EXPECT_EQ(result.sharedBytes, 0); // expand_dims and broadcast only rename registers
  EXPECT_FALSE(contains(result.ptx, "bar.sync")) << result.ptx;
  // 32 elements per thread, 4 consecutive ones per access.
  EXPECT_EQ(countInstructions(result.ptx, "ld.global", "v4"), 8) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", "v4"), 8) << result.ptx;
}

TEST(CodegenLayout, ConvertLayoutAcrossLanesGoesThroughSharedMemory) {
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("convert", {pointer, pointer}, {16, 16});
  copyThrough(k, 1024, blocked({4}, {32}, {4}, {0}), blocked({1}, {32}, {4}, {0}));
  k.finish();
  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_90a");
  EXPECT_EQ(result.sharedBytes, 1024 * 4);
  EXPECT_TRUE(contains(result.ptx, ".extern .shared .align 16 .b8 global_smem[]")) << result.ptx;
  EXPECT_EQ(countOf(result.ptx, "bar.sync"), 2) << result.ptx; // before the stores, after them
  // The source holds 4 consecutive elements per access: 2 vector stores; the destination
  // has one element per 128-element row of threads: 8 scalar loads.
  EXPECT_EQ(countInstructions(result.ptx, "st.shared", "v4"), 2) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "ld.shared", ""), 8) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", ""), 8) << result.ptx;
}

TEST(CodegenLayout, ConvertLayoutThatOnlyReordersRegistersIsFree) {
  // Same lanes and warps, registers walk the dims in the other order.
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("permute", {pointer, pointer}, {16, 16});
  EncodingPtr rowMajor = blocked({2, 4}, {1, 32}, {1, 4}, {1, 0});
  EncodingPtr columnMajor = blocked({2, 4}, {1, 32}, {1, 4}, {0, 1});
  Type source = Type::tensor({2, 512}, Type::f32(), rowMajor);
  Value *loaded = k.op(OpCode::Load, {k.splat(k.arg(0), Type::tensor({2, 512}, pointer, rowMajor))}, source);
  Value *converted = k.op(OpCode::ConvertLayout, {loaded}, Type::tensor({2, 512}, Type::f32(), columnMajor));
  k.effect(OpCode::Store, {k.splat(k.arg(1), Type::tensor({2, 512}, pointer, columnMajor)), converted});
  k.finish();
  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_80");
  EXPECT_EQ(result.sharedBytes, 0);
  EXPECT_FALSE(contains(result.ptx, "bar.sync")) << result.ptx;
  EXPECT_FALSE(contains(result.ptx, ".shared")) << result.ptx;
}

TEST(CodegenLayout, ReshapeWithMatchingLayoutsIsFree) {
  // [1024] with 4 per thread == [2, 512] with 2x4 per thread once the index is flattened.
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("reshape", {pointer, pointer}, {16, 16});
  EncodingPtr flat = blocked({4}, {32}, {4}, {0});
  EncodingPtr rows = blocked({2, 4}, {1, 32}, {1, 4}, {1, 0});
  Value *range = k.range(0, 1024, flat);
  Type flatPointers = Type::tensor({1024}, pointer, flat);
  Value *loaded = k.op(OpCode::Load, {k.op(OpCode::AddPtr, {k.splat(k.arg(0), flatPointers), range}, flatPointers)},
                       Type::tensor({1024}, Type::f32(), flat));
  Value *reshaped = k.op(OpCode::Reshape, {loaded}, Type::tensor({2, 512}, Type::f32(), rows));
  Value *back = k.op(OpCode::Reshape, {reshaped}, Type::tensor({1024}, Type::f32(), flat));
  k.effect(OpCode::Store, {k.op(OpCode::AddPtr, {k.splat(k.arg(1), flatPointers), range}, flatPointers), back});
  k.finish();
  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_90a");
  EXPECT_EQ(result.sharedBytes, 0);
  EXPECT_EQ(countInstructions(result.ptx, "ld.global", "v4"), 2) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", "v4"), 2) << result.ptx;
}

TEST(CodegenLayout, ReshapeAcrossThreadsUsesSharedMemory) {
  // [32, 32] rows of threads -> [1024] flat: the elements move between lanes.
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("reshape2", {pointer, pointer}, {16, 16});
  EncodingPtr square = blocked({1, 4}, {4, 8}, {4, 1}, {1, 0});
  EncodingPtr flat = blocked({1}, {32}, {4}, {0});
  Value *loaded = k.op(OpCode::Load, {k.splat(k.arg(0), Type::tensor({32, 32}, pointer, square))},
                       Type::tensor({32, 32}, Type::f32(), square));
  Value *reshaped = k.op(OpCode::Reshape, {loaded}, Type::tensor({1024}, Type::f32(), flat));
  Type flatPointers = Type::tensor({1024}, pointer, flat);
  k.effect(OpCode::Store, {k.op(OpCode::AddPtr, {k.splat(k.arg(1), flatPointers), k.range(0, 1024, flat)}, flatPointers),
                           reshaped});
  k.finish();
  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_90a");
  EXPECT_EQ(result.sharedBytes, 1024 * 4);
  EXPECT_EQ(countOf(result.ptx, "bar.sync"), 2) << result.ptx;
}
