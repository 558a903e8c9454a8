// Verifier rules of the tensor-core and shared-memory ops (see ops.def for their operand
// conventions). Shapes follow Triton's tl.dot: 2-D; with layouts (the GPU lowering) every
// extent a power of two >= 16. Layout-free tile IR built for the interpreter may hold smaller
// dots, as Triton's interpreter allows (its min_dot_size is 1); the GPU front end rejects them.
#include "ir/verify_matrix.h"

#include "ir/diagnostics.h"
#include "layout/dot_operand.h"
#include "layout/mma.h"
#include "layout/swizzled_shared.h"

#include <algorithm>
#include <set>

namespace tessera::ir {

namespace {

void expectCounts(const Operation &op, unsigned minOperands, unsigned maxOperands,
                  unsigned results) {
  if (op.numOperands() < minOperands || op.numOperands() > maxOperands)
    emitError(op, std::string(op.name()) + " expects " + std::to_string(minOperands) +
                      (minOperands == maxOperands ? "" : ".." + std::to_string(maxOperands)) +
                      " operands, got " + std::to_string(op.numOperands()));
  if (op.numResults() != results)
    emitError(op, std::string(op.name()) + " expects " + std::to_string(results) + " results");
}

bool isI32Scalar(const Value *value) { return value->type() == Type::i32(); }

const DotOperandEncoding *dotOperandOf(const Value *value) {
  return dynamic_cast<const DotOperandEncoding *>(value->type().encoding().get());
}

// Before accelerate_matmul a dot may hold any layouts; after it the result is #mma (or the
// Blocked layout of an FMA dot) and the operands #dot_op layouts of it.
void verifyDotEncodings(const Operation &op) {
  const EncodingPtr &result = op.result()->type().encoding();
  if (!result)
    return;
  bool isMma = dynamic_cast<const MmaEncoding *>(result.get()) != nullptr;
  for (unsigned i = 0; i < 2; ++i) {
    const DotOperandEncoding *operand = dotOperandOf(op.operand(i));
    if (!operand && !isMma)
      continue;
    if (!operand || operand->getOpIdx() != static_cast<int>(i) ||
        !operand->getParent()->equals(*result))
      emitError(op, "dot operand " + std::to_string(i) + " must have a #dot_op<{opIdx = " +
                        std::to_string(i) + "}> layout whose parent is the result's, got " +
                        op.operand(i)->type().str());
  }
  if (isMma && op.operand(2)->type() != op.result()->type())
    emitError(op, "dot accumulator and result must have one type");
}

void verifyDot(const Operation &op) {
  expectCounts(op, 3, 3, 1);
  const Type &a = op.operand(0)->type(), &b = op.operand(1)->type(), &acc = op.operand(2)->type(),
             &result = op.result()->type();
  if (a.rank() != 2 || b.rank() != 2 || acc.rank() != 2 || result.rank() != 2)
    emitError(op, "dot takes 2-D tensors");
  int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  if (b.shape()[0] != k || acc.shape() != std::vector<int64_t>{m, n} ||
      result.shape() != acc.shape())
    emitError(op, "dot shapes must be [M, K] x [K, N] + [M, N], got " + a.str() + ", " + b.str() +
                      ", " + acc.str());
  bool lowered = result.encoding() != nullptr;
  for (int64_t extent : {m, n, k})
    if (extent < 1 || (lowered && (extent < 16 || (extent & (extent - 1)))))
      emitError(op,
                "dot needs M, N and K to be powers of two >= 16, got " + a.str() + " x " + b.str());
  ScalarKind in = a.scalarKind(), out = result.scalarKind();
  bool inputsOk = in == ScalarKind::F16 || in == ScalarKind::BF16 || in == ScalarKind::F32 ||
                  in == ScalarKind::F64 || in == ScalarKind::I8;
  // The front end widens fp8 to f16; on wgmma accelerate_matmul multiplies e4m3/e5m2 tiles
  // (any mix) natively, into f32.
  auto wgmmaFp8 = [](ScalarKind kind) {
    return kind == ScalarKind::F8E4M3 || kind == ScalarKind::F8E5M2;
  };
  bool fp8 = wgmmaFp8(in) && wgmmaFp8(b.scalarKind());
  if (!fp8 && (!inputsOk || b.scalarKind() != in))
    emitError(op, "dot inputs must both be f16, bf16, f32, f64 or i8 (or e4m3/e5m2 on wgmma), "
                  "got " +
                      a.str() + " and " + b.str());
  if (fp8 && (out != ScalarKind::F32 || !lowered))
    emitError(op,
              "an e4m3/e5m2 dot is a wgmma dot into f32 (accelerate_matmul), got " + result.str());
  if (op.hasAttr("max_num_imprecise_acc")) {
    const auto *count = std::get_if<int64_t>(&op.attr("max_num_imprecise_acc"));
    if (!count || *count < 0 || *count > k)
      emitError(op, "max_num_imprecise_acc must be an integer in [0, K]");
  }
  // f64 and i8 (int32 sums) run on the FMA units.
  bool outputOk = fp8                     ? out == ScalarKind::F32
                  : in == ScalarKind::F64 ? out == ScalarKind::F64
                  : in == ScalarKind::I8
                      ? out == ScalarKind::I32
                      : out == ScalarKind::F32 || (out == ScalarKind::F16 && in == ScalarKind::F16);
  if (!outputOk || acc.scalarKind() != out)
    emitError(op, "dot accumulates in f32 (f16 for f16 inputs, f64 for f64, i32 for i8), got " +
                      result.str());
  if (op.hasAttr("input_precision")) {
    const auto *precision = std::get_if<std::string>(&op.attr("input_precision"));
    if (!precision || (*precision != "tf32" && *precision != "tf32x3" && *precision != "ieee"))
      emitError(op, "input_precision must be \"tf32\", \"tf32x3\" or \"ieee\"");
  }
  verifyDotEncodings(op);
}

void verifyTrans(const Operation &op) {
  expectCounts(op, 1, 1, 1);
  const Type &source = op.operand(0)->type(), &result = op.result()->type();
  if (!source.isTensor() || !op.hasAttr("order"))
    emitError(op, "trans takes a tensor and an order attribute");
  std::vector<int64_t> order = op.arrayAttr("order"), sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int64_t>(i) || sorted.size() != source.shape().size())
      emitError(op, "trans order must be a permutation of the operand's dims");
  std::vector<int64_t> shape;
  for (int64_t dim : order)
    shape.push_back(source.shape()[dim]);
  if (result.shape() != shape || result.elementType() != source.elementType())
    emitError(op, "trans result must be the operand with its dims permuted, got " + result.str());
}

void verifySharedOp(const Operation &op) {
  switch (op.code()) {
  case OpCode::LocalAlloc: {
    expectCounts(op, 0, 1, 1);
    const Type &buffer = op.result()->type();
    if (!isSharedBuffer(buffer))
      emitError(op, "local_alloc must give a tensor with a #shared layout, got " + buffer.str());
    if (op.numOperands() == 1) {
      const Type &source = op.operand(0)->type();
      if (isSharedBuffer(source) || source.shape() != buffer.shape() ||
          source.elementType() != buffer.elementType())
        emitError(op, "local_alloc stores a register tensor of the buffer's shape and type");
    }
    break;
  }
  case OpCode::LocalLoad: {
    expectCounts(op, 1, 2, 1);
    const Type &buffer = op.operand(0)->type(), &result = op.result()->type();
    std::vector<int64_t> shape = buffer.shape();
    if (op.numOperands() == 2) {
      if (!isI32Scalar(op.operand(1)) || shape.empty())
        emitError(op, "local_load's slot must be an i32 scalar indexing the leading dim");
      shape.erase(shape.begin());
    }
    if (op.hasAttr("order")) { // a transposed view of a 2-D tile (the dot reads Kᵀ)
      if (shape.size() != 2 || op.arrayAttr("order") != std::vector<int64_t>{1, 0})
        emitError(op, "local_load's order must be [1, 0], reading a 2-D tile transposed");
      std::swap(shape[0], shape[1]);
    }
    if (!isSharedBuffer(buffer) || isSharedBuffer(result) || result.shape() != shape ||
        result.elementType() != buffer.elementType())
      emitError(op, "local_load reads a #shared buffer (or one slot of it) into registers, got " +
                        buffer.str() + " -> " + result.str());
    break;
  }
  case OpCode::AsyncCopy: {
    expectCounts(op, 3, 4, 0);
    const Type &pointers = op.operand(0)->type(), &buffer = op.operand(1)->type();
    std::vector<int64_t> slotShape = buffer.shape();
    if (!slotShape.empty())
      slotShape.erase(slotShape.begin());
    if (!pointers.isTensor() || !pointers.elementType().isPointer() || !isSharedBuffer(buffer) ||
        pointers.shape() != slotShape || pointers.elementType().pointee() != buffer.elementType() ||
        !isI32Scalar(op.operand(2)))
      emitError(op, "async_copy takes pointers, a #shared ring with one slot of their shape, "
                    "and an i32 slot");
    if (op.numOperands() == 4 && (op.operand(3)->type().shape() != pointers.shape() ||
                                  op.operand(3)->type().elementType() != Type::i1()))
      emitError(op, "async_copy's mask must be i1 of the pointers' shape");
    break;
  }
  case OpCode::AsyncWait:
  case OpCode::WgmmaWait:
    expectCounts(op, 0, 0, 0);
    if (!op.hasAttr("pending") || op.intAttr("pending") < 0)
      emitError(op, std::string(op.name()) + " needs pending >= 0");
    break;
  case OpCode::WarpgroupTurn: {
    expectCounts(op, 0, 0, 0);
    static const std::set<std::string> turns = {"open", "wait", "pass", "close"};
    if (!op.hasAttr("turn") || !turns.count(op.stringAttr("turn")))
      emitError(op, "warpgroup_turn needs turn = \"open\", \"wait\", \"pass\" or \"close\"");
    break;
  }
  default: // async_commit_group, barrier
    expectCounts(op, 0, 0, 0);
    break;
  }
}

} // namespace

bool isSharedBuffer(const Type &type) {
  return type.isTensor() && dynamic_cast<const SharedEncoding *>(type.encoding().get()) != nullptr;
}

bool isTensorCoreOp(OpCode code) {
  switch (code) {
  case OpCode::Dot:
  case OpCode::Trans:
  case OpCode::LocalAlloc:
  case OpCode::LocalLoad:
  case OpCode::AsyncCopy:
  case OpCode::AsyncCommitGroup:
  case OpCode::AsyncWait:
  case OpCode::Barrier:
  case OpCode::WgmmaWait:
  case OpCode::WarpgroupTurn: return true;
  default: return false;
  }
}

void verifyTensorCoreOp(const Operation &op) {
  if (op.code() == OpCode::Dot)
    verifyDot(op);
  else if (op.code() == OpCode::Trans)
    verifyTrans(op);
  else if (isTensorCoreOp(op.code()))
    verifySharedOp(op);
}

} // namespace tessera::ir
