// Helpers shared by the verifier rules of the math ops (verify_math.cpp) and the atomics
// (verify_atomic.cpp).
#pragma once

#include "ir/diagnostics.h"
#include "ir/ir.h"

#include <string>

namespace tessera::ir::detail {

inline bool isKind(const Type &type, std::initializer_list<ScalarKind> kinds) {
  Type element = type.elementType();
  if (!element.isScalar())
    return false;
  for (ScalarKind kind : kinds)
    if (element.scalarKind() == kind)
      return true;
  return false;
}

inline bool isF32OrF64(const Type &type) {
  return isKind(type, {ScalarKind::F32, ScalarKind::F64});
}

inline const std::string &stringAttrOrFail(const Operation &op, const char *name) {
  if (!op.hasAttr(name) || !std::holds_alternative<std::string>(op.attr(name)))
    emitError(op, std::string("needs a string attribute '") + name + "'");
  return op.stringAttr(name);
}

/// Pointer, value, mask and result tensors share one shape and, once assigned, one layout
/// (the first `count` operands: a descriptor reduction's tensor map and box coordinates
/// follow them; operand `anyLayout`, if any, only the shape: a TMA reduction's value).
inline void verifySameShapeAndLayout(const Operation &op, size_t count = ~size_t(0),
                                     size_t anyLayout = ~size_t(0)) {
  const Type &result = op.result()->type();
  for (size_t i = 0; i < op.numOperands() && i < count; ++i) {
    const Type &type = op.operand(static_cast<unsigned>(i))->type();
    if (type.isTensor() != result.isTensor() || type.shape() != result.shape())
      emitError(op, "operand " + type.str() + " does not have the result's shape " + result.str());
    if (i == anyLayout)
      continue;
    const EncodingPtr &a = type.encoding(), &b = result.encoding();
    if ((a == nullptr) != (b == nullptr) || (a && a != b && !a->equals(*b)))
      emitError(op, "operands and result must share one layout, got " + type.str() + " and " +
                        result.str());
  }
}

} // namespace tessera::ir::detail
