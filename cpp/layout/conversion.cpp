// Conversion planning between two register layouts, and the shared tile for the slow path.
//
// The plan is read off a map from dst hardware indices to src hardware indices (a choice of
// src^-1 ∘ dst) that keeps as many hardware levels fixed as possible; the fixed levels are
// quotiented out and the lowest level that still moves names the kind of plan.
#include "layout/conversion.h"

#include <algorithm>
#include <deque>
#include <mutex>
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
  case ConversionKind::None: return "none";
  case ConversionKind::RegisterPermutation: return "register_permutation";
  case ConversionKind::WarpShuffle: return "warp_shuffle";
  case ConversionKind::SharedMemory: return "shared_memory";
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

namespace {

/// chooseConversionTile without the memo below.
SharedTileLayout searchConversionTile(const LinearLayout &src, const LinearLayout &dst,
                                      int elemBytes) {
  checkSameTensor(src, dst);
  if (src.getNumOutDims() == 0)
    throw std::invalid_argument("chooseConversionTile: a rank-0 tensor needs no shared tile");
  std::vector<int64_t> shape;
  for (int axis = 0; axis < src.getNumOutDims(); ++axis)
    shape.push_back(src.getOutDimSize(tensorDimName(axis)));
  SharedTileLayout plain = SharedTileLayout::rowMajor(shape);
  int fastest = fastestAxis(src);
  plain.order.erase(std::find(plain.order.begin(), plain.order.end(), fastest));
  plain.order.insert(plain.order.begin(), fastest);

  // Shared-memory cycles of the round trip and how many of them are conflicts. Tiles are
  // ranked by cycles, so narrowing the accesses (to swizzle at a finer grain) pays only when
  // it removes more conflicts than the extra phases it adds.
  // Only warp 0 is simulated, so drop the warp and block dims (as if both were 0).
  HeldElements srcWarp =
      listHeldElements(src.sublayout({kRegisterDim, kLaneDim}, src.getOutDimNames()));
  HeldElements dstWarp =
      listHeldElements(dst.sublayout({kRegisterDim, kLaneDim}, dst.getOutDimNames()));
  auto simulate = [&](const SharedTileLayout &tile) {
    BankConflictOptions store{elemBytes, sharedAccessVectorWidth(src, tile, elemBytes), 0};
    BankConflictOptions load{elemBytes, sharedAccessVectorWidth(dst, tile, elemBytes), 0};
    SharedAccessTable stores = computeSharedOffsets(srcWarp, tile);
    SharedAccessTable loads = computeSharedOffsets(dstWarp, tile);
    SharedAccessCost storeCost = measureSharedAccesses(stores, store);
    SharedAccessCost loadCost = measureSharedAccesses(loads, load);
    return std::make_pair(storeCost.wavefronts + loadCost.wavefronts,
                          storeCost.conflicts + loadCost.conflicts);
  };
  // Search the small space of power-of-two swizzles, skipping those with more phases than
  // rows (they equal one with fewer). Ties keep the earlier tile: no swizzle first, then wider
  // chunks before narrower ones. Access widths only shrink along the way and narrower
  // accesses never take fewer cycles, so the first conflict-free tile is optimal.
  SharedTileLayout best = plain;
  auto [bestCost, plainConflicts] = simulate(plain);
  if (shape.size() < 2 || plainConflicts == 0)
    return best;
  int64_t rowLength = shape[plain.order[0]];
  int64_t numRows = shape[plain.order[1]];
  for (int64_t vec = rowLength / 2; vec >= 1; vec /= 2)
    for (int maxPhase = 2; vec * maxPhase <= rowLength && maxPhase <= numRows; maxPhase *= 2)
      for (int perPhase = 1; int64_t(perPhase) * maxPhase <= numRows; perPhase *= 2) {
        SharedTileLayout candidate = plain;
        candidate.vec = static_cast<int>(vec);
        candidate.perPhase = perPhase;
        candidate.maxPhase = maxPhase;
        auto [candidateCost, conflicts] = simulate(candidate);
        if (conflicts == 0)
          return candidate;
        if (candidateCost < bestCost) {
          best = candidate;
          bestCost = candidateCost;
        }
      }
  return best;
}

/// The latest answers of chooseConversionTile. One conversion is asked about several times
/// per compile (its plan in remove_layout_conversions, its scratch size in allocate_shared and
/// at every visit of membar's walk, its lowering in codegen), and each answer simulates
/// dozens of tiles of thousands of elements. Threads may compile at once (codegen runs
/// without the GIL): a lock guards it.
class TileMemo {
public:
  std::optional<SharedTileLayout> find(const LinearLayout &src, const LinearLayout &dst,
                                       int elemBytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry &entry : entries_)
      if (entry.elemBytes == elemBytes && entry.src == src && entry.dst == dst)
        return entry.tile;
    return std::nullopt;
  }
  void add(const LinearLayout &src, const LinearLayout &dst, int elemBytes,
           const SharedTileLayout &tile) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back({src, dst, elemBytes, tile});
    if (entries_.size() > kCapacity) // more than one kernel's conversions: forget the oldest
      entries_.pop_front();
  }

private:
  struct Entry {
    LinearLayout src, dst;
    int elemBytes;
    SharedTileLayout tile;
  };
  static constexpr size_t kCapacity = 64;
  std::mutex mutex_;
  std::deque<Entry> entries_;
};

} // namespace

SharedTileLayout chooseConversionTile(const LinearLayout &src, const LinearLayout &dst,
                                      int elemBytes) {
  static TileMemo memo;
  if (std::optional<SharedTileLayout> known = memo.find(src, dst, elemBytes))
    return *known;
  SharedTileLayout tile = searchConversionTile(src, dst, elemBytes);
  memo.add(src, dst, elemBytes, tile);
  return tile;
}

namespace {

/// A map M from dst hardware indices to src hardware indices with src(M(x)) == dst(x) that
/// leaves every src input dim outside `movable` fixed (M's output there equals its input);
/// nullopt if none exists, i.e. data has to cross those dims.
///
/// Plan: M(e) for a dst basis e must satisfy src(M(e)) == dst(e). Writing M(e) = e_fixed + y
/// with y over the movable dims, y must give target = dst(e) ^ src(e_fixed), so
///  1. collect the targets as a layout over dst's input dims,
///  2. solve them against src restricted to the movable dims (tryInvertAndCompose),
///  3. add the identity on the fixed dims back.
std::optional<LinearLayout> solveKeepingFixed(const LinearLayout &src, const LinearLayout &dst,
                                              const std::vector<std::string> &movable) {
  auto isMovable = [&](const std::string &dim) {
    return std::find(movable.begin(), movable.end(), dim) != movable.end();
  };
  auto sizeOf = [](const LinearLayout &layout, const std::string &dim) {
    return layout.hasInDim(dim) ? layout.getInDimSize(dim) : 1;
  };
  std::vector<std::string> srcDims = src.getInDimNames(), movableSrcDims;
  for (const std::string &dim : srcDims)
    if (isMovable(dim))
      movableSrcDims.push_back(dim);
  for (const std::string &dim : dst.getInDimNames())
    if (!isMovable(dim) && sizeOf(src, dim) != sizeOf(dst, dim))
      return std::nullopt;

  LinearLayout::Bases targets;
  for (const auto &[dim, vectors] : dst.getBases()) {
    std::vector<LinearLayout::BasisVector> dimTargets;
    for (size_t bit = 0; bit < vectors.size(); ++bit) {
      LinearLayout::BasisVector target(src.getNumOutDims(), 0);
      for (const auto &[outDim, size] : src.getOutDims()) {
        int index = src.getOutDimIndex(outDim);
        target[index] = vectors[bit][dst.getOutDimIndex(outDim)];
        if (!isMovable(dim))
          target[index] ^= src.getBasis(dim, static_cast<int>(bit), outDim);
      }
      dimTargets.push_back(std::move(target));
    }
    targets.emplace_back(dim, std::move(dimTargets));
  }
  LinearLayout targetLayout(targets, src.getOutDims(), /*requireSurjective=*/false);
  std::optional<LinearLayout> solved =
      targetLayout.tryInvertAndCompose(src.sublayout(movableSrcDims, src.getOutDimNames()));
  if (!solved)
    return std::nullopt;

  LinearLayout::Bases bases;
  LinearLayout::DimSizes outDims;
  for (const std::string &dim : srcDims)
    outDims.emplace_back(dim, src.getInDimSize(dim));
  for (const auto &[dim, vectors] : dst.getBases()) {
    std::vector<LinearLayout::BasisVector> mapped;
    for (size_t bit = 0; bit < vectors.size(); ++bit) {
      LinearLayout::BasisVector vector;
      for (const std::string &srcDim : srcDims)
        vector.push_back(isMovable(srcDim) ? solved->getBasis(dim, static_cast<int>(bit), srcDim)
                         : srcDim == dim   ? int32_t(1) << bit
                                           : 0);
      mapped.push_back(std::move(vector));
    }
    bases.emplace_back(dim, std::move(mapped));
  }
  return LinearLayout(std::move(bases), std::move(outDims), /*requireSurjective=*/false);
}

/// M with the fixed output dims dropped, and the input dims that then do nothing.
LinearLayout restrictToMovable(const LinearLayout &map, const std::vector<std::string> &movable) {
  std::vector<std::string> inputs;
  for (const std::string &dim : map.getInDimNames())
    if (std::find(movable.begin(), movable.end(), dim) != movable.end() ||
        !map.sublayoutIsZero({dim}, movable))
      inputs.push_back(dim);
  return map.sublayout(inputs, movable);
}

} // namespace

ConversionPlan planConversion(const LinearLayout &src, const LinearLayout &dst, int elemBytes) {
  checkSameTensor(src, dst);
  // Try to keep ever more hardware levels fixed, cheapest plan first. Level k may move the
  // first k dims of {register, lane, warp, block}.
  const std::vector<std::string> levelDims = {kRegisterDim, kLaneDim, kWarpDim, kBlockDim};
  const ConversionKind kinds[] = {ConversionKind::None, ConversionKind::RegisterPermutation,
                                  ConversionKind::WarpShuffle, ConversionKind::SharedMemory,
                                  ConversionKind::SharedMemory};
  ConversionPlan plan;
  bool found = false;
  for (size_t level = 0; level <= levelDims.size() && !found; ++level) {
    std::vector<std::string> movable(levelDims.begin(), levelDims.begin() + level);
    std::optional<LinearLayout> map = solveKeepingFixed(src, dst, movable);
    if (!map)
      continue;
    LinearLayout restricted = restrictToMovable(*map, movable);
    // A static register table cannot depend on the lane or warp.
    if (kinds[level] == ConversionKind::RegisterPermutation && restricted.getNumInDims() > 1)
      continue;
    plan.kind = kinds[level];
    plan.map = restricted;
    found = true;
  }
  // The last level moves every dim; it fails only if src lacks some element of dst.
  if (!found)
    throw std::invalid_argument("planConversion: " + src.str() +
                                " does not hold every element of " + dst.str());

  if (plan.kind == ConversionKind::None || plan.kind == ConversionKind::RegisterPermutation) {
    int numRegisters = dst.hasInDim(kRegisterDim) ? dst.getInDimSize(kRegisterDim) : 1;
    for (int32_t reg = 0; reg < numRegisters; ++reg)
      plan.registerSources.push_back(
          plan.map.hasInDim(kRegisterDim) ? plan.map.apply({{kRegisterDim, reg}})[0].second : reg);
  }
  if (plan.kind == ConversionKind::SharedMemory)
    plan.sharedTile = chooseConversionTile(src, dst, elemBytes);
  return plan;
}

} // namespace tessera
