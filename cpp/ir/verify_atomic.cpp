// Verifier rules of the atomics (see ops.def): the kind/sem/scope attributes, the element
// types each kind takes, and one shape and layout for pointer, value, mask and result.
// verifier.cpp finds verifyAtomicOp through its rule table.
//
//   %old = atomic_rmw %p, %v, %m {kind = "fadd", scope = "gpu", sem = "acq_rel"}
//        : (tensor<128xptr<f32>>, tensor<128xf32>, tensor<128xi1>) -> tensor<128xf32>
#include "ir/verifier.h"

#include "ir/diagnostics.h"
#include "ir/verify_common.h"
#include "ir/verify_tma.h"

#include <set>

namespace tessera::ir::detail {

namespace {

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
  if (kind == "fmax" || kind == "fmin") // descriptor reductions of 16-bit floats
    return isKind(element, {ScalarKind::F16, ScalarKind::BF16});
  return isInt32Or64; // add, max, min, umax, umin, and, or, xor
}

} // namespace

void verifyAtomicOp(const Operation &op) {
  bool isCas = op.code() == OpCode::AtomicCAS;
  if (op.numResults() != 1)
    emitError(op, "gives one result (the old values)");
  // A descriptor reduction (TESSERA_TMA_REDUCE) also carries its tensor map and box
  // coordinates: (ptr, val, mask, tensormap, coords...), attribute `tma`.
  bool tma = !isCas && op.hasAttr("tma");
  if (tma)
    verifyTmaStoreOperands(op);
  else if (isCas ? op.numOperands() != 3 : op.numOperands() < 2 || op.numOperands() > 3)
    emitError(op, isCas ? "takes (ptr, cmp, val)" : "takes (ptr, val[, mask])");
  expectOneOf(op, "sem", {"relaxed", "acquire", "release", "acq_rel"});
  expectOneOf(op, "scope", {"cta", "gpu", "sys"});
  // A TMA reduction stages its value in shared memory itself, from any layout (as a TMA
  // store's: the pipeline pass may hand it the #mma accumulator).
  verifySameShapeAndLayout(op, tma ? 3 : op.numOperands(), tma ? 1 : ~size_t(0));
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
  if (!isCas && op.numOperands() >= 3 && op.operand(2)->type().elementType() != Type::i1())
    emitError(op, "mask must be i1");
  if (isCas) {
    if (!isKind(element, {ScalarKind::I16, ScalarKind::I32, ScalarKind::I64, ScalarKind::F16,
                          ScalarKind::BF16, ScalarKind::F32, ScalarKind::F64}))
      emitError(op, "takes 16, 32 or 64-bit elements, got " + element.str());
    return;
  }
  expectOneOf(
      op, "kind",
      {"add", "fadd", "max", "min", "umax", "umin", "fmax", "fmin", "and", "or", "xor", "xchg"});
  const std::string &kind = op.stringAttr("kind");
  if (!kindAcceptsElement(kind, element))
    emitError(op, "kind '" + kind + "' does not take " + element.str());
}

} // namespace tessera::ir::detail
