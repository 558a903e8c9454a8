// Builder, use lists, cloning and the verifier on small hand-built functions.
#include "ir/builder.h"
#include "ir/diagnostics.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

using namespace tessera::ir;

namespace {

// func @f(%p: ptr<f32>, %n: i32) { %pid = program_id; %r = addi %pid, %n; return }
Operation *buildSimple(Module &m, Value **sumOut = nullptr) {
  Builder b(&m.body());
  Operation *func = b.create(OpCode::Func, {}, {}, {{"sym_name", std::string("f")}}, 1);
  Block &body = func->body();
  body.addArgument(Type::pointer(Type::f32()));
  Value *n = body.addArgument(Type::i32());
  b.setInsertionPointToEnd(&body);
  Value *pid = b.create(OpCode::ProgramId, {}, {Type::i32()}, {{"axis", int64_t(0)}})->result();
  Value *sum = b.create(OpCode::AddI, {pid, n}, {Type::i32()})->result();
  b.create(OpCode::Return, {}, {});
  if (sumOut)
    *sumOut = sum;
  return func;
}

} // namespace

TEST(IR, BuildPrintVerify) {
  Module m;
  buildSimple(m);
  EXPECT_NO_THROW(verify(m));
  std::string text = toString(m);
  EXPECT_NE(text.find("func @f(%0: ptr<f32>, %1: i32)"), std::string::npos) << text;
  EXPECT_NE(text.find("%3 = addi %2, %1 : (i32, i32) -> i32"), std::string::npos) << text;
}

TEST(IR, UseListsAndReplace) {
  Module m;
  Value *sum = nullptr;
  Operation *func = buildSimple(m, &sum);
  Value *pid = sum->definingOp()->operand(0);
  EXPECT_EQ(pid->users().size(), 1u);
  Value *n = func->body().argument(1);
  pid->replaceAllUsesWith(n);
  EXPECT_FALSE(pid->hasUses());
  EXPECT_EQ(n->users().size(), 2u); // addi uses %n twice now
  pid->definingOp()->erase();
  EXPECT_NO_THROW(verify(m));
}

TEST(IR, VerifierRejectsTypeMismatch) {
  Module m;
  Builder b(&m.body());
  Operation *func = b.create(OpCode::Func, {}, {}, {{"sym_name", std::string("bad")}}, 1);
  Value *x = func->body().addArgument(Type::i32());
  Value *y = func->body().addArgument(Type::f32());
  b.setInsertionPointToEnd(&func->body());
  b.setLocation("kernel.py:3:4");
  b.create(OpCode::AddI, {x, y}, {Type::i32()});
  b.create(OpCode::Return, {}, {});
  try {
    verify(m);
    FAIL() << "expected a CompileError";
  } catch (const CompileError &e) {
    EXPECT_EQ(e.location(), "kernel.py:3:4");
    EXPECT_NE(std::string(e.what()).find("addi"), std::string::npos);
  }
}

TEST(IR, CloneKeepsStructure) {
  Module m;
  buildSimple(m);
  auto copy = m.clone();
  EXPECT_EQ(toString(*copy), toString(m));
  EXPECT_NO_THROW(verify(*copy));
}

TEST(IR, TensorTypes) {
  Type t = Type::tensor({64, 32}, Type::pointer(Type::scalar(ScalarKind::F16)));
  EXPECT_EQ(t.str(), "tensor<64x32xptr<f16>>");
  EXPECT_EQ(t.numElements(), 64 * 32);
  EXPECT_TRUE(t.elementType().isPointer());
  EXPECT_EQ(t.withElement(Type::i1()).str(), "tensor<64x32xi1>");
  EXPECT_EQ(t, Type::tensor({64, 32}, Type::pointer(Type::scalar(ScalarKind::F16))));
  EXPECT_NE(t, Type::tensor({64, 32}, Type::pointer(Type::f32())));
}
