// Verifier rules of the math ops and the atomics (see ops.def): element types, one type across
// operands and result, the atomics' kind/sem/scope attributes and their shared layout.
// verifier.cpp calls these from its per-op switch.
//
//   %y = exp %x : (tensor<128xf32>) -> tensor<128xf32>
//   %n = extern_elementwise %x {pure = true, symbol = "__nv_ilogbf"}
//        : (tensor<128xf32>) -> tensor<128xi32>
//   %old = atomic_rmw %p, %v, %m {kind = "fadd", scope = "gpu", sem = "acq_rel"}
//        : (tensor<128xptr<f32>>, tensor<128xf32>, tensor<128xi1>) -> tensor<128xf32>
#include "ir/verifier.h"

#include "ir/diagnostics.h"

#include <set>

namespace tessera::ir::detail {

namespace {

bool isKind(const Type &type, std::initializer_list<ScalarKind> kinds) {
  Type element = type.elementType();
  if (!element.isScalar())
    return false;
  for (ScalarKind kind : kinds)
    if (element.scalarKind() == kind)
      return true;
  return false;
}

bool isF32OrF64(const Type &type) { return isKind(type, {ScalarKind::F32, ScalarKind::F64}); }

void expectSameTypes(const Operation &op, unsigned numOperands) {
  if (op.numOperands() != numOperands || op.numResults() != 1)
    emitError(op, "takes " + std::to_string(numOperands) + " operands and gives one result");
  for (Value *operand : op.operands())
    if (operand->type() != op.result()->type())
      emitError(op, "operands and result must have one type, got " + operand->type().str() +
                        " and " + op.result()->type().str());
}

const std::string &stringAttrOrFail(const Operation &op, const char *name) {
  if (!op.hasAttr(name) || !std::holds_alternative<std::string>(op.attr(name)))
    emitError(op, std::string("needs a string attribute '") + name + "'");
  return op.stringAttr(name);
}

void expectOneOf(const Operation &op, const char *name, const std::set<std::string> &allowed) {
  const std::string &value = stringAttrOrFail(op, name);
  if (allowed.count(value))
    return;
  std::string list;
  for (const std::string &item : allowed)
    list += (list.empty() ? "" : ", ") + item;
  emitError(op, std::string(name) + " must be one of " + list + ", got '" + value + "'");
}

/// Element types each atomic_rmw kind accepts (the front end bitcasts or rejects the rest).
bool kindAcceptsElement(const std::string &kind, const Type &element) {
  bool isInt32Or64 = isKind(element, {ScalarKind::I32, ScalarKind::I64});
  if (kind == "fadd")
    return isKind(element, {ScalarKind::F16, ScalarKind::BF16, ScalarKind::F32, ScalarKind::F64});
  if (kind == "xchg")
    return isInt32Or64 || isF32OrF64(element);
  return isInt32Or64; // add, max, min, umax, umin, and, or, xor
}

/// Pointer, value, mask and result tensors share one shape and, once assigned, one layout.
void verifySameShapeAndLayout(const Operation &op) {
  const Type &result = op.result()->type();
  for (Value *operand : op.operands()) {
    const Type &type = operand->type();
    if (type.isTensor() != result.isTensor() || type.shape() != result.shape())
      emitError(op, "operand " + type.str() + " does not have the result's shape " + result.str());
    const EncodingPtr &a = type.encoding(), &b = result.encoding();
    if ((a == nullptr) != (b == nullptr) || (a && a != b && !a->equals(*b)))
      emitError(op, "operands and result must share one layout, got " + type.str() + " and " +
                        result.str());
  }
}

} // namespace

void verifyMathOp(const Operation &op) {
  switch (op.code()) {
  case OpCode::Fma:
    expectSameTypes(op, 3);
    break;
  case OpCode::FastDivF:
  case OpCode::MulHiUI:
    expectSameTypes(op, 2);
    break;
  default:
    expectSameTypes(op, 1);
    break;
  }
  const Type &type = op.result()->type();
  switch (op.code()) {
  case OpCode::AbsF:
    if (!isKind(type, {ScalarKind::F16, ScalarKind::BF16, ScalarKind::F32, ScalarKind::F64}))
      emitError(op, "takes f16, bf16, f32 or f64, got " + type.str());
    break;
  case OpCode::AbsI:
    if (!isKind(type, {ScalarKind::I8, ScalarKind::I16, ScalarKind::I32, ScalarKind::I64}))
      emitError(op, "takes i8, i16, i32 or i64, got " + type.str());
    break;
  case OpCode::MulHiUI:
    if (!isKind(type, {ScalarKind::I32, ScalarKind::I64}))
      emitError(op, "takes i32 or i64, got " + type.str());
    break;
  default:
    if (!isF32OrF64(type))
      emitError(op, "takes f32 or f64 (compute f16/bf16 in f32), got " + type.str());
    break;
  }
}

void verifyExternElementwise(const Operation &op) {
  if (op.numResults() != 1)
    emitError(op, "gives one result");
  if (stringAttrOrFail(op, "symbol").empty())
    emitError(op, "needs a non-empty symbol (the function called)");
  if (op.hasAttr("pure") && !std::holds_alternative<bool>(op.attr("pure")))
    emitError(op, "attribute 'pure' must be a bool");
  for (const char *name : {"lib_name", "lib_path"})
    if (op.hasAttr(name) && !std::holds_alternative<std::string>(op.attr(name)))
      emitError(op, std::string("attribute '") + name + "' must be a string");
  verifySameShapeAndLayout(op); // elementwise: one shape (and layout) for every value
  for (const Value *value : op.operands())
    if (!value->type().elementType().isScalar())
      emitError(op, "takes integer or float elements, got " + value->type().str());
  if (!op.result()->type().elementType().isScalar())
    emitError(op, "gives integer or float elements, got " + op.result()->type().str());
}

void verifyAtomicOp(const Operation &op) {
  bool isCas = op.code() == OpCode::AtomicCAS;
  if (op.numResults() != 1)
    emitError(op, "gives one result (the old values)");
  if (isCas ? op.numOperands() != 3 : op.numOperands() < 2 || op.numOperands() > 3)
    emitError(op, isCas ? "takes (ptr, cmp, val)" : "takes (ptr, val[, mask])");
  expectOneOf(op, "sem", {"relaxed", "acquire", "release", "acq_rel"});
  expectOneOf(op, "scope", {"cta", "gpu", "sys"});
  verifySameShapeAndLayout(op);
  Type pointer = op.operand(0)->type().elementType();
  Type element = op.result()->type().elementType();
  if (!pointer.isPointer() || pointer.pointee() != element)
    emitError(op, "the result must have the pointee type of operand 0, got " +
                      op.operand(0)->type().str() + " and " + op.result()->type().str());
  if (pointer.addressSpace() != 1)
    emitError(op, "atomics act on global memory (address space 1)");
  for (unsigned i = 1; i < (isCas ? 3u : 2u); ++i)
    if (op.operand(i)->type().elementType() != element)
      emitError(op, "operand " + std::to_string(i) + " must have the pointee type " +
                        element.str() + ", got " + op.operand(i)->type().str());
  if (!isCas && op.numOperands() == 3 && op.operand(2)->type().elementType() != Type::i1())
    emitError(op, "mask must be i1");
  if (isCas) {
    if (!isKind(element, {ScalarKind::I16, ScalarKind::I32, ScalarKind::I64, ScalarKind::F16,
                          ScalarKind::BF16, ScalarKind::F32, ScalarKind::F64}))
      emitError(op, "takes 16, 32 or 64-bit elements, got " + element.str());
    return;
  }
  expectOneOf(op, "kind",
              {"add", "fadd", "max", "min", "umax", "umin", "and", "or", "xor", "xchg"});
  const std::string &kind = op.stringAttr("kind");
  if (!kindAcceptsElement(kind, element))
    emitError(op, "kind '" + kind + "' does not take " + element.str());
}

} // namespace tessera::ir::detail
