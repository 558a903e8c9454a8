// Conversion planning between two register layouts, and the shared tile for the slow path.
//
// The plan is read off map = dst.invertAndCompose(src) (dst hardware index -> src hardware
// index), quotienting block, warp, lane and register in turn while each maps onto itself.
#include "layout/conversion.h"

#include <algorithm>
#include <stdexcept>

namespace tessera {

namespace {

void checkSameTensor(const LinearLayout &src, const LinearLayout &dst) {
  bool same = src.getNumOutDims() == dst.getNumOutDims();
  for (const auto &[name, size] : src.getOutDims())
    same = same && dst.hasOutDim(name) && dst.getOutDimSize(name) == size;
  if (!same)
    throw std::invalid_argument("planConversion: layouts of different tensors: " + src.str() +
                                " vs " + dst.str());
}

/// The tensor dim that a layout's registers vectorize: the dim its first nonzero register
/// basis steps; the last dim when registers do not step any.
int fastestAxis(const LinearLayout &layout) {
  int numRegisterBits = layout.hasInDim(kRegisterDim) ? layout.getInDimSizeLog2(kRegisterDim) : 0;
  for (int bit = 0; bit < numRegisterBits; ++bit)
    for (int axis = 0; axis < layout.getNumOutDims(); ++axis)
      if (layout.getBasis(kRegisterDim, bit, tensorDimName(axis)) != 0)
        return axis;
  return layout.getNumOutDims() - 1;
}

} // namespace

const char *conversionKindName(ConversionKind kind) {
  switch (kind) {
  case ConversionKind::None:
    return "none";
  case ConversionKind::RegisterPermutation:
    return "register_permutation";
  case ConversionKind::WarpShuffle:
    return "warp_shuffle";
  case ConversionKind::SharedMemory:
    return "shared_memory";
  }
  return "unknown";
}

int sharedAccessVectorWidth(const LinearLayout &layout, const SharedTileLayout &tile,
                            int elemBytes) {
  if (!layout.hasInDim(kRegisterDim))
    return 1;
  int width = layout.getNumConsecutiveInOut(kRegisterDim, tensorDimName(tile.order[0]));
  width = std::min(width, std::max(1, 16 / elemBytes));
  if (tile.maxPhase > 1)
    width = std::min(width, tile.vec); // swizzling moves whole vec-element chunks only
  // Padded rows must keep every vector aligned to its own size.
  while (tile.padElements > 0 && (tile.shape[tile.order[0]] + tile.padElements) % width != 0)
    width /= 2;
  return width;
}

SharedTileLayout chooseConversionTile(const LinearLayout &src, const LinearLayout &dst,
                                      int elemBytes) {
  checkSameTensor(src, dst);
  std::vector<int64_t> shape;
  for (int axis = 0; axis < src.getNumOutDims(); ++axis)
    shape.push_back(src.getOutDimSize(tensorDimName(axis)));
  SharedTileLayout plain = SharedTileLayout::rowMajor(shape);
  int fastest = fastestAxis(src);
  plain.order.erase(std::find(plain.order.begin(), plain.order.end(), fastest));
  plain.order.insert(plain.order.begin(), fastest);

  auto cost = [&](const SharedTileLayout &tile) {
    BankConflictOptions store{elemBytes, sharedAccessVectorWidth(src, tile, elemBytes), 0};
    BankConflictOptions load{elemBytes, sharedAccessVectorWidth(dst, tile, elemBytes), 0};
    return totalBankConflicts(computeSharedOffsets(src, tile), store) +
           totalBankConflicts(computeSharedOffsets(dst, tile), load);
  };
  // Swizzle chunks no narrower than either side's vectors, so vectorization survives; search
  // the small space of power-of-two parameters, keeping the first (simplest) best tile.
  SharedTileLayout best = plain;
  int bestCost = cost(plain);
  if (shape.size() < 2 || bestCost == 0)
    return best;
  int64_t rowLength = shape[plain.order[0]];
  int64_t numRows = shape[plain.order[1]];
  int maxVector = std::max(1, 16 / elemBytes);
  int minVec = std::max(std::min(maxVector, src.getNumConsecutiveInOut(kRegisterDim, tensorDimName(fastest))),
                        std::min(maxVector, dst.getNumConsecutiveInOut(kRegisterDim, tensorDimName(fastest))));
  for (int vec = minVec; vec <= rowLength; vec *= 2)
    for (int maxPhase = 2; int64_t(vec) * maxPhase <= rowLength; maxPhase *= 2)
      for (int perPhase = 1; perPhase <= numRows && perPhase <= 32; perPhase *= 2) {
        SharedTileLayout candidate = plain;
        candidate.vec = vec;
        candidate.perPhase = perPhase;
        candidate.maxPhase = maxPhase;
        int candidateCost = cost(candidate);
        if (candidateCost < bestCost) {
          best = candidate;
          bestCost = candidateCost;
        }
      }
  return best;
}

ConversionPlan planConversion(const LinearLayout &src, const LinearLayout &dst, int elemBytes) {
  checkSameTensor(src, dst);
  ConversionPlan plan;
  LinearLayout map = dst.invertAndCompose(src);
  // From the slowest hardware level down: each level that maps onto itself needs no data
  // movement at that level and is dropped.
  const char *levels[] = {kBlockDim, kWarpDim, kLaneDim, kRegisterDim};
  int quotiented = 0;
  for (const char *level : levels) {
    std::optional<LinearLayout> reduced = map.quotient({level});
    if (!reduced)
      break;
    map = *reduced;
    ++quotiented;
  }
  static const ConversionKind kindByLevelsLeft[] = {
      ConversionKind::None, ConversionKind::RegisterPermutation, ConversionKind::WarpShuffle,
      ConversionKind::SharedMemory, ConversionKind::SharedMemory};
  plan.kind = kindByLevelsLeft[4 - quotiented];
  plan.map = map;

  if (plan.kind == ConversionKind::None || plan.kind == ConversionKind::RegisterPermutation) {
    int numRegisters = dst.hasInDim(kRegisterDim) ? dst.getInDimSize(kRegisterDim) : 1;
    for (int32_t reg = 0; reg < numRegisters; ++reg) {
      int32_t source = reg;
      if (map.hasInDim(kRegisterDim))
        for (const auto &[name, value] : map.apply({{kRegisterDim, reg}}))
          if (name == kRegisterDim)
            source = value;
      plan.registerSources.push_back(source);
    }
  }
  if (plan.kind == ConversionKind::SharedMemory)
    plan.sharedTile = chooseConversionTile(src, dst, elemBytes);
  return plan;
}

} // namespace tessera
