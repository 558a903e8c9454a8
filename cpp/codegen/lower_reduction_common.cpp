// What the reduce and scan lowerings share (see lower_reduction.h): the combiner region inlined
// on registers, warp shuffles of any element type up to 64 bits, the analysis of which
// hardware bits carry an axis, and small helpers for their shared-memory steps.
#include "codegen/lower_reduction.h"

#include "ir/diagnostics.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tessera::codegen {

Elements emitCombine(KernelLowering &lowering, const ir::Operation &op, const Elements &acc,
                     const Elements &cur) {
  const ir::Block &body = op.regions()[0]->front();
  unsigned n = static_cast<unsigned>(acc.size());
  for (unsigned i = 0; i < n; ++i) {
    lowering.setRegisters(body.argument(i), {acc[i]});
    lowering.setRegisters(body.argument(n + i), {cur[i]});
  }
  Elements result;
  for (const Registers *yielded : lowering.lowerInlineRegion(body))
    result.push_back(yielded->front());
  return result;
}

namespace {

/// One shuffle of a value of any scalar type: as an i32, or as two for 64-bit values.
llvm::Value *emitShuffle(KernelLowering &lowering, llvm::Value *value, llvm::Intrinsic::ID id,
                         llvm::Value *laneArgument) {
  llvm::IRBuilder<> &b = lowering.builder();
  auto shuffle32 = [&](llvm::Value *word) {
    return lowering.callIntrinsic(id, {}, {lowering.i32(-1), word, laneArgument, lowering.i32(31)});
  };
  llvm::Type *type = value->getType();
  unsigned bits = type->getPrimitiveSizeInBits();
  if (bits == 0 || bits > 64)
    throw ir::CompileError("codegen: cannot shuffle a value of this type");
  llvm::Type *intType = b.getIntNTy(bits);
  llvm::Value *asInt = type->isIntegerTy() ? value : b.CreateBitCast(value, intType);
  llvm::Value *moved;
  if (bits <= 32) {
    llvm::Value *word = bits == 32 ? asInt : b.CreateZExt(asInt, b.getInt32Ty());
    moved = shuffle32(word);
    if (bits < 32)
      moved = b.CreateTrunc(moved, intType);
  } else {
    llvm::Value *low = shuffle32(b.CreateTrunc(asInt, b.getInt32Ty()));
    llvm::Value *high = shuffle32(b.CreateTrunc(b.CreateLShr(asInt, 32), b.getInt32Ty()));
    moved = b.CreateOr(b.CreateZExt(low, intType), b.CreateShl(b.CreateZExt(high, intType), 32));
  }
  return type->isIntegerTy() ? moved : b.CreateBitCast(moved, type);
}

} // namespace

llvm::Value *emitShuffleXor(KernelLowering &lowering, llvm::Value *value, int laneMask) {
  return emitShuffle(lowering, value, llvm::Intrinsic::nvvm_shfl_sync_bfly_i32,
                     lowering.i32(laneMask));
}

llvm::Value *emitShuffleIndex(KernelLowering &lowering, llvm::Value *value,
                              llvm::Value *sourceLane) {
  return emitShuffle(lowering, value, llvm::Intrinsic::nvvm_shfl_sync_idx_i32, sourceLane);
}

AxisBits analyzeAxisBits(const LinearLayout &layout, int axis, const ir::Operation &op) {
  AxisBits bits;
  std::string axisName = tensorDimName(axis);
  bits.outDim = layout.getOutDimIndex(axisName);
  bits.sizeLog2 = layout.getOutDimSizeLog2(axisName);
  std::vector<bool> seen(bits.sizeLog2, false);
  bits.providers.resize(bits.sizeLog2);
  for (const auto &[inDim, vectors] : layout.getBases()) {
    AxisBits::Kind kind = AxisBits::Kind::Register;
    int32_t *mask = nullptr, *broadcast = nullptr;
    if (inDim == kRegisterDim)
      kind = AxisBits::Kind::Register, mask = &bits.registerMask;
    else if (inDim == kLaneDim)
      kind = AxisBits::Kind::Lane, mask = &bits.laneMask, broadcast = &bits.laneBroadcastMask;
    else if (inDim == kWarpDim)
      kind = AxisBits::Kind::Warp, mask = &bits.warpMask, broadcast = &bits.warpBroadcastMask;
    else if (vectors.empty())
      continue;
    else
      ir::emitError(op, "codegen: " + std::string(op.name()) + " over the layout input '" + inDim +
                            "' is not supported");
    for (int i = 0; i < static_cast<int>(vectors.size()); ++i) {
      const LinearLayout::BasisVector &vector = vectors[i];
      bool others = false, zero = true;
      for (int d = 0; d < static_cast<int>(vector.size()); ++d) {
        zero &= vector[d] == 0;
        others |= d != bits.outDim && vector[d] != 0;
      }
      if (zero && broadcast)
        *broadcast |= 1 << i;
      int32_t along = vector[bits.outDim];
      if (along == 0)
        continue;
      int coordinateBit = __builtin_ctz(static_cast<uint32_t>(along));
      if (others || (along & (along - 1)) != 0 || seen[coordinateBit])
        ir::emitError(op, "codegen: " + std::string(op.name()) + " along axis " +
                              std::to_string(axis) + " of this layout is not supported (a " +
                              inDim + " bit does not move along the axis alone): " + layout.str());
      seen[coordinateBit] = true;
      bits.providers[coordinateBit] = {kind, i};
      *mask |= 1 << i;
    }
  }
  for (bool found : seen)
    if (!found)
      ir::emitError(op, "codegen: the layout does not cover axis " + std::to_string(axis) + ": " +
                            layout.str());
  return bits;
}

std::vector<int32_t> registerCoordinates(const LinearLayout &layout, int reg) {
  LinearLayout::DimValues values =
      layout.hasInDim(kRegisterDim) ? layout.apply({{kRegisterDim, reg}}) : layout.apply({});
  std::vector<int32_t> coordinates;
  for (int d = 0; d < layout.getNumOutDims(); ++d)
    coordinates.push_back(values[layout.getOutDimIndex(tensorDimName(d))].second);
  return coordinates;
}

llvm::Value *emitLinearIndex(KernelLowering &lowering, const LinearLayout &layout,
                             const std::vector<llvm::Value *> &coordinates,
                             const std::vector<int64_t> &shape, int skip) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Value *linear = lowering.i32(0);
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d == skip)
      continue;
    llvm::Value *coordinate = coordinates[layout.getOutDimIndex(tensorDimName(d))];
    linear = b.CreateAdd(b.CreateMul(linear, lowering.i32(shape[d])), coordinate);
  }
  return linear;
}

void emitIf(KernelLowering &lowering, llvm::Value *predicate, const std::function<void()> &body) {
  if (!predicate) {
    body();
    return;
  }
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::BasicBlock *current = b.GetInsertBlock();
  llvm::Function *function = current->getParent();
  auto *then =
      llvm::BasicBlock::Create(b.getContext(), "owner.then", function, current->getNextNode());
  auto *end = llvm::BasicBlock::Create(b.getContext(), "owner.end", function, then->getNextNode());
  b.CreateCondBr(predicate, then, end);
  b.SetInsertPoint(then);
  body();
  b.CreateBr(end);
  b.SetInsertPoint(end);
}

} // namespace tessera::codegen
