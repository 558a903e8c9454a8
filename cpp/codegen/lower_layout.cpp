// Lowering of the ops that move elements between layouts or shapes: splat, broadcast,
// expand_dims, reshape and convert_layout, all through the linear layouts.
//
// Each op is described by P = "destination hardware index -> source coordinates": the
// destination's layout with its coordinates mapped back to the source tensor (broadcast
// zeroes the grown dims, expand_dims drops the new one, reshape re-splits the row-major
// index; all GF(2)-linear on power-of-two shapes). Then, cheapest first:
//   P == source layout         -> the same registers (no instructions);
//   same lane/warp bases       -> a register permutation or copy (no instructions);
//   otherwise                  -> shared memory: every thread stores its elements at their
//                                 offsets in a swizzled tile (chooseConversionTile) at the
//                                 op's scratch_offset (st.shared, or stmatrix on sm_90 where
//                                 it moves more: layout/ldmatrix.h), barrier, loads at P's
//                                 offsets.
// P and the choice live in analysis/shared_footprint.h, which the allocator sizes scratch with;
// membar orders the scratch against earlier users (no barrier before the stores here).
#include "codegen/lower_matrix.h"
#include "codegen/lower_to_llvm.h"

#include "analysis/shared_footprint.h"
#include "ir/diagnostics.h"
#include "layout/conversion.h"
#include "layout/shared_tile_layout.h"

#include <map>
#include <optional>

namespace tessera::codegen {

namespace {

Registers throughSharedMemory(KernelLowering &lowering, const ir::Operation &op,
                              const Registers &source, const LinearLayout &sourceLayout,
                              const LinearLayout &destination, const ir::Type &elementType) {
  llvm::Type *memoryType = lowering.memoryType(elementType, op);
  llvm::Type *registerType = lowering.registerType(elementType, op);
  int elementBytes = lowering.memoryBytes(elementType, op);
  // The swizzle that keeps both the stores and the loads free of bank conflicts (or nearly).
  SharedTileLayout tile = chooseConversionTile(sourceLayout, destination, elementBytes);
  llvm::Value *base = lowering.sharedScratch(op, tile.allocationSize() * elementBytes);
  // Vectorized st.shared, or stmatrix where it moves more per instruction (sm_90).
  storeToSharedTile(lowering, op, source, sourceLayout, tile, base, elementType);
  lowering.emitBarrier(); // internal to the op: every store lands before any thread loads
  // Loads of the registers at consecutive offsets, at most 16 bytes each.
  LinearLayout offsets = sharedOffsetLayout(destination, tile);
  int width = std::min(offsets.getNumConsecutiveInOut(kRegisterDim, kOffsetDim), 16 / elementBytes);
  std::vector<std::vector<llvm::Value *>> indices = lowering.emitIndices(offsets);
  llvm::IRBuilder<> &b = lowering.builder();
  Registers result(indices.size());
  for (int first = 0; first < static_cast<int>(indices.size()); first += width) {
    llvm::Value *address = b.CreateGEP(b.getInt8Ty(), base,
                                       b.CreateMul(indices[first][0], lowering.i32(elementBytes)));
    std::vector<llvm::Value *> loaded =
        emitVectorLoad(lowering, address, memoryType, registerType, width);
    std::copy(loaded.begin(), loaded.end(), result.begin() + first);
  }
  return result;
}

/// Registers of the result, given the source registers and P (see the file comment).
Registers relayout(KernelLowering &lowering, const ir::Operation &op,
                   const LinearLayout &toSource) {
  const ir::Type &sourceType = op.operand(0)->type();
  const Registers &source = lowering.registersOf(op.operand(0));
  const LinearLayout &sourceLayout = lowering.layoutOf(sourceType, op);
  if (sourceLayout == toSource)
    return source;
  if (std::optional<std::vector<int>> map = analysis::registerPermutation(sourceLayout, toSource)) {
    Registers result;
    for (int reg : *map)
      result.push_back(source[reg]);
    return result;
  }
  return throughSharedMemory(lowering, op, source, sourceLayout, toSource,
                             sourceType.elementType());
}

} // namespace

void lowerLayoutOp(KernelLowering &lowering, const ir::Operation &op) {
  const ir::Type &resultType = op.result()->type();
  if (op.code() == ir::OpCode::Splat) {
    llvm::Value *scalar = lowering.registersOf(op.operand(0))[0];
    lowering.setRegisters(op.result(), Registers(lowering.numRegisters(resultType, op), scalar));
    return;
  }
  const ir::Type &sourceType = op.operand(0)->type();
  if (!sourceType.isTensor() || !resultType.isTensor())
    ir::emitError(op, "codegen: expected tensor operand and result");
  const LinearLayout &layout = lowering.layoutOf(resultType, op);
  LinearLayout mapped;
  try {
    mapped = analysis::resultLayoutInOperand(op, layout);
  } catch (const std::exception &error) {
    ir::emitError(op, std::string("codegen: cannot map the result layout to the operand: ") +
                          error.what());
  }
  lowering.setRegisters(op.result(), relayout(lowering, op, mapped));
}

} // namespace tessera::codegen
