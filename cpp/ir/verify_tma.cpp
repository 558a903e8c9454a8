// Verifier rules of the TMA and mbarrier ops (see ops.def for their operand conventions).
// The mbarrier ring is a 1-D #shared buffer of i64 (one 8-byte mbarrier per slot); a TMA
// ring slot must be 2-D (the pipeliner copies 2-D descriptor tiles; the box's other dims are
// 1) and there must be a barrier per slot of the ring (spares stay unused).
#include "ir/verify_tma.h"

#include "ir/diagnostics.h"
#include "ir/verify_matrix.h"

namespace tessera::ir {

namespace {

constexpr unsigned kMaxTensorMapRank = 5; // cuTensorMapEncodeTiled, tensormap.replace

void expectCounts(const Operation &op, unsigned minOperands, unsigned maxOperands,
                  unsigned results) {
  if (op.numOperands() < minOperands || op.numOperands() > maxOperands ||
      op.numResults() != results)
    emitError(op, std::string(op.name()) + " expects " + std::to_string(minOperands) +
                      (minOperands == maxOperands ? "" : ".." + std::to_string(maxOperands)) +
                      " operands and " + std::to_string(results) + " results, got " +
                      std::to_string(op.numOperands()) + " and " + std::to_string(op.numResults()));
}

bool isBarrierRing(const Value *value) {
  const Type &type = value->type();
  return isSharedBuffer(type) && type.rank() == 1 && type.elementType() == Type::i64();
}

void expectBarriers(const Operation &op, unsigned index) {
  if (!isBarrierRing(op.operand(index)))
    emitError(op, std::string(op.name()) + ": operand " + std::to_string(index) +
                      " must be an mbarrier ring (a 1-D #shared buffer of i64), got " +
                      op.operand(index)->type().str());
}

void expectScalar(const Operation &op, unsigned index, const Type &type, const char *what) {
  if (op.operand(index)->type() != type)
    emitError(op, std::string(op.name()) + ": " + what + " must be " + type.str() + ", got " +
                      op.operand(index)->type().str());
}

bool isTensorMap(const Value *value) {
  const Type &type = value->type();
  return !type.isTensor() && type.isPointer() && type.pointee() == Type::scalar(ScalarKind::I8);
}

/// The producer region of a warp-specialized kernel: at the top level of the func (the role
/// split happens once, at kernel entry), one block without arguments ending in `yield`, a
/// warpgroup of producer warps and register counts setmaxnreg takes (24..256, multiples of 8).
void verifyWarpSpecialize(const Operation &op) {
  expectCounts(op, 0, 0, 0);
  const Operation *parent = op.parentOp();
  if (!parent || parent->code() != OpCode::Func)
    emitError(op, "warp_specialize must be at the top level of the func");
  const Block *body = op.numRegions() == 1 ? &op.regions()[0]->front() : nullptr;
  const Operation *end = body ? body->terminator() : nullptr;
  if (!body || body->numArguments() != 0 || !end || end->code() != OpCode::Yield ||
      end->numOperands() != 0)
    emitError(op, "warp_specialize has one region, without arguments, ending in an empty yield");
  auto intOr0 = [&](const char *name) { return op.hasAttr(name) ? op.intAttr(name) : 0; };
  if (intOr0("producer_warps") != 4)
    emitError(op, "warp_specialize needs producer_warps = 4 (one warpgroup: setmaxnreg is "
                  "per warpgroup)");
  for (const char *name : {"producer_registers", "consumer_registers"}) {
    int64_t registers = intOr0(name);
    if (registers < 24 || registers > 256 || registers % 8 != 0)
      emitError(op, std::string("warp_specialize needs ") + name +
                        " in 24..256, a multiple of 8 (setmaxnreg), got " +
                        std::to_string(registers));
  }
}

} // namespace

unsigned plainLoadOperands(const Operation &op) {
  return op.hasAttr("tma") ? 3u : op.numOperands();
}

void verifyTmaLoadOperands(const Operation &op) {
  const Type &result = op.result()->type();
  unsigned rank = result.isTensor() ? static_cast<unsigned>(result.rank()) : 0;
  // One coordinate per dim of the descriptor: its tile's, after the leading dims of block
  // size 1 the front end left out of the tile (a [1, BLOCK, D] block loads a 2-D tile).
  if (rank == 0 || op.numOperands() < 4 + rank || op.numOperands() > 4 + kMaxTensorMapRank)
    emitError(op, "a load with `tma` takes (ptr, mask, other, tensormap) and one coordinate "
                  "per dim of its descriptor (at least its tile's rank, at most 5), got " +
                      std::to_string(op.numOperands()) + " operands");
  if (!isTensorMap(op.operand(3)))
    emitError(op,
              "a load's tensor map must be a ptr<i8> argument, got " + op.operand(3)->type().str());
  for (unsigned i = 4; i < op.numOperands(); ++i)
    expectScalar(op, i, Type::i32(), "a box coordinate");
}

void verifyTmaStoreOperands(const Operation &op) {
  const Type &value = op.operand(1)->type();
  unsigned rank = value.isTensor() ? static_cast<unsigned>(value.rank()) : 0;
  if (rank == 0 || op.numOperands() < 4 + rank || op.numOperands() > 4 + kMaxTensorMapRank)
    emitError(op, std::string("a ") + op.name() +
                      " with `tma` takes (ptr, value, mask, tensormap) and one coordinate "
                      "per dim of its descriptor (at least its tile's rank, at most 5), got " +
                      std::to_string(op.numOperands()) + " operands");
  if (!isTensorMap(op.operand(3)))
    emitError(op, std::string("a ") + op.name() + "'s tensor map must be a ptr<i8> argument, got " +
                      op.operand(3)->type().str());
  for (unsigned i = 4; i < op.numOperands(); ++i)
    expectScalar(op, i, Type::i32(), "a box coordinate");
}

void verifyTmaOp(const Operation &op) {
  switch (op.code()) {
  case OpCode::MBarrierInit:
    expectCounts(op, 1, 1, 0);
    expectBarriers(op, 0);
    if (!op.hasAttr("count") || op.intAttr("count") < 1)
      emitError(op, "mbarrier_init needs count >= 1 (arrivals per phase)");
    break;
  case OpCode::MBarrierExpectTx:
    expectCounts(op, 3, 3, 0);
    expectBarriers(op, 0);
    expectScalar(op, 1, Type::i32(), "the slot");
    expectScalar(op, 2, Type::i1(), "the predicate");
    if (!op.hasAttr("bytes") || op.intAttr("bytes") <= 0 || op.intAttr("bytes") >= (1 << 20))
      emitError(op, "mbarrier_expect_tx needs 0 < bytes < 2^20 (the tx-count's range)");
    break;
  case OpCode::TmaLoad: {
    if (op.numOperands() < 6 || op.numResults() != 0)
      emitError(op, "tma_load takes (tensormap, ring, slot, barriers, pred, coords...)");
    if (!isTensorMap(op.operand(0)))
      emitError(op, "tma_load's tensor map must be a ptr<i8>, got " + op.operand(0)->type().str());
    const Type &ring = op.operand(1)->type();
    if (!isSharedBuffer(ring) || ring.rank() != 3)
      emitError(op, "tma_load writes a slot of a #shared ring of 2-D tiles, got " + ring.str());
    expectScalar(op, 2, Type::i32(), "the slot");
    expectBarriers(op, 3);
    expectScalar(op, 4, Type::i1(), "the predicate");
    if (op.numOperands() < 5 + 2 || op.numOperands() > 5 + kMaxTensorMapRank)
      emitError(op, "tma_load takes one coordinate per dim of its tensor map: the slot's 2, "
                    "after the map's leading dims (box 1), at most 5");
    for (unsigned i = 5; i < op.numOperands(); ++i)
      expectScalar(op, i, Type::i32(), "a box coordinate");
    if (op.operand(3)->type().shape()[0] < ring.shape()[0])
      emitError(op, "tma_load: an mbarrier per ring slot, got " +
                        std::to_string(op.operand(3)->type().shape()[0]) + " for " +
                        std::to_string(ring.shape()[0]) + " slots");
    break;
  }
  case OpCode::MBarrierWait:
    expectCounts(op, 3, 4, 0);
    expectBarriers(op, 0);
    expectScalar(op, 1, Type::i32(), "the slot");
    expectScalar(op, 2, Type::i32(), "the phase");
    if (op.numOperands() == 4)
      expectScalar(op, 3, Type::i1(), "the predicate");
    break;
  case OpCode::MBarrierArrive:
    expectCounts(op, 3, 3, 0);
    expectBarriers(op, 0);
    expectScalar(op, 1, Type::i32(), "the slot");
    expectScalar(op, 2, Type::i1(), "the predicate");
    if (op.hasAttr("wgmma_pending") && op.intAttr("wgmma_pending") < 0)
      emitError(op, "mbarrier_arrive needs wgmma_pending >= 0");
    break;
  case OpCode::WarpSpecialize: verifyWarpSpecialize(op); break;
  case OpCode::MBarrierInval:
    expectCounts(op, 1, 1, 0);
    expectBarriers(op, 0);
    break;
  default: break;
  }
}

} // namespace tessera::ir
