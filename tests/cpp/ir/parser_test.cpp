// Parser tests: hand-built and randomly generated modules survive print -> parse (checked both
// as text and by comparing the IR structure directly), and malformed text fails with the
// right line:col and message.
#include "ir/builder.h"
#include "ir/diagnostics.h"
#include "ir/parser.h"
#include "ir/pass_manager.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace tessera::ir;

namespace {

bool sameAttribute(const Attribute &a, const Attribute &b) {
  const double *x = std::get_if<double>(&a), *y = std::get_if<double>(&b);
  if (x && y) // bit-exact (tells -0.0 from 0.0); NaN payloads are not printed
    return (std::isnan(*x) && std::isnan(*y)) || std::memcmp(x, y, sizeof(double)) == 0;
  return a == b;
}

/// Compares two ops and everything nested, mapping a's values to b's as it goes.
void expectSameOp(const Operation &a, const Operation &b,
                  std::map<const Value *, const Value *> &values) {
  ASSERT_EQ(a.code(), b.code());
  EXPECT_EQ(a.location(), b.location());
  ASSERT_EQ(a.numOperands(), b.numOperands()) << a.name();
  for (unsigned i = 0; i < a.numOperands(); ++i)
    EXPECT_EQ(values.at(a.operand(i)), b.operand(i)) << a.name() << " operand " << i;
  ASSERT_EQ(a.attributes().size(), b.attributes().size()) << a.name();
  for (auto &[key, value] : a.attributes()) {
    ASSERT_TRUE(b.hasAttr(key)) << key;
    EXPECT_TRUE(sameAttribute(value, b.attr(key))) << key << ": " << attributeStr(value);
  }
  ASSERT_EQ(a.numResults(), b.numResults());
  for (unsigned i = 0; i < a.numResults(); ++i) {
    EXPECT_EQ(a.result(i)->type(), b.result(i)->type());
    values[a.result(i)] = b.result(i);
  }
  ASSERT_EQ(a.numRegions(), b.numRegions());
  for (unsigned r = 0; r < a.numRegions(); ++r) {
    const Block &blockA = a.regions()[r]->front(), &blockB = b.regions()[r]->front();
    ASSERT_EQ(blockA.numArguments(), blockB.numArguments());
    for (unsigned i = 0; i < blockA.numArguments(); ++i) {
      EXPECT_EQ(blockA.argument(i)->type(), blockB.argument(i)->type());
      values[blockA.argument(i)] = blockB.argument(i);
    }
    ASSERT_EQ(blockA.operations().size(), blockB.operations().size());
    auto itB = blockB.operations().begin();
    for (auto &op : blockA.operations())
      expectSameOp(*op, **itB++, values);
  }
}

void expectSameModule(const Module &a, const Module &b) {
  ASSERT_EQ(a.attributes().size(), b.attributes().size());
  for (auto &[key, value] : a.attributes())
    EXPECT_TRUE(b.attributes().count(key) && sameAttribute(value, b.attributes().at(key)));
  ASSERT_EQ(a.body().operations().size(), b.body().operations().size());
  std::map<const Value *, const Value *> values;
  auto itB = b.body().operations().begin();
  for (auto &op : a.body().operations())
    expectSameOp(*op, **itB++, values);
}

/// print -> parse gives the same IR, and printing it again gives the same text.
void expectRoundTrip(const Module &module) {
  ASSERT_NO_THROW(verify(module));
  PrintOptions withLocations;
  withLocations.locations = true;
  std::string text = toString(module, withLocations);
  std::unique_ptr<Module> parsed;
  ASSERT_NO_THROW(parsed = parseModule(text)) << text;
  EXPECT_NO_THROW(verify(*parsed));
  EXPECT_EQ(toString(*parsed, withLocations), text);
  EXPECT_EQ(toString(*parsed), toString(module));
  expectSameModule(module, *parsed);
}

Type f16() { return Type::scalar(ScalarKind::F16); }

} // namespace

TEST(Parser, RoundTripsHandBuiltModule) {
  Module m;
  m.attributes() = {{"num_warps", int64_t(4)},
                    {"target", std::string("sm_90a")},
                    {"scale", -0.0},
                    {"quoted", std::string("a \"b\" \\c")},
                    {"huge", std::numeric_limits<double>::infinity()},
                    {"shape", std::vector<int64_t>{}},
                    {"element", Type::pointer(f16(), 3)},
                    {"debug", false}};
  Builder b(&m.body());
  Operation *func = b.create(OpCode::Func, {}, {},
                             {{"sym_name", std::string("k")},
                              {"divisibility", std::vector<int64_t>{16, 0, -1}}},
                             1);
  Block &body = func->body();
  Value *ptr = body.addArgument(Type::pointer(Type::f32()));
  Value *n = body.addArgument(Type::i32());
  Value *flag = body.addArgument(Type::i1());
  b.setInsertionPointToEnd(&body);
  b.setLocation("kernel.py:7:3");
  Value *zero = b.constantInt(0, Type::i32());
  Value *one = b.constantInt(1, Type::i32());
  Value *init = b.constantFloat(0.1, Type::f32());
  b.setLocation("");
  Operation *loop = b.create(OpCode::For, {zero, n, one, init, n}, {Type::f32(), Type::i32()}, {},
                             1);
  Block &loopBody = loop->body();
  loopBody.addArgument(Type::i32());
  Value *acc = loopBody.addArgument(Type::f32());
  Value *count = loopBody.addArgument(Type::i32());
  Builder inner(&loopBody);
  Operation *branch = inner.create(OpCode::If, {flag}, {Type::f32()}, {}, 2);
  Builder thenB(&branch->body(0)), elseB(&branch->body(1));
  Value *doubled = thenB.create(OpCode::AddF, {acc, acc}, {Type::f32()})->result();
  thenB.create(OpCode::Yield, {doubled}, {});
  elseB.create(OpCode::Yield, {acc}, {});
  Value *next = inner.create(OpCode::AddI, {count, one}, {Type::i32()})->result();
  inner.create(OpCode::Yield, {branch->result(), next}, {});
  Type range = Type::tensor({64}, Type::i32());
  Value *offsets = b.create(OpCode::MakeRange, {}, {range}, {{"start", int64_t(0)},
                                                             {"end", int64_t(64)}})
                       ->result();
  Value *base = b.create(OpCode::Splat, {ptr}, {range.withElement(ptr->type())})->result();
  Value *ptrs = b.create(OpCode::AddPtr, {base, offsets}, {base->type()})->result();
  Value *values = b.create(OpCode::Splat, {loop->result(0)}, {Type::tensor({64}, Type::f32())})
                      ->result();
  b.create(OpCode::Store, {ptrs, values}, {});
  b.create(OpCode::Return, {}, {});
  expectRoundTrip(m);
}

TEST(Parser, ReadsValuesAttributesAndLocations) {
  const char *text = R"(
    // comments are skipped
    module {
      func @f(%x: i32, %y: f16) {flag = true, n = -3, s = 2.5e-3, name = "q\"", t = !ptr<i8, 3>} {
        %sum = addi %x, %x : (i32, i32) -> i32 loc("a.py:1:2")
        %c = constant {value = -inf} : () -> f16
        return : () -> ()
      }
    })";
  std::unique_ptr<Module> m = parseModule(text);
  Operation *func = m->lookupFunction("f");
  ASSERT_NE(func, nullptr);
  EXPECT_EQ(std::get<bool>(func->attr("flag")), true);
  EXPECT_EQ(std::get<int64_t>(func->attr("n")), -3);
  EXPECT_EQ(std::get<double>(func->attr("s")), 2.5e-3);
  EXPECT_EQ(func->stringAttr("name"), "q\"");
  EXPECT_EQ(std::get<Type>(func->attr("t")), Type::pointer(Type::scalar(ScalarKind::I8), 3));
  Block &body = func->body();
  ASSERT_EQ(body.numArguments(), 2u);
  EXPECT_EQ(body.argument(1)->type(), f16());
  Operation *sum = body.operations().front().get();
  EXPECT_EQ(sum->code(), OpCode::AddI);
  EXPECT_EQ(sum->operand(0), body.argument(0));
  EXPECT_EQ(sum->operand(1), body.argument(0));
  EXPECT_EQ(body.argument(0)->users().size(), 2u);
  EXPECT_EQ(sum->location(), "a.py:1:2");
  Operation *constant = std::next(body.operations().begin())->get();
  EXPECT_EQ(constant->floatAttr("value"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(constant->location(), "");
}

TEST(Parser, LocatesOpsWhenAsked) {
  ParserOptions options;
  options.fileName = "t.ir";
  options.locateOps = true;
  auto m = parseModuleWithOptions("func @f(%x: i32) {\n  %a = addi %x, %x : (i32, i32) -> i32\n"
                                  "  return : () -> () loc(\"k.py:9:1\")\n}\n",
                                  options);
  Block &body = m->lookupFunction("f")->body();
  EXPECT_EQ(m->lookupFunction("f")->location(), "t.ir:1:1");
  EXPECT_EQ(body.operations().front()->location(), "t.ir:2:3");
  EXPECT_EQ(body.operations().back()->location(), "k.py:9:1"); // explicit wins
}

// ---------------------------------------------------------------- random modules

namespace {

/// Builds random small functions: constants, elementwise ops, compares, nested for/if, and
/// ops carrying random extra attributes and locations. Every module it builds verifies.
class RandomModule {
public:
  explicit RandomModule(unsigned seed) : rng_(seed) {}

  std::unique_ptr<Module> build() {
    auto module = std::make_unique<Module>();
    module->attributes()["seed"] = int64_t(rng_());
    for (int f = 0, count = pick(1, 2); f < count; ++f) {
      Builder b(&module->body());
      Operation *func = b.create(OpCode::Func, {}, {},
                                 {{"sym_name", std::string("f") + std::to_string(f)}}, 1);
      pool_.clear();
      for (int i = 0, args = pick(1, 4); i < args; ++i)
        pool_.push_back(func->body().addArgument(randomType()));
      Builder body(&func->body());
      fill(body, 0);
      body.create(OpCode::Return, {}, {});
    }
    return module;
  }

private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  Type randomType() {
    static const std::vector<Type> types = {
        Type::i32(), Type::i64(), Type::f32(), f16(), Type::scalar(ScalarKind::BF16),
        Type::tensor({4}, Type::i32()), Type::tensor({2, 8}, Type::f32())};
    return types[pick(0, types.size() - 1)];
  }

  Attribute randomValue(Type type) {
    if (type.isInteger())
      return int64_t(std::uniform_int_distribution<int64_t>(-1000000, 1000000)(rng_));
    static const double specials[] = {0.0, -0.0, std::numeric_limits<double>::infinity(),
                                      std::numeric_limits<double>::quiet_NaN(), 1e-310,
                                      6.103515625e-05};
    if (pick(0, 3) == 0)
      return specials[pick(0, 5)];
    return std::uniform_real_distribution<double>(-1e6, 1e6)(rng_);
  }

  std::map<std::string, Attribute> randomExtras() {
    std::map<std::string, Attribute> attrs;
    if (pick(0, 3) == 0)
      attrs["note"] = std::string(pick(0, 1) ? "tab\there \"x\"" : "back\\slash");
    if (pick(0, 4) == 0)
      attrs["dims"] = std::vector<int64_t>{pick(-5, 5), pick(0, 1 << 20)};
    if (pick(0, 5) == 0)
      attrs["hint"] = randomType();
    if (pick(0, 5) == 0)
      attrs["on"] = pick(0, 1) == 1;
    return attrs;
  }

  Value *valueOf(Type type, Builder &b) {
    std::vector<Value *> matching;
    for (Value *v : pool_)
      if (v->type() == type)
        matching.push_back(v);
    if (!matching.empty() && pick(0, 4))
      return matching[pick(0, matching.size() - 1)];
    Value *c = b.create(OpCode::Constant, {}, {type}, {{"value", randomValue(type)}})->result();
    pool_.push_back(c);
    return c;
  }

  void fill(Builder &b, int depth) {
    for (int i = 0, count = pick(1, 6); i < count; ++i) {
      b.setLocation(pick(0, 2) ? "" : "gen.py:" + std::to_string(pick(1, 99)) + ":1");
      int kind = pick(0, depth < 2 ? 5 : 3);
      if (kind <= 2)
        addElementwise(b);
      else if (kind == 3)
        addCompare(b);
      else if (kind == 4)
        addFor(b, depth);
      else
        addIf(b, depth);
    }
  }

  void addElementwise(Builder &b) {
    Type type = randomType();
    static const OpCode intOps[] = {OpCode::AddI, OpCode::SubI, OpCode::MulI, OpCode::XOrI,
                                    OpCode::MaxSI};
    static const OpCode floatOps[] = {OpCode::AddF, OpCode::MulF, OpCode::DivF,
                                      OpCode::MinimumF};
    OpCode code = type.isInteger() ? intOps[pick(0, 4)] : floatOps[pick(0, 3)];
    Value *lhs = valueOf(type, b), *rhs = valueOf(type, b);
    pool_.push_back(b.create(code, {lhs, rhs}, {type}, randomExtras())->result());
  }

  void addCompare(Builder &b) {
    Type type = randomType();
    bool isInt = type.isInteger();
    auto attrs = randomExtras();
    attrs["predicate"] = std::string(isInt ? "sle" : "une");
    Value *lhs = valueOf(type, b), *rhs = valueOf(type, b);
    pool_.push_back(b.create(isInt ? OpCode::CmpI : OpCode::CmpF, {lhs, rhs},
                             {type.withElement(Type::i1())}, attrs)
                        ->result());
  }

  void addFor(Builder &b, int depth) {
    std::vector<Value *> operands = {valueOf(Type::i32(), b), valueOf(Type::i32(), b),
                                     valueOf(Type::i32(), b)};
    std::vector<Type> carried;
    for (int i = 0, count = pick(0, 2); i < count; ++i) {
      carried.push_back(randomType());
      operands.push_back(valueOf(carried.back(), b));
    }
    Operation *loop = b.create(OpCode::For, operands, carried, randomExtras(), 1);
    size_t outer = pool_.size();
    pool_.push_back(loop->body().addArgument(Type::i32()));
    for (Type t : carried)
      pool_.push_back(loop->body().addArgument(t));
    Builder body(&loop->body());
    fill(body, depth + 1);
    std::vector<Value *> yielded;
    for (Type t : carried)
      yielded.push_back(valueOf(t, body));
    body.create(OpCode::Yield, yielded, {});
    pool_.resize(outer); // body values are not visible after the loop
    for (auto &result : loop->results())
      pool_.push_back(result.get());
  }

  void addIf(Builder &b, int depth) {
    Value *condition = valueOf(Type::i1(), b);
    std::vector<Type> types;
    for (int i = 0, count = pick(0, 2); i < count; ++i)
      types.push_back(randomType());
    Operation *branch = b.create(OpCode::If, {condition}, types, {}, 2);
    for (unsigned r = 0; r < 2; ++r) {
      size_t outer = pool_.size();
      Builder region(&branch->body(r));
      fill(region, depth + 1);
      std::vector<Value *> yielded;
      for (Type t : types)
        yielded.push_back(valueOf(t, region));
      region.create(OpCode::Yield, yielded, {});
      pool_.resize(outer);
    }
    for (auto &result : branch->results())
      pool_.push_back(result.get());
  }

  std::mt19937 rng_;
  std::vector<Value *> pool_;
};

} // namespace

TEST(Parser, RoundTripsRandomModules) {
  for (unsigned seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::unique_ptr<Module> module = RandomModule(seed).build();
    expectRoundTrip(*module);
    if (HasFatalFailure() || HasNonfatalFailure())
      return;
  }
}

// ---------------------------------------------------------------- errors

struct BadInput {
  const char *text;
  const char *position; // "line:col"
  const char *message;
};

TEST(Parser, ReportsErrorsWithPositions) {
  const BadInput cases[] = {
      {"func @f(%x: i32) {\n  %0 = addi %x, %y : (i32, i32) -> i32\n}", "2:17",
       "use of undefined value '%y'"},
      {"func @f(%x: i32) {\n  %0 = nope %x : (i32) -> i32\n}", "2:8", "unknown op 'nope'"},
      {"func @f(%x: i32) {\n  %0 = addi %x, %x : (i32, f32) -> i32\n}", "2:17",
       "type mismatch: operand 1 has type i32 but f32 is declared"},
      {"func @f(%x: i32) {\n  %x = addi %x, %x : (i32, i32) -> i32\n}", "2:3",
       "redefinition of value '%x'"},
      {"func @f(%x: tensor<4xfloat>) {\n}", "1:22", "expected a type, found 'float'"},
      {"func @f(%x: ptr<f32 3>) {\n}", "1:21", "expected '>', found '3'"},
      {"module {\n  func @f() {\n    return : () -> ()\n", "4:1", "expected '}', found end"},
      {"func @f() {\n  %0 = constant {value = 1e} : () -> f32\n}", "2:26",
       "malformed number '1e'"},
      {"func @f() {\n  %0 = constant {value = 99999999999999999999} : () -> i64\n}", "2:26",
       "integer out of range"},
      {"func @f() {\n  %0 = constant {value = 1, value = 2} : () -> i64\n}", "2:29",
       "duplicate attribute 'value'"},
  };
  for (const BadInput &bad : cases) {
    SCOPED_TRACE(bad.text);
    try {
      parseModule(bad.text);
      ADD_FAILURE() << "expected a CompileError";
    } catch (const CompileError &error) {
      EXPECT_EQ(error.location(), bad.position) << error.what();
      EXPECT_NE(error.message().find(bad.message), std::string::npos) << error.what();
    }
  }
}

TEST(Parser, LeavesVerificationToTheCaller) {
  // Well-formed text for an ill-typed op parses; the verifier then rejects it.
  auto m = parseModule("func @f(%x: i32, %y: f32) {\n"
                       "  %0 = addi %x, %y : (i32, f32) -> i32\n"
                       "  return : () -> ()\n}\n");
  EXPECT_THROW(verify(*m), CompileError);
}

// The cleanup passes on random modules: each result still verifies and still round-trips.
TEST(Parser, RandomModulesStayValidThroughCleanupPasses) {
  for (unsigned seed = 1; seed <= 100; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::unique_ptr<Module> module = RandomModule(seed).build();
    for (const char *name : {"canonicalize", "cse", "licm", "dce"}) {
      SCOPED_TRACE(name);
      const PassInfo *pass = lookupPass(name);
      ASSERT_NE(pass, nullptr);
      ASSERT_NO_THROW(pass->run(*module)) << toString(*module);
      expectRoundTrip(*module);
    }
    if (HasFailure())
      return;
  }
}
