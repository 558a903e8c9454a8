// SharedEncoding: where the elements of a shared-memory buffer sit, as Triton's
// #ttg.swizzled_shared. A tensor type with this encoding is a handle to a buffer in shared
// memory (made by local_alloc, filled by async_copy, read by local_load), not registers.
//
// The pipeliner and the dot-operand lowering pick the swizzle (dotOperandSharedEncoding) so
// that the 16-byte stores of a coalesced tile and the ldmatrix reads of the mma fragments are
// both free of bank conflicts. A leading dim beyond the swizzled 2-D tile indexes ring slots.
#pragma once

#include "layout/encoding.h"
#include "layout/linear_layout.h"
#include "layout/shared_tile_layout.h"

#include <memory>
#include <vector>

namespace tessera {

class SharedEncoding : public Encoding {
public:
  /// `order` lists every dim, fastest first (rows run along order[0]); in row r (the
  /// coordinate along order[1]) the vec-element chunk c sits at chunk c ^ (r / perPhase %
  /// maxPhase). blockCols > 0 cuts rows into column blocks stored one after another
  /// (SharedTileLayout::blockCols; the wgmma layouts of rows over 128 bytes). Throws
  /// std::invalid_argument unless the parameters are powers of two.
  SharedEncoding(int vec, int perPhase, int maxPhase, std::vector<int> order, int blockCols = 0);

  int getVec() const { return vec; }
  int getPerPhase() const { return perPhase; }
  int getMaxPhase() const { return maxPhase; }
  const std::vector<int> &getOrder() const { return order; }
  int getBlockCols() const { return blockCols; }

  /// The placement of a buffer of `shape` (elements), as the tile the simulator and the
  /// conversion code use.
  SharedTileLayout tileFor(const std::vector<int64_t> &shape) const;

  std::string str() const override;
  bool equals(const Encoding &other) const override;
  int rank() const override { return static_cast<int>(order.size()); }
  /// The *shared-memory* layout: input dim "offset" (elements) -> dim0, dim1, ...
  LinearLayout toLinearLayout(const std::vector<int64_t> &shape) const override;

private:
  int vec, perPhase, maxPhase;
  std::vector<int> order;
  int blockCols;
};

/// The swizzle for a 2-D dot operand tile of `shape` stored with `order` (order[0] = the dim
/// contiguous in global memory): 16-byte chunks; rows of R bytes share a 128-byte line
/// perPhase = max(1, 128 / R) at a time, and maxPhase = min(8, R / 16) phases make any 8
/// consecutive rows' chunks of one column fall in 8 distinct 16-byte bank groups, which is
/// what one 8-lane phase of ldmatrix (or of a 16-byte store) touches.
std::shared_ptr<const SharedEncoding> dotOperandSharedEncoding(const std::vector<int64_t> &shape,
                                                               const std::vector<int> &order,
                                                               int elemBytes);

/// The swizzle wgmma reads through a matrix descriptor (PTX ISA "Shared Memory Matrix
/// Layout"): 16-byte chunks XOR-swizzled over rows of 32, 64 or 128 bytes (the 32/64/128-byte
/// swizzle modes, the same placement dotOperandSharedEncoding gives such rows); rows longer
/// than 128 bytes are cut into 128-byte column blocks. Null when the rows are shorter than 32
/// bytes (no swizzled mode fits).
std::shared_ptr<const SharedEncoding> wgmmaSharedEncoding(const std::vector<int64_t> &shape,
                                                          const std::vector<int> &order,
                                                          int elemBytes);

/// The descriptor fields of a tile in a wgmmaSharedEncoding: the swizzle width in bytes (32,
/// 64, 128) or 0 when the tile's placement is not one of them.
int wgmmaSwizzleBytes(const SharedTileLayout &tile, int elemBytes);

/// The same encoding for a ring of buffers [numSlots, shape...]: the slot dim is the slowest.
std::shared_ptr<const SharedEncoding> withRingDim(const SharedEncoding &tile);

} // namespace tessera
