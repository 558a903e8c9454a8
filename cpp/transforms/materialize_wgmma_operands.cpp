// materialize_wgmma_operands: wgmma reads both operands from shared memory, so every
// conversion into a wgmma #dot_op layout that the pipeliner did not already turn into a ring
// read (an operand computed in registers, a loop-invariant one, a dot outside a loop) becomes
// a store of the source into a tile in wgmma's swizzle and a local_load of it before each
// user. Codegen keeps such a local_load as a descriptor (lower_matrix_wgmma.cpp); allocate_shared
// keeps the tile live until the dots that read it, membar orders its stores before them.
// Runs after the pipeliner, before allocate_shared. The exception: an A operand its
// producer already holds in the operand's registers (P = softmax(Q K^T) cast to 16 bits, in
// the accumulator's layout of the previous wgmma) stays in registers, where wgmma reads it.
// 8-bit (e4m3/e5m2) tiles are stored K-major whatever their registers' order: wgmma has no
// transpose for them.
//
// A 16-bit operand that is a transposed tile (`trans`, after any layout conversion: dS K in
// the attention backward, dS held as dSᵀ in the dK product's accumulator) is not transposed
// in registers: its source is stored as it is, in the order of its own fastest dim, and read
// transposed (`local_load {order = [1, 0]}`, an MN-major wgmma operand). The conversion to a
// blocked layout and the transpose through shared memory (a store, a barrier, loads, a
// barrier, the operand's stores) become the operand's stores alone.
//
//   %a = convert_layout %x : (tensor<128x64xf16, #B>) -> tensor<128x64xf16, #dot_op<{opIdx = 0,
//   parent = #mma<{version = 3, ...}>, ...}>> %d = dot %a, %b, %c ...
// becomes
//   %buf = local_alloc %x : (tensor<128x64xf16, #B>) -> tensor<128x64xf16, #shared<{vec = 8,
//   perPhase = 1, maxPhase = 8, order = [1, 0]}>> %a = local_load %buf : (...) ->
//   tensor<128x64xf16, #dot_op<...>> %d = dot %a, %b, %c ...
#include "transforms/layout_passes.h"

#include "analysis/shared_footprint.h"
#include "ir/diagnostics.h"
#include "ir/pass_manager.h"
#include "layout/conversion.h"
#include "layout/dot_operand.h"
#include "layout/swizzled_shared.h"
#include "transforms/passes.h"

namespace tessera::transforms {

using namespace ir;

namespace {

LinearLayout tensorLayoutOf(const Type &type) {
  return type.encoding()->toLinearLayout(type.shape());
}

} // namespace

bool wgmmaOperandStaysInRegisters(const Operation &convert) {
  const auto &operand =
      static_cast<const DotOperandEncoding &>(*convert.result()->type().encoding());
  const Type &source = convert.operand(0)->type();
  // 8-bit A stays in shared memory: wgmma's register fragment for it is not the accumulator's
  // layout (accelerate_matmul keeps chained fp8 dots on f16).
  if (operand.getOpIdx() != 0 || !source.encoding() || source.bitWidth() == 8)
    return false;
  ConversionPlan plan = planConversion(source.encoding()->toLinearLayout(source.shape()),
                                       tensorLayoutOf(convert.result()->type()));
  return plan.kind <= ConversionKind::RegisterPermutation;
}

namespace {

/// What `source` (a wgmma operand tile) transposes, when it is a 16-bit `trans` of a 2-D
/// tile held in registers: the trans's input, or the input of the layout conversion that
/// feeds it. Null otherwise.
Value *untransposed(Value *source) {
  const Operation *trans = source->definingOp();
  const Type &type = source->type();
  if (!trans || trans->code() != OpCode::Trans || type.rank() != 2 || type.bitWidth() != 16)
    return nullptr;
  Value *input = trans->operand(0);
  const Operation *convert = input->definingOp();
  if (convert && convert->code() == OpCode::ConvertLayout &&
      convert->operand(0)->type().encoding() &&
      !dynamic_cast<const SharedEncoding *>(convert->operand(0)->type().encoding().get()) &&
      !dynamic_cast<const DotOperandEncoding *>(convert->operand(0)->type().encoding().get()))
    input = convert->operand(0);
  if (!input->type().encoding() ||
      dynamic_cast<const SharedEncoding *>(input->type().encoding().get()))
    return nullptr;
  return input;
}

/// Stores `tile` (2-D, in registers) into a `shared` tile and reads it transposed as
/// `convert`'s result before each of its users.
void stageTransposed(Operation *convert, Value *tile, const EncodingPtr &shared) {
  const Type &type = tile->type();
  Builder builder;
  builder.setInsertionPoint(convert);
  builder.setLocation(convert->location());
  Value *buffer = builder.create(OpCode::LocalAlloc, {tile}, {type.withEncoding(shared)})->result();
  for (const OperandUse &use : usesOf(convert->result())) {
    Builder at;
    at.setInsertionPoint(use.user);
    at.setLocation(convert->location());
    Value *read = at.create(OpCode::LocalLoad, {buffer}, {convert->result()->type()},
                            {{"order", std::vector<int64_t>{1, 0}}})
                      ->result();
    use.user->setOperand(use.index, read);
  }
  convert->erase();
}

void materialize(Operation *convert) {
  Value *source = convert->operand(0);
  if (Value *tile = untransposed(source)) { // its own fastest dim: the stores' vectors
    const Type &tileType = tile->type();
    int fastest = analysis::fastestDim(tileType.encoding()->toLinearLayout(tileType.shape()));
    if (EncodingPtr shared = wgmmaSharedEncoding(tileType.shape(), {fastest, 1 - fastest}, 2))
      return stageTransposed(convert, tile, shared);
  }
  const Type &type = source->type();
  if (type.rank() != 2 || !type.encoding())
    emitError(*convert, "materialize_wgmma_operands: a wgmma operand must be a 2-D tile with a "
                        "layout, got " +
                            type.str());
  int fastest = analysis::fastestDim(type.encoding()->toLinearLayout(type.shape()));
  if (type.bitWidth() == 8) { // wgmma reads 8-bit operands K-major only: the store transposes
    const auto &operand =
        static_cast<const DotOperandEncoding &>(*convert->result()->type().encoding());
    fastest = operand.getOpIdx() == 0 ? 1 : 0;
  }
  EncodingPtr shared =
      wgmmaSharedEncoding(type.shape(), {fastest, 1 - fastest}, type.bitWidth() / 8);
  if (!shared)
    emitError(*convert, "materialize_wgmma_operands: rows of " + type.str() +
                            " are narrower than wgmma's 32-byte swizzle");
  stageThroughSharedMemory(convert, shared);
}

void materializeWgmmaOperands(Module &module) {
  for (Operation *func : module.functions()) {
    std::vector<Operation *> converts;
    func->walk([&](Operation *op) {
      if (op->code() == OpCode::ConvertLayout &&
          isWgmmaOperand(op->result()->type().encoding().get()) &&
          !wgmmaOperandStaysInRegisters(*op))
        converts.push_back(op);
    });
    for (Operation *convert : converts)
      materialize(convert);
  }
}

} // namespace

TESSERA_REGISTER_PASS(materialize_wgmma_operands, "materialize_wgmma_operands",
                      "Stage every remaining conversion into a wgmma dot operand in shared "
                      "memory (local_alloc in wgmma's swizzle, local_load before each dot)",
                      materializeWgmmaOperands);

} // namespace tessera::transforms
