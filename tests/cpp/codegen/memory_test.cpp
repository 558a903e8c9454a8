// Codegen of loads and stores: vector width from layout + alignment + mask constancy, masks
// with `other`, duplicate owners, and ptxas acceptance of the result.
#include "codegen_test_utils.h"

#include <gtest/gtest.h>

using namespace tessera;
using namespace tessera::codegen_test;

namespace {

struct VectorAddOptions {
  std::vector<int64_t> divisibility = {16, 16, 16, 16};
  bool masked = true;
  bool withOther = false;
  EncodingPtr layout = blocked({4}, {32}, {4}, {0});
  Type element = Type::f32();
};

// out[i] = x[i] + y[i] for i in [pid * 1024, pid * 1024 + 1024), masked by i < n.
std::unique_ptr<KernelBuilder> buildVectorAdd(const VectorAddOptions &options) {
  Type element = options.element, pointer = Type::pointer(element);
  auto k = std::make_unique<KernelBuilder>(
      "add", std::vector<Type>{pointer, pointer, pointer, Type::i32()}, options.divisibility);
  Type offsets = Type::tensor({1024}, Type::i32(), options.layout);
  Type pointers = Type::tensor({1024}, pointer, options.layout);
  Type values = Type::tensor({1024}, element, options.layout);
  Type masks = Type::tensor({1024}, Type::i1(), options.layout);
  Value *pid = k->op(OpCode::ProgramId, {}, Type::i32(), {{"axis", int64_t(0)}});
  Value *start = k->op(OpCode::MulI, {pid, k->constant(1024, Type::i32())}, Type::i32());
  Value *offs =
      k->op(OpCode::AddI, {k->splat(start, offsets), k->range(0, 1024, options.layout)}, offsets);
  Value *mask = k->op(OpCode::CmpI, {offs, k->splat(k->arg(3), offsets)}, masks,
                      {{"predicate", std::string("slt")}});
  auto at = [&](Value *base) {
    return k->op(OpCode::AddPtr, {k->splat(base, pointers), offs}, pointers);
  };
  auto load = [&](Value *base) {
    std::vector<Value *> operands = {at(base)};
    if (options.masked)
      operands.push_back(mask);
    if (options.withOther)
      operands.push_back(k->splat(k->constantF(-1.0, element), values));
    return k->op(OpCode::Load, operands, values);
  };
  OpCode add = element.isFloat() ? OpCode::AddF : OpCode::AddI;
  Value *sum = k->op(add, {load(k->arg(0)), load(k->arg(1))}, values);
  std::vector<Value *> storeOperands = {at(k->arg(2)), sum};
  if (options.masked)
    storeOperands.push_back(mask);
  k->effect(OpCode::Store, storeOperands);
  k->finish();
  return k;
}

codegen::CodegenResult generateFor(const ir::Module &module, const std::string &arch) {
  codegen::CodegenOptions options;
  options.arch = arch;
  return codegen::generate(module, options);
}

} // namespace

TEST(CodegenMemory, VectorAddUsesV4AccessesOnBothArchs) {
  auto kernel = buildVectorAdd({});
  for (const char *arch : {"sm_80", "sm_90a"}) {
    codegen::CodegenResult result = generateFor(kernel->module, arch);
    EXPECT_EQ(result.kernelName, "add");
    EXPECT_EQ(result.numWarps, 4);
    EXPECT_EQ(result.sharedBytes, 0);
    EXPECT_TRUE(contains(result.ptx, ".target " + std::string(arch))) << result.ptx;
    EXPECT_TRUE(contains(result.ptx, ".maxntid 128")) << result.ptx;
    // 8 registers per thread = 2 vectors of 4 per operand; nothing scalar is left.
    EXPECT_EQ(countInstructions(result.ptx, "ld.global", "v4"), 4) << result.ptx;
    EXPECT_EQ(countInstructions(result.ptx, "st.global", "v4"), 2) << result.ptx;
    EXPECT_EQ(countInstructions(result.ptx, "ld.global", ""), 0) << result.ptx;
    EXPECT_EQ(countInstructions(result.ptx, "st.global", ""), 0) << result.ptx;
  }
}

TEST(CodegenMemory, VectorAddAssemblesWithoutSpills) {
  if (ptxasPath().empty())
    GTEST_SKIP() << "ptxas not found";
  auto kernel = buildVectorAdd({});
  for (const char *arch : {"sm_80", "sm_90a"}) {
    codegen::CodegenResult result = generateFor(kernel->module, arch);
    PtxasReport report = runPtxas(result.ptx, arch);
    ASSERT_TRUE(report.ok) << report.log << result.ptx;
    EXPECT_EQ(report.spillStores, 0) << report.log;
    EXPECT_EQ(report.spillLoads, 0) << report.log;
  }
}

TEST(CodegenMemory, MaskThatMayChangeInsideAVectorSplitsToScalars) {
  VectorAddOptions options;
  options.divisibility = {16, 16, 16, 1}; // n % 4 unknown: i < n may flip inside 4 elements
  auto kernel = buildVectorAdd(options);
  codegen::CodegenResult result = generateFor(kernel->module, "sm_90a");
  EXPECT_EQ(countInstructions(result.ptx, "ld.global", "v2"), 0) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "ld.global", "v4"), 0) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "ld.global", ""), 16) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", ""), 8) << result.ptx;
}

TEST(CodegenMemory, UnalignedPointerLimitsOnlyItsOwnAccesses) {
  VectorAddOptions options;
  options.divisibility = {8, 16, 4, 16}; // x: 8 bytes -> v2; y: v4; out: 4 bytes -> scalar
  auto kernel = buildVectorAdd(options);
  codegen::CodegenResult result = generateFor(kernel->module, "sm_80");
  EXPECT_EQ(countInstructions(result.ptx, "ld.global", "v2"), 4) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "ld.global", "v4"), 2) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", ""), 8) << result.ptx;
}

TEST(CodegenMemory, HalfPrecisionPacksEightElementsPerAccess) {
  VectorAddOptions options;
  options.element = Type::scalar(ir::ScalarKind::F16);
  options.layout = blocked({8}, {32}, {4}, {0});
  auto kernel = buildVectorAdd(options);
  codegen::CodegenResult result = generateFor(kernel->module, "sm_90a");
  EXPECT_EQ(countInstructions(result.ptx, "ld.global", "v4"), 2) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", "v4"), 1) << result.ptx;
  if (!ptxasPath().empty())
    EXPECT_TRUE(runPtxas(result.ptx, "sm_90a").ok);
}

TEST(CodegenMemory, MaskedLoadTakesOtherForMaskedOffElements) {
  VectorAddOptions options;
  options.withOther = true;
  auto kernel = buildVectorAdd(options);
  codegen::CodegenResult result = generateFor(kernel->module, "sm_90a");
  // The lowered IR merges `other` (-1.0) with the loaded vector after a branch per vector.
  EXPECT_TRUE(
      std::regex_search(result.unoptimizedLLVMIR, std::regex(R"(phi float .*-1\.000000e\+00)")))
      << result.unoptimizedLLVMIR;
  EXPECT_TRUE(contains(result.ptx, "0fBF800000")) << result.ptx; // -1.0f survives to PTX
  if (!ptxasPath().empty())
    EXPECT_TRUE(runPtxas(result.ptx, "sm_90a").ok);
}

TEST(CodegenMemory, BroadcastWarpsStoreEachElementOnce) {
  // 64 elements over 128 threads: warps 0/1 and 2/3 hold the same elements (zero warp basis).
  EncodingPtr layout = blocked({1}, {32}, {4}, {0});
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("copy", {pointer, pointer}, {16, 16});
  Value *range = k.range(0, 64, layout);
  k.effect(OpCode::Store, {k.at(k.arg(1), range), k.load(k.at(k.arg(0), range))});
  k.finish();
  codegen::CodegenResult result = generateFor(k.module, "sm_90a");
  // Owner test on the warp index: bit 1 of the warp only duplicates data.
  EXPECT_TRUE(std::regex_search(result.unoptimizedLLVMIR,
                                std::regex(R"(and i32 %warp, 2\n.*icmp eq i32 %[0-9]+, 0)")))
      << result.unoptimizedLLVMIR;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", ""), 1) << result.ptx;
}

TEST(CodegenMemory, ScalarStoreIsIssuedByThreadZeroOnly) {
  Type pointer = Type::pointer(Type::i32());
  KernelBuilder k("scalar", {pointer, Type::i32()});
  k.effect(OpCode::Store, {k.arg(0), k.arg(1)});
  k.finish();
  codegen::CodegenResult result = generateFor(k.module, "sm_80");
  // One store predicated on thread 0 (inline PTX, no branch).
  EXPECT_TRUE(std::regex_search(result.unoptimizedLLVMIR,
                                std::regex(R"((%[0-9]+) = icmp eq i32 %tid, 0\n\s*call void asm )"
                                           R"(sideeffect "@\$0 st\.global\.b32 \[\$1\], \$2;", )"
                                           R"("b,l,r"\(i1 \1,)")))
      << result.unoptimizedLLVMIR;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", ""), 1) << result.ptx;
  EXPECT_EQ(result.ptx.find("bra"), std::string::npos) << result.ptx;
}

TEST(CodegenMemory, TensorWithoutLayoutIsACompileErrorAtTheOp) {
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("nolayout", {pointer});
  k.builder.setLocation("kernel.py:7:3");
  k.op(OpCode::MakeRange, {}, Type::tensor({128}, Type::i32()),
       {{"start", int64_t(0)}, {"end", int64_t(128)}});
  k.finish();
  try {
    codegen::generate(k.module);
    FAIL() << "expected a CompileError";
  } catch (const ir::CompileError &error) {
    EXPECT_EQ(error.location(), "kernel.py:7:3");
    EXPECT_TRUE(contains(error.what(), "make_range")) << error.what();
    EXPECT_TRUE(contains(error.what(), "layout")) << error.what();
  }
}
