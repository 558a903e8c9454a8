// The verifier: checks each op's operand/result/region contract (see ops.def) and that every
// operand is defined before use in an enclosing scope (structured-region dominance).
#include "ir/verifier.h"

#include "ir/diagnostics.h"
#include "ir/verify_matrix.h"
#include "ir/verify_tensormap.h"
#include "ir/verify_tma.h"
#include "layout/slice.h"

#include <array>
#include <set>

namespace tessera::ir {

namespace {

bool sameShape(const Type &a, const Type &b) { return a.shape() == b.shape(); }

void expectOperands(const Operation &op, unsigned lo, unsigned hi) {
  if (op.numOperands() < lo || op.numOperands() > hi)
    emitError(op, "expected " + std::to_string(lo) + (lo == hi ? "" : ".." + std::to_string(hi)) +
                      " operands, got " + std::to_string(op.numOperands()));
}

void expectResults(const Operation &op, unsigned n) {
  if (op.numResults() != n)
    emitError(op,
              "expected " + std::to_string(n) + " results, got " + std::to_string(op.numResults()));
}

void expectTerminator(const Operation &op, const Block &block, OpCode code) {
  Operation *term = block.terminator();
  if (!term || term->code() != code)
    emitError(op, std::string("region must end with '") + opName(code) + "'");
}

void expectTypes(const Operation &op, const std::vector<Value *> &values, size_t first,
                 const std::vector<Type> &types, const char *what) {
  if (values.size() - first != types.size())
    emitError(op, std::string(what) + ": count mismatch");
  for (size_t i = 0; i < types.size(); ++i)
    if (values[first + i]->type() != types[i])
      emitError(op, std::string(what) + ": type mismatch at " + std::to_string(i) + " (" +
                        values[first + i]->type().str() + " vs " + types[i].str() + ")");
}

std::vector<Type> resultTypes(const Operation &op) {
  std::vector<Type> ts;
  for (auto &r : op.results())
    ts.push_back(r->type());
  return ts;
}

std::vector<Type> argTypes(const Block &b) {
  std::vector<Type> ts;
  for (auto &a : b.arguments())
    ts.push_back(a->type());
  return ts;
}

void verifyElementwise(const Operation &op) {
  if (op.numResults() != 1)
    emitError(op, "elementwise op must have one result");
  const Type &rt = op.result()->type();
  for (Value *v : op.operands())
    if (v->type().isTensor() != rt.isTensor() || !sameShape(v->type(), rt))
      emitError(op, "operand type " + v->type().str() + " does not match result shape " + rt.str());
}

// One rule per op (or group of ops with one contract), found through verifierRule().

void verifyFunc(const Operation &op) {
  if (op.numRegions() != 1 || !op.hasAttr("sym_name"))
    emitError(op, "func needs a sym_name and one region");
  expectTerminator(op, op.regions()[0]->front(), OpCode::Return);
}

void verifyFor(const Operation &op) {
  const auto &ops = op.operands();
  expectOperands(op, 3, ~0u);
  const Block &body = op.regions()[0]->front();
  for (int i = 0; i < 3; ++i)
    if (!ops[i]->type().isScalar() || !ops[i]->type().isInteger())
      emitError(op, "bounds and step must be integer scalars");
  if (body.numArguments() != op.numOperands() - 2)
    emitError(op, "body must take the induction variable and one argument per init");
  std::vector<Type> carried = argTypes(body);
  carried.erase(carried.begin());
  expectTypes(op, ops, 3, carried, "init vs body argument");
  if (resultTypes(op) != carried)
    emitError(op, "results must match the carried values");
  expectTerminator(op, body, OpCode::Yield);
  expectTypes(op, body.terminator()->operands(), 0, carried, "yield vs carried values");
}

void verifyIf(const Operation &op) {
  const auto &ops = op.operands();
  expectOperands(op, 1, 1);
  if (ops[0]->type() != Type::i1())
    emitError(op, "condition must be i1");
  if (op.numRegions() != 2)
    emitError(op, "if needs then and else regions");
  for (auto &region : op.regions()) {
    expectTerminator(op, region->front(), OpCode::Yield);
    expectTypes(op, region->front().terminator()->operands(), 0, resultTypes(op),
                "yield vs if results");
  }
}

void verifyWhile(const Operation &op) {
  const auto &ops = op.operands();
  if (op.numRegions() != 2)
    emitError(op, "while needs before and after regions");
  const Block &before = op.regions()[0]->front(), &after = op.regions()[1]->front();
  expectTypes(op, ops, 0, argTypes(before), "init vs before arguments");
  expectTerminator(op, before, OpCode::Condition);
  const auto &cond = before.terminator()->operands();
  if (cond.empty() || cond[0]->type() != Type::i1())
    emitError(op, "condition's first operand must be i1");
  expectTypes(op, cond, 1, argTypes(after), "condition vs after arguments");
  expectTypes(op, cond, 1, resultTypes(op), "condition vs results");
  expectTerminator(op, after, OpCode::Yield);
  expectTypes(op, after.terminator()->operands(), 0, argTypes(before), "yield vs before");
}

void verifyConstant(const Operation &op) {
  expectOperands(op, 0, 0);
  expectResults(op, 1);
  if (!op.hasAttr("value"))
    emitError(op, "constant needs a value");
}

void verifyProgramIndex(const Operation &op) {
  expectResults(op, 1);
  if (op.intAttr("axis") < 0 || op.intAttr("axis") > 2)
    emitError(op, "axis must be 0, 1 or 2");
}

void verifyMakeRange(const Operation &op) {
  expectResults(op, 1);
  int64_t n = op.intAttr("end") - op.intAttr("start");
  const Type &t = op.result()->type();
  if (n <= 0 || t.rank() != 1 || t.shape()[0] != n || t.elementType() != Type::i32())
    emitError(op, "make_range result must be tensor<(end-start) x i32>");
}

void verifySplat(const Operation &op) {
  const auto &ops = op.operands();
  expectOperands(op, 1, 1);
  if (ops[0]->type().isTensor() || !op.result()->type().isTensor() ||
      op.result()->type().elementType() != ops[0]->type())
    emitError(op, "splat takes a scalar to a tensor of that element type");
}

void verifyBroadcast(const Operation &op) {
  const auto &ops = op.operands();
  expectOperands(op, 1, 1);
  const Type &src = ops[0]->type(), &dst = op.result()->type();
  if (src.rank() != dst.rank() || src.elementType() != dst.elementType())
    emitError(op, "broadcast keeps rank and element type");
  for (int i = 0; i < src.rank(); ++i)
    if (src.shape()[i] != dst.shape()[i] && src.shape()[i] != 1)
      emitError(op, "broadcast can only grow dimensions of size 1");
}

void verifyExpandDims(const Operation &op) {
  const auto &ops = op.operands();
  expectOperands(op, 1, 1);
  const Type &src = ops[0]->type(), &dst = op.result()->type();
  int64_t axis = op.intAttr("axis");
  if (dst.rank() != src.rank() + 1 || axis < 0 || axis > src.rank() || dst.shape()[axis] != 1)
    emitError(op, "expand_dims inserts one dimension of size 1 at axis");
}

void verifyReshapeOrConversion(const Operation &op) {
  const auto &ops = op.operands();
  expectOperands(op, 1, 1);
  if (ops[0]->type().numElements() != op.result()->type().numElements() ||
      ops[0]->type().elementType() != op.result()->type().elementType())
    emitError(op, "must keep the element type and element count");
  if (op.code() == OpCode::ConvertLayout && !sameShape(ops[0]->type(), op.result()->type()))
    emitError(op, "convert_layout keeps the shape");
}

void verifyAddPtr(const Operation &op) {
  const auto &ops = op.operands();
  expectOperands(op, 2, 2);
  verifyElementwise(op);
  if (!ops[0]->type().elementType().isPointer() || !ops[1]->type().isInteger())
    emitError(op, "addptr takes pointers and integer offsets");
}

void verifyLoad(const Operation &op) {
  const auto &ops = op.operands();
  if (op.hasAttr("tma"))
    verifyTmaLoadOperands(op);
  else
    expectOperands(op, 1, 3);
  expectResults(op, 1);
  if (!ops[0]->type().elementType().isPointer() ||
      ops[0]->type().elementType().pointee() != op.result()->type().elementType())
    emitError(op, "load result must be the pointee type");
  if (ops.size() >= 2 && ops[1]->type().elementType() != Type::i1())
    emitError(op, "mask must be i1");
}

void verifyStore(const Operation &op) {
  const auto &ops = op.operands();
  if (op.hasAttr("tma"))
    verifyTmaStoreOperands(op);
  else
    expectOperands(op, 2, 3);
  expectResults(op, 0);
  if (!ops[0]->type().elementType().isPointer() ||
      ops[0]->type().elementType().pointee() != ops[1]->type().elementType())
    emitError(op, "stored value must be the pointee type");
}

void verifySelect(const Operation &op) {
  const auto &ops = op.operands();
  expectOperands(op, 3, 3);
  verifyElementwise(op);
  if (ops[0]->type().elementType() != Type::i1() || ops[1]->type() != ops[2]->type())
    emitError(op, "select takes an i1 condition and two values of one type");
}

void verifyCompare(const Operation &op) {
  const auto &ops = op.operands();
  expectOperands(op, 2, 2);
  verifyElementwise(op);
  if (ops[0]->type() != ops[1]->type() || op.result()->type().elementType() != Type::i1())
    emitError(op, "compare takes two values of one type and gives i1");
  if (!op.hasAttr("predicate"))
    emitError(op, "compare needs a predicate");
}

void verifyPrint(const Operation &op) {
  const auto &ops = op.operands();
  expectResults(op, 0);
  if (!op.hasAttr("prefix") || !std::holds_alternative<std::string>(op.attr("prefix")))
    emitError(op, "print needs a string prefix");
  if (op.hasAttr("is_signed") &&
      (!std::holds_alternative<std::vector<int64_t>>(op.attr("is_signed")) ||
       op.arrayAttr("is_signed").size() != ops.size()))
    emitError(op, "print's is_signed must have one entry per operand");
  // Pointers print their addresses (as Triton's %p), numbers their values.
}

void verifyAssert(const Operation &op) {
  const auto &ops = op.operands();
  expectOperands(op, 1, 1);
  expectResults(op, 0);
  if (ops[0]->type().elementType() != Type::i1())
    emitError(op, "assert's condition must be i1 (a scalar or a tensor)");
  if (!op.hasAttr("message") || !std::holds_alternative<std::string>(op.attr("message")))
    emitError(op, "assert needs a string message");
}

void verifyInlineAsm(const Operation &op) {
  verifyElementwise(op); // operands of any types, one shape
  for (const char *name : {"asm", "constraints", "outputs"})
    if (!op.hasAttr(name) || !std::holds_alternative<std::string>(op.attr(name)))
      emitError(op, std::string("inline_asm needs a string attribute '") + name + "'");
  if (!op.hasAttr("pack") || op.intAttr("pack") < 1 || !op.hasAttr("index"))
    emitError(op, "inline_asm needs pack >= 1 and an output index");
}

/// The other elementwise ops: one shape, and one type for operands and result except casts.
void verifyElementwiseSameType(const Operation &op) {
  const auto &ops = op.operands();
  verifyElementwise(op);
  bool isCast = op.numOperands() == 1 && op.code() != OpCode::NegF;
  if (!isCast)
    for (Value *v : ops)
      if (v->type() != op.result()->type())
        emitError(op, "operands and result must have one type, got " + v->type().str() + " and " +
                          op.result()->type().str());
}

using RuleTable = std::array<VerifierRule, kNumOpCodes>;

RuleTable makeRuleTable() {
  RuleTable table{};
  auto set = [&](std::initializer_list<OpCode> codes, const char *name,
                 void (*check)(const Operation &)) {
    for (OpCode code : codes)
      table[static_cast<size_t>(code)] = {name, check};
  };
  set({OpCode::Func}, "verifyFunc", verifyFunc);
  set({OpCode::For}, "verifyFor", verifyFor);
  set({OpCode::If}, "verifyIf", verifyIf);
  set({OpCode::While}, "verifyWhile", verifyWhile);
  set({OpCode::Constant}, "verifyConstant", verifyConstant);
  set({OpCode::ProgramId, OpCode::NumPrograms}, "verifyProgramIndex", verifyProgramIndex);
  set({OpCode::MakeRange}, "verifyMakeRange", verifyMakeRange);
  set({OpCode::Splat}, "verifySplat", verifySplat);
  set({OpCode::Broadcast}, "verifyBroadcast", verifyBroadcast);
  set({OpCode::ExpandDims}, "verifyExpandDims", verifyExpandDims);
  set({OpCode::Reshape, OpCode::ConvertLayout}, "verifyReshapeOrConversion",
      verifyReshapeOrConversion);
  set({OpCode::AddPtr}, "verifyAddPtr", verifyAddPtr);
  set({OpCode::Load}, "verifyLoad", verifyLoad);
  set({OpCode::Store}, "verifyStore", verifyStore);
  set({OpCode::Select}, "verifySelect", verifySelect);
  set({OpCode::CmpI, OpCode::CmpF}, "verifyCompare", verifyCompare);
  set({OpCode::Print}, "verifyPrint", verifyPrint);
  set({OpCode::Assert}, "verifyAssert", verifyAssert);
  set({OpCode::Reduce, OpCode::Scan}, "verifyReductionOp", detail::verifyReductionOp);
  set({OpCode::InlineAsm}, "verifyInlineAsm", verifyInlineAsm);
  set({OpCode::Dot, OpCode::Trans, OpCode::LocalAlloc, OpCode::LocalLoad, OpCode::AsyncCopy,
       OpCode::AsyncCommitGroup, OpCode::AsyncWait, OpCode::Barrier, OpCode::WgmmaWait,
       OpCode::WarpgroupTurn},
      "verifyTensorCoreOp", verifyTensorCoreOp);
  set({OpCode::MBarrierInit, OpCode::MBarrierExpectTx, OpCode::TmaLoad, OpCode::MBarrierWait,
       OpCode::MBarrierInval, OpCode::MBarrierArrive, OpCode::WarpSpecialize},
      "verifyTmaOp", verifyTmaOp);
  set({OpCode::GlobalScratch, OpCode::TensorMapCreate}, "verifyTensorMapOp", verifyTensorMapOp);
  set({OpCode::Exp, OpCode::Exp2, OpCode::Log, OpCode::Log2, OpCode::Sqrt, OpCode::PreciseSqrt,
       OpCode::Rsqrt, OpCode::Sin, OpCode::Cos, OpCode::Erf, OpCode::Tanh, OpCode::Floor,
       OpCode::Ceil, OpCode::AbsF, OpCode::AbsI, OpCode::Fma, OpCode::FastDivF, OpCode::MulHiUI},
      "verifyMathOp", detail::verifyMathOp);
  set({OpCode::ExternElementwise}, "verifyExternElementwise", detail::verifyExternElementwise);
  set({OpCode::AtomicRMW, OpCode::AtomicCAS}, "verifyAtomicOp", detail::verifyAtomicOp);
  // Every other elementwise op (integer and float arithmetic, casts) shares one contract.
  for (size_t i = 0; i < kNumOpCodes; ++i)
    if (!table[i].check && hasTrait(static_cast<OpCode>(i), trait::ELEMENTWISE))
      table[i] = {"verifyElementwiseSameType", verifyElementwiseSameType};
  return table;
}

void verifyOpContract(const Operation &op) {
  // Ops without a rule (ops.def's NO_RULE: terminators) are checked by their enclosing op.
  if (const VerifierRule *rule = verifierRule(op.code()))
    rule->check(op);
}

bool sameEncoding(const Value *a, const Value *b) {
  const EncodingPtr &x = a->type().encoding(), &y = b->type().encoding();
  return x == y || (x && y && x->equals(*y));
}

// Layout encodings (once assigned): each has its tensor's rank; elementwise ops, loads, stores
// and broadcasts keep one layout across their tensors; expand_dims takes a Slice of its
// result's layout. A mix of tensors with and without layouts is an error too.
void verifyEncodings(const Operation &op) {
  std::vector<const Value *> tensors;
  for (const Value *v : op.operands())
    if (v->type().isTensor())
      tensors.push_back(v);
  for (auto &r : op.results())
    if (r->type().isTensor())
      tensors.push_back(r.get());
  for (const Value *v : tensors)
    if (v->type().encoding() && v->type().encoding()->rank() != v->type().rank())
      emitError(op, "layout rank does not match " + v->type().str());
  if (op.code() == OpCode::Reduce || op.code() == OpCode::Scan)
    return detail::verifyReductionEncodings(op);
  if (op.code() == OpCode::ExpandDims && op.result()->type().encoding()) {
    const auto *slice = dynamic_cast<const SliceEncoding *>(op.operand(0)->type().encoding().get());
    if (!slice || slice->getDim() != op.intAttr("axis") ||
        !slice->getParent()->equals(*op.result()->type().encoding()))
      emitError(op, "operand layout must be the result's sliced along axis, got " +
                        op.operand(0)->type().str());
    return;
  }
  if (op.code() == OpCode::Store && op.hasAttr("tma") && tensors.size() >= 2)
    tensors.erase(tensors.begin() + 1); // a TMA store stages its value from any layout
  bool sharesLayout = op.code() == OpCode::Load || op.code() == OpCode::Store ||
                      op.code() == OpCode::Broadcast || op.hasTrait(trait::ELEMENTWISE);
  if (!sharesLayout || tensors.empty())
    return;
  for (const Value *v : tensors)
    if (!sameEncoding(v, tensors[0]))
      emitError(op, "tensors must share one layout, got " + tensors[0]->type().str() + " and " +
                        v->type().str());
}

// Walks a block checking that each operand is defined earlier in this block or an enclosing one.
void verifyBlock(const Block &block, std::set<const Value *> &visible) {
  std::vector<const Value *> added;
  for (auto &arg : block.arguments())
    visible.insert(arg.get()), added.push_back(arg.get());
  for (auto &op : block.operations()) {
    for (Value *v : op->operands())
      if (!visible.count(v))
        emitError(*op, "operand used before its definition or outside its scope");
    if (op->hasTrait(trait::TERM) && op.get() != &*block.operations().back())
      emitError(*op, "terminator must be the last op of its block");
    verifyOpContract(*op);
    verifyEncodings(*op);
    for (auto &region : op->regions())
      verifyBlock(region->front(), visible);
    for (auto &r : op->results())
      visible.insert(r.get()), added.push_back(r.get());
  }
  for (const Value *v : added)
    visible.erase(v);
}

} // namespace

const VerifierRule *verifierRule(OpCode code) {
  static const RuleTable table = makeRuleTable();
  const VerifierRule &rule = table[static_cast<size_t>(code)];
  return rule.check ? &rule : nullptr;
}

void verify(const Operation &op) {
  std::set<const Value *> visible;
  verifyOpContract(op);
  for (auto &region : op.regions())
    verifyBlock(region->front(), visible);
}

void verify(const Module &module) {
  for (auto &op : module.body().operations()) {
    if (op->code() != OpCode::Func)
      emitError(*op, "only func ops may appear at module level");
    verify(*op);
  }
}

} // namespace tessera::ir
