// BlockedEncoding -> LinearLayout, its text form, and the default blocked layout of a shape.
//
// The linear layout is built level by level (registers, lanes, warps), each level walking the
// dims in `order` so that lower input bits always step the faster tensor dims.
#include "layout/blocked.h"
#include "layout/integer_utils.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace tessera {

namespace {

using layout_util::isPowerOfTwo;
using layout_util::joinInts;

void checkPowersOfTwo(const std::vector<int> &values, const char *what) {
  for (int value : values)
    if (!isPowerOfTwo(value))
      throw std::invalid_argument(std::string("BlockedEncoding: ") + what +
                                  " entries must be powers of two, got " + std::to_string(value));
}

int product(const std::vector<int> &values) {
  int result = 1;
  for (int value : values)
    result *= value;
  return result;
}

} // namespace

BlockedEncoding::BlockedEncoding(std::vector<int> sizePerThreadIn,
                                 std::vector<int> threadsPerWarpIn, std::vector<int> warpsPerCTAIn,
                                 std::vector<int> orderIn)
    : sizePerThread(std::move(sizePerThreadIn)), threadsPerWarp(std::move(threadsPerWarpIn)),
      warpsPerCTA(std::move(warpsPerCTAIn)), order(std::move(orderIn)) {
  size_t rank = order.size();
  if (rank == 0 || sizePerThread.size() != rank || threadsPerWarp.size() != rank ||
      warpsPerCTA.size() != rank)
    throw std::invalid_argument("BlockedEncoding: sizePerThread, threadsPerWarp, warpsPerCTA "
                                "and order need the same nonzero length");
  checkPowersOfTwo(sizePerThread, "sizePerThread");
  checkPowersOfTwo(threadsPerWarp, "threadsPerWarp");
  checkPowersOfTwo(warpsPerCTA, "warpsPerCTA");
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < rank; ++i)
    if (sorted[i] != static_cast<int>(i))
      throw std::invalid_argument("BlockedEncoding: order " + joinInts(order) +
                                  " is not a permutation of the dims");
}

int BlockedEncoding::getNumWarps() const { return product(warpsPerCTA); }
int BlockedEncoding::getWarpSize() const { return product(threadsPerWarp); }

std::vector<int64_t> BlockedEncoding::getShapePerCTATile() const {
  std::vector<int64_t> tile;
  for (int axis = 0; axis < rank(); ++axis)
    tile.push_back(int64_t(sizePerThread[axis]) * threadsPerWarp[axis] * warpsPerCTA[axis]);
  return tile;
}

std::string BlockedEncoding::str() const {
  return "#blocked<{sizePerThread = " + joinInts(sizePerThread) +
         ", threadsPerWarp = " + joinInts(threadsPerWarp) +
         ", warpsPerCTA = " + joinInts(warpsPerCTA) + ", order = " + joinInts(order) + "}>";
}

bool BlockedEncoding::equals(const Encoding &other) const {
  const auto *blocked = dynamic_cast<const BlockedEncoding *>(&other);
  return blocked && blocked->sizePerThread == sizePerThread &&
         blocked->threadsPerWarp == threadsPerWarp && blocked->warpsPerCTA == warpsPerCTA &&
         blocked->order == order;
}

LinearLayout BlockedEncoding::toLinearLayout(const std::vector<int64_t> &shape) const {
  if (static_cast<int>(shape.size()) != rank())
    throw std::invalid_argument("BlockedEncoding::toLinearLayout: shape rank " +
                                std::to_string(shape.size()) + " != encoding rank " +
                                std::to_string(rank()));
  for (int64_t extent : shape)
    if (!isPowerOfTwo(extent) || extent > (int64_t(1) << 30))
      throw std::invalid_argument("BlockedEncoding::toLinearLayout: extents must be powers of "
                                  "two up to 2^30, got " +
                                  std::to_string(extent));

  // covered[axis]: elements along axis spanned by the levels built so far. Bases of the next
  // level start there; a basis that lands at or past the extent is broadcast (zero).
  std::vector<int64_t> covered(rank(), 1);
  auto buildLevel = [&](const std::vector<int> &perAxis) {
    std::vector<LinearLayout::BasisVector> vectors;
    for (int axis : order)
      for (int64_t step = 1; step < perAxis[axis]; step *= 2) {
        LinearLayout::BasisVector vector(rank(), 0);
        int64_t value = covered[axis] * step;
        if (value < shape[axis])
          vector[axis] = static_cast<int32_t>(value);
        vectors.push_back(std::move(vector));
      }
    for (int axis = 0; axis < rank(); ++axis)
      covered[axis] *= perAxis[axis];
    return vectors;
  };
  std::vector<LinearLayout::BasisVector> registers = buildLevel(sizePerThread);
  std::vector<LinearLayout::BasisVector> lanes = buildLevel(threadsPerWarp);
  std::vector<LinearLayout::BasisVector> warps = buildLevel(warpsPerCTA);

  // Tensor larger than the CTA tile: each thread repeats its pattern in more registers.
  for (int axis : order)
    for (int64_t value = covered[axis]; value < shape[axis]; value *= 2) {
      LinearLayout::BasisVector vector(rank(), 0);
      vector[axis] = static_cast<int32_t>(value);
      registers.push_back(std::move(vector));
    }

  LinearLayout::DimSizes outDims;
  for (int axis = 0; axis < rank(); ++axis)
    outDims.emplace_back(tensorDimName(axis), static_cast<int32_t>(shape[axis]));
  return LinearLayout(
      {{kRegisterDim, registers}, {kLaneDim, lanes}, {kWarpDim, warps}, {kBlockDim, {}}}, outDims,
      /*requireSurjective=*/true);
}

std::shared_ptr<const BlockedEncoding>
defaultBlocked(const std::vector<int64_t> &shape, int numWarps, int threadsPerWarp, int elemBits) {
  int rank = static_cast<int>(shape.size());
  if (rank == 0 || !isPowerOfTwo(numWarps) || !isPowerOfTwo(threadsPerWarp) ||
      !isPowerOfTwo(elemBits))
    throw std::invalid_argument("defaultBlocked: need rank >= 1 and power-of-two numWarps, "
                                "threadsPerWarp and elemBits");
  int64_t numElements = 1;
  for (int64_t extent : shape) {
    if (!isPowerOfTwo(extent))
      throw std::invalid_argument("defaultBlocked: extents must be powers of two");
    numElements *= extent;
  }

  std::vector<int> order;
  for (int axis = rank - 1; axis >= 0; --axis)
    order.push_back(axis);
  // 16-byte vectors along the fastest dim, but never so wide that some threads sit idle.
  int fastest = order[0];
  int64_t perThread = std::max(1, 128 / elemBits);
  perThread =
      std::min(perThread, std::max<int64_t>(1, numElements / (int64_t(numWarps) * threadsPerWarp)));
  perThread = std::min(perThread, shape[fastest]);
  std::vector<int> sizePerThread(rank, 1);
  sizePerThread[fastest] = static_cast<int>(perThread);

  // Give lanes, then warps, to the dims from fastest to slowest, no more than each dim can
  // use; the slowest dim takes whatever is left (possibly broadcasting).
  std::vector<int> lanes(rank, 1), warps(rank, 1);
  int64_t remainingThreads = int64_t(numWarps) * threadsPerWarp;
  int remainingLanes = threadsPerWarp, remainingWarps = numWarps;
  for (int i = 0; i + 1 < rank; ++i) {
    int axis = order[i];
    int64_t useful = std::max<int64_t>(1, shape[axis] / sizePerThread[axis]);
    int64_t threadsAlongAxis = std::clamp<int64_t>(remainingThreads, 1, useful);
    lanes[axis] = static_cast<int>(std::min<int64_t>(threadsAlongAxis, remainingLanes));
    warps[axis] =
        static_cast<int>(std::clamp<int64_t>(threadsAlongAxis / lanes[axis], 1, remainingWarps));
    remainingLanes /= lanes[axis];
    remainingWarps /= warps[axis];
    remainingThreads /= threadsAlongAxis;
  }
  lanes[order[rank - 1]] = remainingLanes;
  warps[order[rank - 1]] = remainingWarps;
  return std::make_shared<const BlockedEncoding>(sizePerThread, lanes, warps, order);
}

} // namespace tessera
