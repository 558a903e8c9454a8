// Verifier rules of `reduce` and `scan` (see ops.def): operand and result types, the combiner
// region's arguments and yield, and their layouts once assigned. verifier.cpp calls these two
// functions from its per-op switch and its layout check.
//
//   %r = reduce %x {axis = 1} : (tensor<4x8xf32>) -> tensor<4xf32> {
//   ^bb(%a: f32, %b: f32):
//     %s = addf %a, %b : (f32, f32) -> f32
//     yield %s : (f32) -> ()
//   }
#include "ir/verifier.h"

#include "ir/diagnostics.h"
#include "layout/slice.h"

namespace tessera::ir::detail {

namespace {

bool isNumber(const Type &type) { return type.isScalar(); }

/// The combiner takes (acc..., cur...) scalars of the element types, computes on scalars
/// only (no tensors, no nested regions: it is inlined per element pair) and yields one scalar
/// per operand.
void verifyCombiner(const Operation &op, const std::vector<Type> &elements) {
  if (op.numRegions() != 1)
    emitError(op, std::string(op.name()) + " needs one combiner region");
  const Block &body = op.regions()[0]->front();
  size_t n = elements.size();
  if (body.numArguments() != 2 * n)
    emitError(op, "combiner must take " + std::to_string(2 * n) +
                      " arguments (the accumulated values, then the current ones)");
  for (size_t i = 0; i < 2 * n; ++i)
    if (body.argument(static_cast<unsigned>(i))->type() != elements[i % n])
      emitError(op, "combiner argument " + std::to_string(i) + " must be " + elements[i % n].str() +
                        ", got " + body.argument(static_cast<unsigned>(i))->type().str());
  Operation *yield = body.terminator();
  if (!yield || yield->code() != OpCode::Yield)
    emitError(op, "combiner region must end with 'yield'");
  if (yield->numOperands() != n)
    emitError(op, "combiner must yield " + std::to_string(n) + " values");
  for (size_t i = 0; i < n; ++i)
    if (yield->operand(static_cast<unsigned>(i))->type() != elements[i])
      emitError(op, "combiner yields " + yield->operand(static_cast<unsigned>(i))->type().str() +
                        " for operand " + std::to_string(i) + " of element type " +
                        elements[i].str());
  for (const auto &inner : body.operations()) {
    if (inner->numRegions())
      emitError(*inner, "a combiner region cannot hold control flow");
    if (!inner->hasTrait(trait::PURE))
      emitError(*inner, "a combiner region holds pure ops only");
    for (const Value *v : inner->operands())
      if (v->type().isTensor())
        emitError(*inner, "a combiner region computes on scalars, got " + v->type().str());
    for (const auto &r : inner->results())
      if (r->type().isTensor())
        emitError(*inner, "a combiner region computes on scalars, got " + r->type().str());
  }
}

} // namespace

void verifyReductionOp(const Operation &op) {
  if (op.numOperands() == 0)
    emitError(op, std::string(op.name()) + " needs at least one operand");
  if (op.numResults() != op.numOperands())
    emitError(op, "expected one result per operand");
  if (!op.hasAttr("axis") || !std::holds_alternative<int64_t>(op.attr("axis")))
    emitError(op, "axis must be an integer attribute");
  const Type &first = op.operand(0)->type();
  int64_t axis = op.intAttr("axis");
  if (!first.isTensor() || axis < 0 || axis >= first.rank())
    emitError(op, "axis " + std::to_string(axis) + " is not a dim of " + first.str());
  if (op.code() == OpCode::Scan && op.hasAttr("reverse") &&
      !std::holds_alternative<bool>(op.attr("reverse")))
    emitError(op, "reverse must be a bool attribute");
  std::vector<Type> elements;
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    const Type &type = op.operand(i)->type();
    if (!type.isTensor() || type.shape() != first.shape())
      emitError(op,
                "operands must be tensors of one shape, got " + first.str() + " and " + type.str());
    if (!isNumber(type.elementType()))
      emitError(op, "operands must hold numbers, got " + type.str());
    elements.push_back(type.elementType());
    const Type &result = op.result(i)->type();
    if (op.code() == OpCode::Scan) {
      if (result.withEncoding(nullptr) != type.withEncoding(nullptr))
        emitError(op, "scan result " + std::to_string(i) + " must have its operand's type");
      continue;
    }
    std::vector<int64_t> shape = type.shape();
    shape.erase(shape.begin() + axis);
    bool fits = shape.empty() ? result == type.elementType()
                              : result.isTensor() && result.shape() == shape &&
                                    result.elementType() == type.elementType();
    if (!fits)
      emitError(op, "reduce result " + std::to_string(i) + " must be " + type.str() +
                        " without dim " + std::to_string(axis) + ", got " + result.str());
  }
  verifyCombiner(op, elements);
}

void verifyReductionEncodings(const Operation &op) {
  const EncodingPtr &layout = op.operand(0)->type().encoding();
  auto same = [](const EncodingPtr &a, const EncodingPtr &b) {
    return a == b || (a && b && a->equals(*b));
  };
  for (const Value *v : op.operands())
    if (!same(v->type().encoding(), layout))
      emitError(op, "operands must share one layout, got " + op.operand(0)->type().str() + " and " +
                        v->type().str());
  for (const auto &r : op.results()) {
    if (!r->type().isTensor())
      continue;
    const EncodingPtr &encoding = r->type().encoding();
    if (op.code() == OpCode::Scan) {
      if (!same(encoding, layout))
        emitError(op, "scan results keep the operands' layout, got " + r->type().str());
      continue;
    }
    if (!layout && !encoding)
      continue;
    const auto *slice = dynamic_cast<const SliceEncoding *>(encoding.get());
    if (!layout || !slice || slice->getDim() != op.intAttr("axis") ||
        !slice->getParent()->equals(*layout))
      emitError(op, "reduce result layout must be the operands' sliced along axis, got " +
                        r->type().str());
  }
}

} // namespace tessera::ir::detail
