// BlockedEncoding: the default register layout, as Triton's #ttg.blocked.
//
// Each thread holds sizePerThread contiguous elements, threads tile a warp, warps tile the CTA,
// and the CTA tile repeats (or is broadcast) to cover the tensor. The assign-layouts and
// coalesce passes create these (defaultBlocked); codegen sees only toLinearLayout().
#pragma once

#include "layout/encoding.h"
#include "layout/linear_layout.h"

#include <memory>
#include <vector>

namespace tessera {

class BlockedEncoding : public Encoding {
public:
  /// All four vectors have one entry per tensor dim; entries are powers of two and `order`
  /// is a permutation of the dims, fastest-varying first. Throws std::invalid_argument.
  BlockedEncoding(std::vector<int> sizePerThread, std::vector<int> threadsPerWarp,
                  std::vector<int> warpsPerCTA, std::vector<int> order);

  const std::vector<int> &getSizePerThread() const { return sizePerThread; }
  const std::vector<int> &getThreadsPerWarp() const { return threadsPerWarp; }
  const std::vector<int> &getWarpsPerCTA() const { return warpsPerCTA; }
  const std::vector<int> &getOrder() const { return order; }
  int getNumWarps() const;
  int getWarpSize() const;
  /// Elements one CTA covers per dim before repeating: sizePerThread * threadsPerWarp *
  /// warpsPerCTA.
  std::vector<int64_t> getShapePerCTATile() const;

  std::string str() const override;
  bool equals(const Encoding &other) const override;
  int rank() const override { return static_cast<int>(order.size()); }
  /// Input dims register, lane, warp, block (block has size 1); output dims dim0, dim1, ...
  /// with the tensor's extents. Where the shape is smaller than the CTA tile, the excess
  /// bases become zero (broadcast: several threads, or registers, hold the same element, as
  /// in Triton). Where it is larger, extra register bases repeat the tile, fastest dim first.
  LinearLayout toLinearLayout(const std::vector<int64_t> &shape) const override;

private:
  std::vector<int> sizePerThread, threadsPerWarp, warpsPerCTA, order;
};

/// The layout the assign-layouts + coalesce passes start from: order row-major (last dim
/// fastest); each thread holds up to 16 bytes along the last dim when the tensor has enough
/// elements for every thread; lanes then warps fill the last dim first, the rest go to the
/// slower dims. E.g. [1024] f32 with 4 warps -> sizePerThread [4], threadsPerWarp [32],
/// warpsPerCTA [4], order [0]; [64, 64] f32 -> [1, 4], [2, 16], [4, 1], [1, 0].
std::shared_ptr<const BlockedEncoding> defaultBlocked(const std::vector<int64_t> &shape,
                                                      int numWarps, int threadsPerWarp = 32,
                                                      int elemBits = 32);

} // namespace tessera
