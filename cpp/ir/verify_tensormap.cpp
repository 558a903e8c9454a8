// Verifier rules of global_scratch and tensormap_create (see ops.def). A map's fields are
// checked against what the TMA accepts (PTX ISA, tensormap.replace; cuTensorMapEncodeTiled's
// limits): rank 1 to 5, box dims 1 to 256, a known element type whose size is the base's
// element size, swizzle none/32/64/128 bytes, fill zero or NaN.
#include "ir/verify_tensormap.h"

#include "ir/diagnostics.h"

namespace tessera::ir {

namespace {

bool isBytePointer(const Value *value) {
  const Type &type = value->type();
  return type.isPointer() && type.pointee() == Type::scalar(ScalarKind::I8);
}

const Operation *enclosingFunc(const Operation &op) {
  const Operation *parent = op.parentOp();
  while (parent != nullptr && parent->code() != OpCode::Func)
    parent = parent->parentOp();
  return parent;
}

void verifyGlobalScratch(const Operation &op) {
  if (op.numOperands() != 0 || op.numResults() != 1 || !isBytePointer(op.result()))
    emitError(op, "global_scratch takes no operands and gives a ptr<i8>");
  if (!op.hasAttr("offset") || op.intAttr("offset") < 0 || op.intAttr("offset") % 128 != 0)
    emitError(op, "global_scratch needs an offset that is a non-negative multiple of 128 "
                  "(a tensor map's alignment)");
  const Operation *func = enclosingFunc(op);
  if (func == nullptr)
    return;
  int64_t perProgram = func->hasAttr("global_scratch") ? func->intAttr("global_scratch") : 0;
  if (op.intAttr("offset") + 128 > perProgram)
    emitError(op, "global_scratch at offset " + std::to_string(op.intAttr("offset")) +
                      " lies past the func's global_scratch (" + std::to_string(perProgram) +
                      " bytes per program)");
}

void expectInRange(const Operation &op, const std::string &name, int64_t low, int64_t high) {
  if (!op.hasAttr(name) || op.intAttr(name) < low || op.intAttr(name) > high)
    emitError(op, "tensormap_create needs " + name + " in " + std::to_string(low) + ".." +
                      std::to_string(high));
}

void verifyTensorMapCreate(const Operation &op) {
  if (!op.hasAttr("box_dim"))
    emitError(op, "tensormap_create needs box_dim (the box, innermost dim first)");
  const std::vector<int64_t> &box = op.arrayAttr("box_dim");
  unsigned rank = static_cast<unsigned>(box.size());
  if (rank < 1 || rank > 5)
    emitError(op, "tensormap_create: a tensor map has 1 to 5 dims, got " + std::to_string(rank));
  if (op.numOperands() != 2 * rank + 1 || op.numResults() != 1 || !isBytePointer(op.result()))
    emitError(op, "tensormap_create takes (scratch, base, " + std::to_string(rank) +
                      " shape dims, " + std::to_string(rank - 1) +
                      " strides) and gives the map (ptr<i8>), got " +
                      std::to_string(op.numOperands()) + " operands");
  if (!isBytePointer(op.operand(0)))
    emitError(op, "tensormap_create writes the map at a ptr<i8> (global_scratch), got " +
                      op.operand(0)->type().str());
  const Type &base = op.operand(1)->type();
  if (!base.isPointer() || base.pointee().isPointer())
    emitError(op, "tensormap_create's base must be a pointer to the elements, got " + base.str());
  for (unsigned i = 0; i < rank; ++i)
    if (op.operand(2 + i)->type() != Type::i32())
      emitError(op, "tensormap_create: shape dims are i32, got " + op.operand(2 + i)->type().str());
  for (unsigned i = 0; i + 1 < rank; ++i)
    if (op.operand(2 + rank + i)->type() != Type::i64())
      emitError(op, "tensormap_create: strides are i64 (elements), got " +
                        op.operand(2 + rank + i)->type().str());
  for (int64_t size : box)
    if (size < 1 || size > 256)
      emitError(op, "tensormap_create: box dims are 1 to 256, got " + std::to_string(size));
  expectInRange(op, "elem_type", 0, 12);
  expectInRange(op, "swizzle_mode", 0, 3);
  expectInRange(op, "fill_mode", 0, 1);
  int bytes = tensorMapElementBytes(op.intAttr("elem_type"));
  if (bytes * 8 != base.pointee().bitWidth())
    emitError(op, "tensormap_create: elem_type " + std::to_string(op.intAttr("elem_type")) +
                      " has " + std::to_string(bytes) + "-byte elements, the base points to " +
                      base.pointee().str());
  if (box[0] * bytes % 16 != 0)
    emitError(op, "tensormap_create: the box's inner extent must be a multiple of 16 bytes");
}

} // namespace

int tensorMapElementBytes(int64_t code) {
  // .u8 .u16 .u32 .s32 .u64 .s64 .f16 .f32 .f32.ftz .f64 .bf16 .tf32 .tf32.ftz
  static const int bytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 4, 8, 2, 4, 4};
  return code >= 0 && code < 13 ? bytes[code] : 0;
}

void verifyTensorMapOp(const Operation &op) {
  if (op.code() == OpCode::GlobalScratch)
    verifyGlobalScratch(op);
  else if (op.code() == OpCode::TensorMapCreate)
    verifyTensorMapCreate(op);
}

} // namespace tessera::ir
