// Shared-memory sizes per op and the layout decisions behind them (see shared_footprint.h).
// The lowerings in cpp/codegen call these same functions, so the bytes the allocator reserves
// are the bytes the generated code touches.
#include "analysis/shared_footprint.h"

#include "layout/conversion.h"
#include "layout/dot_operand.h"
#include "layout/swizzled_shared.h"

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>

namespace tessera::analysis {

using ir::OpCode;

namespace {

using Coordinates = std::vector<int32_t>;

/// `layout` (hardware -> result coordinates) with every basis vector sent through the linear
/// map `toOperand`; the outputs are the operand dims dim0, dim1, ...
LinearLayout mapToOperand(const LinearLayout &layout, int resultRank,
                          const std::vector<int64_t> &operandShape,
                          const std::function<Coordinates(const Coordinates &)> &toOperand) {
  LinearLayout::Bases bases;
  for (const auto &[inDim, vectors] : layout.getBases()) {
    std::vector<LinearLayout::BasisVector> mapped;
    for (const LinearLayout::BasisVector &vector : vectors) {
      Coordinates coordinates(resultRank);
      for (int d = 0; d < resultRank; ++d)
        coordinates[d] = vector[layout.getOutDimIndex(tensorDimName(d))];
      mapped.push_back(toOperand(coordinates));
    }
    bases.emplace_back(inDim, std::move(mapped));
  }
  LinearLayout::DimSizes outDims;
  for (size_t d = 0; d < operandShape.size(); ++d)
    outDims.emplace_back(tensorDimName(static_cast<int>(d)), static_cast<int32_t>(operandShape[d]));
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

/// The warp basis vectors of `layout` that move along tensor dim `axis`: the coordinate bit
/// (log2 of the step) of each.
std::vector<int> warpBitsAlong(const LinearLayout &layout, int axis) {
  std::vector<int> bits;
  if (!layout.hasInDim(kWarpDim))
    return bits;
  int outDim = layout.getOutDimIndex(tensorDimName(axis));
  for (const auto &[inDim, vectors] : layout.getBases())
    if (inDim == kWarpDim)
      for (const LinearLayout::BasisVector &vector : vectors)
        if (vector[outDim] != 0)
          bits.push_back(__builtin_ctz(static_cast<uint32_t>(vector[outDim])));
  return bits;
}

/// reduce: partials of every warp slot (warp bits along the axis) for every output element.
int64_t reduceScratchBytes(const ir::Operation &op) {
  const ir::Type &type = op.operand(0)->type();
  int axis = static_cast<int>(op.intAttr("axis"));
  size_t warpBits = warpBitsAlong(tensorLayout(type), axis).size();
  if (warpBits == 0)
    return 0; // lanes and registers only: shuffles
  int64_t numOutputs = type.numElements() / type.shape()[axis];
  int64_t totalBytes = 0;
  scratchSections(op, (int64_t(1) << warpBits) * numOutputs, totalBytes);
  return totalBytes;
}

/// scan: the steps across warps use one slot per block of 2^(j+1) elements plus a spare; the
/// first such step (the lowest coordinate bit a warp carries) needs the most.
int64_t scanScratchBytes(const ir::Operation &op) {
  const ir::Type &type = op.operand(0)->type();
  std::vector<int> bits = warpBitsAlong(tensorLayout(type), static_cast<int>(op.intAttr("axis")));
  if (bits.empty())
    return 0;
  int lowest = *std::min_element(bits.begin(), bits.end());
  int64_t totalBytes = 0;
  scratchSections(op, (type.numElements() >> (lowest + 1)) + 1, totalBytes);
  return totalBytes;
}

/// splat .. convert_layout through a swizzled conversion tile (lower_layout.cpp).
int64_t layoutScratchBytes(const ir::Operation &op) {
  if (op.code() == OpCode::Splat)
    return 0;
  if (op.code() == OpCode::ConvertLayout && convertsThroughOperandTile(op))
    return operandConversionTile(op).allocationSize() * memoryElementBytes(op.result()->type());
  const ir::Type &operandType = op.operand(0)->type();
  LinearLayout source = tensorLayout(operandType);
  LinearLayout mapped = resultLayoutInOperand(op, tensorLayout(op.result()->type()));
  if (source == mapped || registerPermutation(source, mapped))
    return 0;
  int elementBytes = static_cast<int>(memoryElementBytes(operandType));
  return chooseConversionTile(source, mapped, elementBytes).allocationSize() * elementBytes;
}

int64_t atomicScratchBytes(const ir::Operation &op) {
  if (!atomicPublishesResult(op))
    return 0;
  const ir::Type &type = op.result()->type();
  return (type.isTensor() ? type.numElements() : 1) * memoryElementBytes(type);
}

} // namespace

int64_t memoryElementBytes(const ir::Type &type) {
  ir::Type element = type.elementType();
  if (element.isPointer())
    return 8;
  return std::max(1, element.bitWidth() / 8);
}

LinearLayout tensorLayout(const ir::Type &type) {
  if (!type.isTensor() || !type.encoding())
    throw std::invalid_argument("tensor type " + type.str() + " has no layout encoding");
  return type.encoding()->toLinearLayout(type.shape());
}

LinearLayout resultLayoutInOperand(const ir::Operation &op, const LinearLayout &resultLayout) {
  std::vector<int64_t> operandShape = op.operand(0)->type().shape();
  std::vector<int64_t> shape = op.result()->type().shape();
  int rank = op.result()->type().rank();
  std::function<Coordinates(const Coordinates &)> toOperand;
  switch (op.code()) {
  case OpCode::ConvertLayout: toOperand = [](const Coordinates &c) { return c; }; break;
  case OpCode::Broadcast:
    toOperand = [&](const Coordinates &c) {
      Coordinates result = c;
      for (int d = 0; d < rank; ++d)
        if (operandShape[d] == 1)
          result[d] = 0;
      return result;
    };
    break;
  case OpCode::ExpandDims: {
    int axis = static_cast<int>(op.intAttr("axis"));
    toOperand = [axis](const Coordinates &c) {
      Coordinates result = c;
      result.erase(result.begin() + axis);
      return result;
    };
    break;
  }
  case OpCode::Reshape:
    toOperand = [&](const Coordinates &c) { return reshapeCoordinates(c, shape, operandShape); };
    break;
  default: throw std::invalid_argument(std::string("no layout mapping for op '") + op.name() + "'");
  }
  return mapToOperand(resultLayout, rank, operandShape, toOperand);
}

std::optional<std::vector<int>> registerPermutation(const LinearLayout &source,
                                                    const LinearLayout &destination) {
  // L_src(r', l, w) = P(r, l, w) for all l, w needs equal lane and warp bases, and r' is any
  // source register with L_src(r', 0, 0) = P(r, 0, 0).
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

int fastestDim(const LinearLayout &layout) {
  for (const char *dim : {kRegisterDim, kLaneDim}) {
    int numBits = layout.hasInDim(dim) ? layout.getInDimSizeLog2(dim) : 0;
    for (int bit = 0; bit < numBits; ++bit)
      for (int axis = 0; axis < layout.getNumOutDims(); ++axis)
        if (layout.getBasis(dim, bit, tensorDimName(axis)) == 1)
          return axis;
  }
  return layout.getNumOutDims() - 1;
}

bool convertsThroughOperandTile(const ir::Operation &op) {
  const auto *operand =
      dynamic_cast<const DotOperandEncoding *>(op.result()->type().encoding().get());
  if (!operand || !operand->getMmaParent() || op.operand(0)->type().rank() != 2)
    return false;
  return planConversion(tensorLayout(op.operand(0)->type()), tensorLayout(op.result()->type()))
             .kind > ConversionKind::RegisterPermutation;
}

SharedTileLayout operandConversionTile(const ir::Operation &op) {
  const ir::Type &type = op.result()->type();
  int fastest = fastestDim(tensorLayout(op.operand(0)->type()));
  return dotOperandSharedEncoding(type.shape(), {fastest, 1 - fastest},
                                  static_cast<int>(memoryElementBytes(type)))
      ->tileFor(type.shape());
}

SharedTileLayout sharedSlotTile(const ir::Type &bufferType, bool hasRingDim) {
  const auto &encoding = static_cast<const SharedEncoding &>(*bufferType.encoding());
  std::vector<int64_t> shape = bufferType.shape();
  if (!hasRingDim)
    return encoding.tileFor(shape);
  shape.erase(shape.begin());
  std::vector<int> order;
  for (int dim : encoding.getOrder())
    if (dim != 0)
      order.push_back(dim - 1);
  return SharedEncoding(encoding.getVec(), encoding.getPerPhase(), encoding.getMaxPhase(), order,
                        encoding.getBlockCols())
      .tileFor(shape);
}

bool isRingAlloc(const ir::Operation &localAlloc) {
  return localAlloc.numOperands() == 0 && localAlloc.result()->type().rank() >= 2;
}

int64_t localAllocBytes(const ir::Operation &localAlloc) {
  const ir::Type &type = localAlloc.result()->type();
  bool ring = isRingAlloc(localAlloc);
  return (ring ? type.shape()[0] : 1) * sharedSlotTile(type, ring).allocationSize() *
         memoryElementBytes(type);
}

std::vector<int64_t> scratchSections(const ir::Operation &op, int64_t count, int64_t &totalBytes) {
  std::vector<int64_t> offsets;
  totalBytes = 0;
  for (const ir::Value *operand : op.operands()) {
    offsets.push_back(totalBytes);
    totalBytes += count * memoryElementBytes(operand->type());
    totalBytes = (totalBytes + 15) / 16 * 16;
  }
  return offsets;
}

bool atomicPublishesResult(const ir::Operation &op) {
  const ir::Type &type = op.result()->type();
  if (!op.result()->hasUses())
    return false;
  if (!type.isTensor())
    return true; // thread 0 issues it; everyone gets the value
  for (const auto &[name, mask] : tensorLayout(type).getFreeVariableMasks())
    if (mask != 0 && (name == kLaneDim || name == kWarpDim))
      return true; // duplicate lanes or warps hold copies of the owners' elements
  return false;
}

std::string tmaReduction(const ir::Operation &op) {
  if (op.code() != OpCode::AtomicRMW || !op.hasAttr("kind"))
    return "";
  // cp.reduce.async.bulk.tensor takes its element type from the map (the descriptor's dtype,
  // whose signedness picked the kind): add of .f32/.f16/.bf16/.u32/.s32, min and max of
  // .u32/.s32 and of .f16/.bf16 (fmin/fmax), and/or/xor of .b32.
  // 64-bit elements are left out with the store's rule (tmaStoreTile: at most 4 bytes).
  const std::string &kind = op.stringAttr("kind");
  ir::ScalarKind element = op.operand(1)->type().elementType().scalarKind();
  bool half = element == ir::ScalarKind::F16 || element == ir::ScalarKind::BF16;
  if (kind == "fadd")
    return element == ir::ScalarKind::F32 || half ? "add" : "";
  if (kind == "fmax" || kind == "fmin")
    return half ? kind.substr(1) : "";
  if (element != ir::ScalarKind::I32)
    return "";
  if (kind == "add" || kind == "and" || kind == "or" || kind == "xor")
    return kind;
  if (kind == "max" || kind == "umax")
    return "max";
  if (kind == "min" || kind == "umin")
    return "min";
  return "";
}

std::optional<SharedTileLayout> tmaStoreTile(const ir::Operation &op) {
  // (ptr, value, mask, tensormap, row, column): a 2-D map; ranks 3-5 keep the pointer store.
  bool reduction = op.code() == OpCode::AtomicRMW && !tmaReduction(op).empty();
  if ((op.code() != OpCode::Store && !reduction) || !op.hasAttr("tma") || op.numOperands() != 6)
    return std::nullopt;
  const ir::Type &type = op.operand(1)->type();
  if (!type.isTensor() || type.rank() != 2 || type.elementType() == ir::Type::i1())
    return std::nullopt;
  int elementBytes = static_cast<int>(memoryElementBytes(type));
  int64_t rows = type.shape()[0], rowBytes = type.shape()[1] * elementBytes;
  int64_t span = std::min<int64_t>(128, rowBytes);
  if (elementBytes > 4 || rows > 256 || rows % 8 != 0 || rowBytes < 32 || rowBytes % span != 0)
    return std::nullopt;
  std::shared_ptr<const SharedEncoding> encoding =
      wgmmaSharedEncoding(type.shape(), {1, 0}, elementBytes);
  if (!encoding)
    return std::nullopt;
  SharedTileLayout tile = encoding->tileFor(type.shape());
  if (tile.order.size() != 2 || tile.order[0] != 1 || wgmmaSwizzleBytes(tile, elementBytes) != span)
    return std::nullopt;
  return tile;
}

int64_t scratchBytes(const ir::Operation &op) {
  try {
    switch (op.code()) {
    case OpCode::Splat:
    case OpCode::Broadcast:
    case OpCode::ExpandDims:
    case OpCode::Reshape:
    case OpCode::ConvertLayout:
      if (!op.operand(0)->type().isTensor() || !op.result()->type().isTensor())
        return 0;
      return layoutScratchBytes(op);
    case OpCode::Reduce: return reduceScratchBytes(op);
    case OpCode::Scan: return scanScratchBytes(op);
    case OpCode::AtomicRMW:
      if (std::optional<SharedTileLayout> tile = tmaStoreTile(op))
        return tile->allocationSize() * memoryElementBytes(op.operand(1)->type());
      return atomicScratchBytes(op);
    case OpCode::AtomicCAS: return atomicScratchBytes(op);
    case OpCode::Store: {
      std::optional<SharedTileLayout> tile = tmaStoreTile(op);
      return tile ? tile->allocationSize() * memoryElementBytes(op.operand(1)->type()) : 0;
    }
    default: return 0;
    }
  } catch (const std::exception &) {
    return 0; // a layout codegen rejects, with a message naming the op
  }
}

} // namespace tessera::analysis
