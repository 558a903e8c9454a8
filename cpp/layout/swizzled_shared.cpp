// SharedEncoding: text form, tile placement, and the swizzle chosen for dot operands.
//
// Placement itself lives in SharedTileLayout::offsetOf (shared_tile_layout.cpp), the single
// source of truth that the bank-conflict simulator and codegen share.
#include "layout/swizzled_shared.h"
#include "layout/integer_utils.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace tessera {

namespace {

using layout_util::isPowerOfTwo;
using layout_util::joinInts;

} // namespace

SharedEncoding::SharedEncoding(int vecIn, int perPhaseIn, int maxPhaseIn, std::vector<int> orderIn,
                               int blockColsIn)
    : vec(vecIn), perPhase(perPhaseIn), maxPhase(maxPhaseIn), order(std::move(orderIn)),
      blockCols(blockColsIn) {
  if (blockCols < 0 || (blockCols > 0 && !isPowerOfTwo(blockCols)))
    throw std::invalid_argument("SharedEncoding: blockCols must be 0 or a power of two");
  if (!isPowerOfTwo(vec) || !isPowerOfTwo(perPhase) || !isPowerOfTwo(maxPhase))
    throw std::invalid_argument("SharedEncoding: vec, perPhase and maxPhase must be powers of two");
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int>(i))
      throw std::invalid_argument("SharedEncoding: order " + joinInts(order) +
                                  " is not a permutation of the dims");
  if (order.empty())
    throw std::invalid_argument("SharedEncoding: order must list the dims");
}

SharedTileLayout SharedEncoding::tileFor(const std::vector<int64_t> &shape) const {
  if (static_cast<int>(shape.size()) != rank())
    throw std::invalid_argument("SharedEncoding: shape rank does not match " + str());
  SharedTileLayout tile;
  tile.shape = shape;
  tile.order = order;
  tile.vec = vec;
  tile.perPhase = perPhase;
  tile.maxPhase = maxPhase;
  tile.blockCols = blockCols;
  tile.verify();
  return tile;
}

std::string SharedEncoding::str() const {
  return "#shared<{vec = " + std::to_string(vec) + ", perPhase = " + std::to_string(perPhase) +
         ", maxPhase = " + std::to_string(maxPhase) + ", order = " + joinInts(order) +
         (blockCols > 0 ? ", blockCols = " + std::to_string(blockCols) : std::string()) + "}>";
}

bool SharedEncoding::equals(const Encoding &other) const {
  const auto *shared = dynamic_cast<const SharedEncoding *>(&other);
  return shared && shared->vec == vec && shared->perPhase == perPhase &&
         shared->maxPhase == maxPhase && shared->order == order && shared->blockCols == blockCols;
}

LinearLayout SharedEncoding::toLinearLayout(const std::vector<int64_t> &shape) const {
  return tileFor(shape).toLinearLayout();
}

std::shared_ptr<const SharedEncoding> dotOperandSharedEncoding(const std::vector<int64_t> &shape,
                                                               const std::vector<int> &order,
                                                               int elemBytes) {
  if (shape.size() != 2 || order.size() != 2)
    throw std::invalid_argument("dotOperandSharedEncoding: expected a 2-D tile");
  int64_t rowBytes = shape[order[0]] * elemBytes;
  int vec = std::max(1, 16 / elemBytes);
  int64_t chunksPerRow = std::max<int64_t>(1, rowBytes / 16);
  int perPhase = static_cast<int>(std::max<int64_t>(1, 128 / std::max<int64_t>(1, rowBytes)));
  int maxPhase = static_cast<int>(std::min<int64_t>(8, chunksPerRow));
  if (int64_t(vec) > shape[order[0]]) { // rows narrower than one chunk: no swizzle
    vec = 1;
    maxPhase = 1;
  }
  return std::make_shared<const SharedEncoding>(vec, perPhase, maxPhase, order);
}

std::shared_ptr<const SharedEncoding> withRingDim(const SharedEncoding &tile) {
  std::vector<int> order;
  for (int dim : tile.getOrder())
    order.push_back(dim + 1);
  order.push_back(0);
  return std::make_shared<const SharedEncoding>(tile.getVec(), tile.getPerPhase(),
                                                tile.getMaxPhase(), order, tile.getBlockCols());
}

std::shared_ptr<const SharedEncoding> wgmmaSharedEncoding(const std::vector<int64_t> &shape,
                                                          const std::vector<int> &order,
                                                          int elemBytes) {
  if (shape.size() != 2 || order.size() != 2)
    throw std::invalid_argument("wgmmaSharedEncoding: expected a 2-D tile");
  int64_t rowBytes = shape[order[0]] * elemBytes;
  if (rowBytes < 32)
    return nullptr;
  int64_t swizzleBytes = std::min<int64_t>(128, rowBytes);
  int vec = 16 / elemBytes;
  int perPhase = static_cast<int>(128 / swizzleBytes);
  int maxPhase = static_cast<int>(swizzleBytes / 16);
  int blockCols = rowBytes > 128 ? static_cast<int>(128 / elemBytes) : 0;
  return std::make_shared<const SharedEncoding>(vec, perPhase, maxPhase, order, blockCols);
}

int wgmmaSwizzleBytes(const SharedTileLayout &tile, int elemBytes) {
  if (tile.shape.size() != 2 || tile.padElements != 0)
    return 0;
  int64_t rowBytes = tile.storedRowLength() * elemBytes;
  if ((rowBytes != 32 && rowBytes != 64 && rowBytes != 128) ||
      (tile.blockCols > 0 && rowBytes != 128))
    return 0;
  bool matches = tile.vec * elemBytes == 16 && tile.perPhase == 128 / rowBytes &&
                 tile.maxPhase == rowBytes / 16;
  return matches ? static_cast<int>(rowBytes) : 0;
}

} // namespace tessera
