// Codegen of structured control flow: for with carried tensors, if with results, while.
#include "codegen_test_utils.h"

#include <gtest/gtest.h>

using namespace tessera;
using namespace tessera::codegen_test;

namespace {

const EncodingPtr kLayout = blocked({4}, {32}, {4}, {0});

Type tensorOf(Type element) { return Type::tensor({512}, element, kLayout); }

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

/// Some `bra` jumps to a label defined above it: the PTX still has a loop.
bool hasBackwardBranch(const std::string &ptx) {
  std::regex branch(R"(bra(\.uni)?\s+(\$L__BB\d+_\d+);)");
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), branch);
       it != std::sregex_iterator(); ++it) {
    size_t label = ptx.find((*it)[2].str() + ":");
    if (label != std::string::npos && label < static_cast<size_t>(it->position()))
      return true;
  }
  return false;
}

} // namespace

TEST(CodegenControlFlow, ForLoopCarriesATensorAccumulator) {
  // acc = 0; for i in [0, n): acc += x[i * 512 + range]; out[range] = acc
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("rowsum", {pointer, pointer, Type::i32()}, {16, 16, 0});
  Value *range = k.range(0, 512, kLayout);
  Value *zero = k.op(OpCode::Constant, {}, tensorOf(Type::f32()), {{"value", 0.0}});
  ir::Operation *loop = k.builder.create(
      OpCode::For, {k.constant(0, Type::i32()), k.arg(2), k.constant(1, Type::i32()), zero},
      {tensorOf(Type::f32())}, {}, 1);
  ir::Block &body = loop->body();
  Value *i = body.addArgument(Type::i32());
  Value *acc = body.addArgument(tensorOf(Type::f32()));
  k.builder.setInsertionPointToEnd(&body);
  Value *rowStart = k.op(OpCode::MulI, {i, k.constant(512, Type::i32())}, Type::i32());
  Value *offs = k.op(OpCode::AddI, {k.splat(rowStart, tensorOf(Type::i32())), range},
                     tensorOf(Type::i32()));
  Value *sum = k.op(OpCode::AddF, {acc, k.load(k.at(k.arg(0), offs))}, tensorOf(Type::f32()));
  k.effect(OpCode::Yield, {sum});
  k.builder.setInsertionPointToEnd(&k.func->body());
  k.effect(OpCode::Store, {k.at(k.arg(1), range), loop->result()});
  k.finish();

  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_90a");
  // One phi per register of the accumulator (4 per thread) plus the induction variable.
  EXPECT_EQ(countOf(result.unoptimizedLLVMIR, "= phi float"), 4) << result.unoptimizedLLVMIR;
  EXPECT_TRUE(contains(result.unoptimizedLLVMIR, "%iv = phi i32 [ 0, %entry ]"))
      << result.unoptimizedLLVMIR;
  EXPECT_TRUE(contains(result.unoptimizedLLVMIR, "icmp slt i32 %iv")) << result.unoptimizedLLVMIR;
  // LLVM unrolls the loop; every load stays a 16-byte vector.
  EXPECT_GE(countInstructions(result.ptx, "ld.global", "v4"), 1) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "ld.global", ""), 0) << result.ptx;
  EXPECT_EQ(countInstructions(result.ptx, "st.global", "v4"), 1) << result.ptx;
  EXPECT_TRUE(hasBackwardBranch(result.ptx)) << result.ptx;
}

TEST(CodegenControlFlow, IfWithResultsMergesBothArms) {
  // v = n > 0 ? x[range] : 2.0; out[range] = v
  Type pointer = Type::pointer(Type::f32());
  KernelBuilder k("choose", {pointer, pointer, Type::i32()}, {16, 16, 0});
  Value *range = k.range(0, 512, kLayout);
  Value *positive = k.op(OpCode::CmpI, {k.arg(2), k.constant(0, Type::i32())}, Type::i1(),
                         {{"predicate", std::string("sgt")}});
  ir::Operation *branch =
      k.builder.create(OpCode::If, {positive}, {tensorOf(Type::f32())}, {}, 2);
  k.builder.setInsertionPointToEnd(&branch->body(0));
  k.effect(OpCode::Yield, {k.load(k.at(k.arg(0), range))});
  k.builder.setInsertionPointToEnd(&branch->body(1));
  k.effect(OpCode::Yield, {k.op(OpCode::Constant, {}, tensorOf(Type::f32()), {{"value", 2.0}})});
  k.builder.setInsertionPointToEnd(&k.func->body());
  k.effect(OpCode::Store, {k.at(k.arg(1), range), branch->result()});
  k.finish();

  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_80");
  EXPECT_EQ(countOf(result.unoptimizedLLVMIR, "= phi float"), 4) << result.unoptimizedLLVMIR;
  std::regex merge(R"(phi float \[ %[0-9]+, %if.then \], \[ 2\.000000e\+00, %if.else \])");
  EXPECT_TRUE(std::regex_search(result.unoptimizedLLVMIR, merge)) << result.unoptimizedLLVMIR;
  EXPECT_TRUE(contains(result.ptx, "0f40000000")) << result.ptx; // 2.0f reaches the PTX
}

TEST(CodegenControlFlow, WhileLoopDoublesUntilItReachesTheBound) {
  // i = 1; while (i < n) i = i * 2; *out = i
  Type pointer = Type::pointer(Type::i32());
  KernelBuilder k("doubling", {pointer, Type::i32()});
  ir::Operation *loop = k.builder.create(OpCode::While, {k.constant(1, Type::i32())},
                                         {Type::i32()}, {}, 2);
  Value *current = loop->body(0).addArgument(Type::i32());
  k.builder.setInsertionPointToEnd(&loop->body(0));
  Value *below = k.op(OpCode::CmpI, {current, k.arg(1)}, Type::i1(),
                      {{"predicate", std::string("slt")}});
  k.effect(OpCode::Condition, {below, current});
  Value *next = loop->body(1).addArgument(Type::i32());
  k.builder.setInsertionPointToEnd(&loop->body(1));
  k.effect(OpCode::Yield, {k.op(OpCode::MulI, {next, k.constant(2, Type::i32())}, Type::i32())});
  k.builder.setInsertionPointToEnd(&k.func->body());
  k.effect(OpCode::Store, {k.arg(0), loop->result()});
  k.finish();

  codegen::CodegenResult result = generateAndAssemble(k.module, "sm_90a");
  EXPECT_TRUE(contains(result.unoptimizedLLVMIR, "while.before:")) << result.unoptimizedLLVMIR;
  EXPECT_TRUE(std::regex_search(result.llvmIR, std::regex(R"(shl i32 %[0-9a-z.]+, 1)")))
      << result.llvmIR; // i * 2, inside the loop
  EXPECT_EQ(countInstructions(result.ptx, "st.global", ""), 1) << result.ptx;
}
