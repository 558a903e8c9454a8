// MmaEncoding -> LinearLayout and its text form, plus the tile-layout builder shared with
// DotOperandEncoding.
//
// The per-instruction bases follow the PTX ISA fragment tables (tests/cpp/layout/mma_test.cpp
// checks them element by element against the tables' formulas).
#include "layout/mma.h"
#include "layout/integer_utils.h"

#include <sstream>
#include <stdexcept>

namespace tessera {

namespace {

using layout_util::isPowerOfTwo;
using layout_util::joinInts;

} // namespace

namespace layout_detail {

LinearLayout buildTileLayout(const std::vector<int64_t> &shape,
                             const std::vector<TileStep> &registers,
                             const std::vector<TileStep> &lanes, const std::vector<TileStep> &warps,
                             const std::vector<int64_t> &tile,
                             const std::vector<int> &repeatOrder) {
  if (shape.size() != 2)
    throw std::invalid_argument("tile layouts are 2-D, got a rank-" + std::to_string(shape.size()) +
                                " shape");
  for (int64_t extent : shape)
    if (!isPowerOfTwo(extent) || extent > (int64_t(1) << 30))
      throw std::invalid_argument("tile layouts need power-of-two extents, got " +
                                  std::to_string(extent));
  auto toBases = [&](const std::vector<TileStep> &steps) {
    std::vector<LinearLayout::BasisVector> bases;
    for (const TileStep &step : steps) {
      LinearLayout::BasisVector vector(2, 0);
      if (step.value < shape[step.dim])
        vector[step.dim] = step.value;
      bases.push_back(std::move(vector));
    }
    return bases;
  };
  std::vector<LinearLayout::BasisVector> registerBases = toBases(registers);
  for (int dim : repeatOrder)
    for (int64_t value = tile[dim]; value < shape[dim]; value *= 2) {
      LinearLayout::BasisVector vector(2, 0);
      vector[dim] = static_cast<int32_t>(value);
      registerBases.push_back(std::move(vector));
    }
  LinearLayout::DimSizes outDims{{tensorDimName(0), static_cast<int32_t>(shape[0])},
                                 {tensorDimName(1), static_cast<int32_t>(shape[1])}};
  return LinearLayout({{kRegisterDim, registerBases},
                       {kLaneDim, toBases(lanes)},
                       {kWarpDim, toBases(warps)},
                       {kBlockDim, {}}},
                      outDims, /*requireSurjective=*/true);
}

} // namespace layout_detail

MmaEncoding::MmaEncoding(int versionIn, std::vector<int> warpsPerCTAIn,
                         std::vector<int> instrShapeIn)
    : version(versionIn), warpsPerCTA(std::move(warpsPerCTAIn)),
      instrShape(std::move(instrShapeIn)) {
  if (version != 2 && version != 3)
    throw std::invalid_argument("MmaEncoding: version must be 2 (mma.sync) or 3 (wgmma), got " +
                                std::to_string(version));
  if (warpsPerCTA.size() != 2 || !isPowerOfTwo(warpsPerCTA[0]) || !isPowerOfTwo(warpsPerCTA[1]))
    throw std::invalid_argument("MmaEncoding: warpsPerCTA must be two powers of two, got " +
                                joinInts(warpsPerCTA));
  if (version == 2 && instrShape != std::vector<int>{16, 8})
    throw std::invalid_argument("MmaEncoding: instrShape must be [16, 8], got " +
                                joinInts(instrShape));
  if (version == 3) {
    if (warpsPerCTA[0] % 4 != 0)
      throw std::invalid_argument("MmaEncoding: version 3 needs warps along M in warpgroups "
                                  "of 4, got " +
                                  joinInts(warpsPerCTA));
    if (instrShape.size() != 2 || instrShape[0] != 16 || !isPowerOfTwo(instrShape[1]) ||
        instrShape[1] < 8 || instrShape[1] > 256)
      throw std::invalid_argument("MmaEncoding: version 3 instrShape must be [16, N] with N a "
                                  "power of two in 8..256, got " +
                                  joinInts(instrShape));
  }
}

std::string MmaEncoding::str() const {
  return "#mma<{version = " + std::to_string(version) + ", warpsPerCTA = " + joinInts(warpsPerCTA) +
         ", instrShape = " + joinInts(instrShape) + "}>";
}

bool MmaEncoding::equals(const Encoding &other) const {
  const auto *mma = dynamic_cast<const MmaEncoding *>(&other);
  return mma && mma->version == version && mma->warpsPerCTA == warpsPerCTA &&
         mma->instrShape == instrShape;
}

LinearLayout MmaEncoding::toLinearLayout(const std::vector<int64_t> &shape) const {
  using layout_detail::TileStep;
  if (shape.size() != 2)
    throw std::invalid_argument("MmaEncoding::toLinearLayout: expected a 2-D shape");
  std::vector<TileStep> registers{{1, 1}, {0, 8}};
  std::vector<TileStep> lanes{{1, 2}, {1, 4}, {0, 1}, {0, 2}, {0, 4}};
  std::vector<TileStep> warps;
  if (version == 3) {
    int n = instrShape[1];
    for (int step = 8; step < n; step *= 2)
      registers.push_back({1, step});
    for (int w = 1; w < warpsPerCTA[0]; w *= 2)
      warps.push_back({0, 16 * w});
    for (int w = 1; w < warpsPerCTA[1]; w *= 2)
      warps.push_back({1, n * w});
    std::vector<int64_t> tile{16 * int64_t(warpsPerCTA[0]), int64_t(n) * warpsPerCTA[1]};
    return layout_detail::buildTileLayout(shape, registers, lanes, warps, tile, {1, 0});
  }
  for (int w = 1; w < warpsPerCTA[1]; w *= 2)
    warps.push_back({1, 8 * w});
  for (int w = 1; w < warpsPerCTA[0]; w *= 2)
    warps.push_back({0, 16 * w});
  std::vector<int64_t> tile{16 * int64_t(warpsPerCTA[0]), 8 * int64_t(warpsPerCTA[1])};
  return layout_detail::buildTileLayout(shape, registers, lanes, warps, tile, {1, 0});
}

} // namespace tessera
