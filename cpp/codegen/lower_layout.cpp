// Lowering of the ops that move elements between layouts or shapes: splat, broadcast,
// expand_dims, reshape and convert_layout, all through the linear layouts.
//
// Each op is described by P = "destination hardware index -> source coordinates": the
// destination's layout with its coordinates mapped back to the source tensor (broadcast
// zeroes the grown dims, expand_dims drops the new one, reshape re-splits the row-major
// index; all GF(2)-linear on power-of-two shapes). Then, cheapest first:
//   P == source layout         -> the same registers (no instructions);
//   same lane/warp bases       -> a register permutation or copy (no instructions);
//   otherwise                  -> shared memory: barrier, every thread stores its elements
//                                 at their offsets in a swizzled tile (chooseConversionTile),
//                                 barrier, loads at P's offsets.
#include "codegen/lower_to_llvm.h"

#include "ir/diagnostics.h"
#include "layout/conversion.h"
#include "layout/shared_memory.h"

#include <functional>
#include <map>
#include <optional>

namespace tessera::codegen {

namespace {

using Coordinates = std::vector<int32_t>;

/// `layout` (hardware -> destination coordinates) with every basis vector sent through the
/// linear map `toSource`; the result's outputs are the source dims dim0, dim1, ...
LinearLayout mapToSource(const LinearLayout &layout, int destinationRank,
                         const std::vector<int64_t> &sourceShape,
                         const std::function<Coordinates(const Coordinates &)> &toSource) {
  LinearLayout::Bases bases;
  for (const auto &[inDim, vectors] : layout.getBases()) {
    std::vector<LinearLayout::BasisVector> mapped;
    for (const LinearLayout::BasisVector &vector : vectors) {
      Coordinates coordinates(destinationRank);
      for (int d = 0; d < destinationRank; ++d)
        coordinates[d] = vector[layout.getOutDimIndex(tensorDimName(d))];
      mapped.push_back(toSource(coordinates));
    }
    bases.emplace_back(inDim, std::move(mapped));
  }
  LinearLayout::DimSizes outDims;
  for (size_t d = 0; d < sourceShape.size(); ++d)
    outDims.emplace_back(tensorDimName(static_cast<int>(d)), static_cast<int32_t>(sourceShape[d]));
  return LinearLayout(std::move(bases), std::move(outDims), /*requireSurjective=*/false);
}

/// Row-major linear index bits of `coordinates` in `shape`, split again over `newShape`.
Coordinates reshapeCoordinates(const Coordinates &coordinates, const std::vector<int64_t> &shape,
                               const std::vector<int64_t> &newShape) {
  int64_t linear = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    linear = linear * shape[d] + coordinates[d];
  Coordinates result(newShape.size());
  for (size_t d = newShape.size(); d-- > 0;) {
    result[d] = static_cast<int32_t>(linear % newShape[d]);
    linear /= newShape[d];
  }
  return result;
}

Coordinates valuesOf(const LinearLayout::DimValues &values) {
  Coordinates result;
  for (const auto &entry : values)
    result.push_back(entry.second);
  return result;
}

/// dst register -> src register when both layouts give every lane and warp the same
/// elements up to a register renaming: then L_src(r', l, w) = P(r, l, w) for all l, w needs
/// equal lane and warp bases, and r' is any source register with L_src(r', 0, 0) = P(r, 0, 0).
std::optional<std::vector<int>> registerMap(const LinearLayout &source,
                                            const LinearLayout &destination) {
  for (const char *dim : {kLaneDim, kWarpDim, kBlockDim}) {
    int sizeLog2 = source.hasInDim(dim) ? source.getInDimSizeLog2(dim) : 0;
    if (sizeLog2 != (destination.hasInDim(dim) ? destination.getInDimSizeLog2(dim) : 0))
      return std::nullopt;
    for (int bit = 0; bit < sizeLog2; ++bit)
      if (source.apply({{dim, 1 << bit}}) != destination.apply({{dim, 1 << bit}}))
        return std::nullopt;
  }
  std::map<Coordinates, int> sourceRegister;
  for (int reg = source.getInDimSize(kRegisterDim); reg-- > 0;)
    sourceRegister[valuesOf(source.apply({{kRegisterDim, reg}}))] = reg; // smallest wins
  std::vector<int> map;
  for (int reg = 0; reg < destination.getInDimSize(kRegisterDim); ++reg) {
    auto it = sourceRegister.find(valuesOf(destination.apply({{kRegisterDim, reg}})));
    if (it == sourceRegister.end())
      return std::nullopt;
    map.push_back(it->second);
  }
  return map;
}

/// Emits one pass of shared accesses: for each group of registers with consecutive offsets
/// in `offsets` (hardware -> "offset"), calls access(firstRegister, width, address).
void forEachSharedAccess(KernelLowering &lowering, const LinearLayout &offsets,
                         llvm::Value *base, int elementBytes, int32_t skipRegisters,
                         const std::function<void(int, int, llvm::Value *)> &access) {
  llvm::IRBuilder<> &b = lowering.builder();
  int width = std::min(offsets.getNumConsecutiveInOut(kRegisterDim, kOffsetDim), 16 / elementBytes);
  while (skipRegisters & (width - 1))
    width /= 2;
  std::vector<std::vector<llvm::Value *>> indices = lowering.emitIndices(offsets);
  for (int first = 0; first < static_cast<int>(indices.size()); first += width) {
    if (first & skipRegisters)
      continue;
    llvm::Value *byteOffset = b.CreateMul(indices[first][0], lowering.i32(elementBytes));
    access(first, width, b.CreateGEP(b.getInt8Ty(), base, byteOffset));
  }
}

Registers throughSharedMemory(KernelLowering &lowering, const ir::Operation &op,
                              const Registers &source, const LinearLayout &sourceLayout,
                              const LinearLayout &destination, const ir::Type &elementType) {
  llvm::Type *memoryType = lowering.memoryType(elementType, op);
  llvm::Type *registerType = lowering.registerType(elementType, op);
  int elementBytes = lowering.memoryBytes(elementType, op);
  // The swizzle that keeps both the stores and the loads free of bank conflicts (or nearly).
  SharedTileLayout tile = chooseConversionTile(sourceLayout, destination, elementBytes);
  llvm::Value *base = lowering.sharedScratch(tile.allocationSize() * elementBytes);
  // The scratch region is shared by every conversion of the kernel: wait until earlier
  // readers are done before overwriting it.
  lowering.emitBarrier();
  forEachSharedAccess(lowering, sharedOffsetLayout(sourceLayout, tile), base, elementBytes,
                      KernelLowering::duplicateRegisterMask(sourceLayout),
                      [&](int first, int width, llvm::Value *address) {
                        emitVectorStore(lowering, address,
                                        llvm::ArrayRef<llvm::Value *>(source).slice(first, width),
                                        memoryType);
                      });
  lowering.emitBarrier();
  Registers result(destination.getInDimSize(kRegisterDim));
  forEachSharedAccess(lowering, sharedOffsetLayout(destination, tile), base, elementBytes, 0,
                      [&](int first, int width, llvm::Value *address) {
                        std::vector<llvm::Value *> loaded =
                            emitVectorLoad(lowering, address, memoryType, registerType, width);
                        std::copy(loaded.begin(), loaded.end(), result.begin() + first);
                      });
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
  if (std::optional<std::vector<int>> map = registerMap(sourceLayout, toSource)) {
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
  std::vector<int64_t> sourceShape = sourceType.shape(), shape = resultType.shape();
  int rank = resultType.rank();
  std::function<Coordinates(const Coordinates &)> toSource;
  switch (op.code()) {
  case ir::OpCode::ConvertLayout:
    toSource = [](const Coordinates &c) { return c; };
    break;
  case ir::OpCode::Broadcast:
    toSource = [&](const Coordinates &c) {
      Coordinates result = c;
      for (int d = 0; d < rank; ++d)
        if (sourceShape[d] == 1)
          result[d] = 0;
      return result;
    };
    break;
  case ir::OpCode::ExpandDims: {
    int axis = static_cast<int>(op.intAttr("axis"));
    toSource = [axis](const Coordinates &c) {
      Coordinates result = c;
      result.erase(result.begin() + axis);
      return result;
    };
    break;
  }
  case ir::OpCode::Reshape:
    toSource = [&](const Coordinates &c) { return reshapeCoordinates(c, shape, sourceShape); };
    break;
  default:
    ir::emitError(op, std::string("codegen: no layout lowering for op '") + op.name() + "'");
  }
  LinearLayout mapped;
  try {
    mapped = mapToSource(layout, rank, sourceShape, toSource);
  } catch (const std::exception &error) {
    ir::emitError(op, std::string("codegen: cannot map the result layout to the operand: ") +
                          error.what());
  }
  lowering.setRegisters(op.result(), relayout(lowering, op, mapped));
}

} // namespace tessera::codegen
