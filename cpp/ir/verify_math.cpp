// Verifier rules of the math ops (see ops.def): element types, one type across operands and
// result; extern_elementwise's symbol and one shape for every value. verifier.cpp finds them
// through its rule table (the atomics: verify_atomic.cpp).
//
//   %y = exp %x : (tensor<128xf32>) -> tensor<128xf32>
//   %n = extern_elementwise %x {pure = true, symbol = "__nv_ilogbf"}
//        : (tensor<128xf32>) -> tensor<128xi32>
#include "ir/verifier.h"

#include "ir/diagnostics.h"
#include "ir/verify_common.h"

namespace tessera::ir::detail {

namespace {

void expectSameTypes(const Operation &op, unsigned numOperands) {
  if (op.numOperands() != numOperands || op.numResults() != 1)
    emitError(op, "takes " + std::to_string(numOperands) + " operands and gives one result");
  for (Value *operand : op.operands())
    if (operand->type() != op.result()->type())
      emitError(op, "operands and result must have one type, got " + operand->type().str() +
                        " and " + op.result()->type().str());
}

} // namespace

void verifyMathOp(const Operation &op) {
  switch (op.code()) {
  case OpCode::Fma: expectSameTypes(op, 3); break;
  case OpCode::FastDivF:
  case OpCode::MulHiUI: expectSameTypes(op, 2); break;
  default: expectSameTypes(op, 1); break;
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

} // namespace tessera::ir::detail
