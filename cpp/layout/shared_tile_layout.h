// Shared-memory tiles and a simulated warp that counts bank conflicts.
//
// A layout conversion that moves data between warps goes through shared memory
// (conversion.h): every thread stores its registers at the offsets of a SharedTileLayout, then
// loads the destination layout's elements. allocate_shared and codegen use the same offsets.
#pragma once

#include "layout/linear_layout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// Where each element of a tile sits in a shared buffer, in elements. The tile is stored
/// row-major along `order` (order[0] varies fastest; a "row" runs along order[0]), with either
///  - an XOR swizzle as Triton's #ttg.swizzled_shared: in row r (the coordinate along
///    order[1]), the chunk of `vec` elements at column chunk c moves to chunk
///    c ^ ((r / perPhase) % maxPhase); maxPhase == 1 means no swizzle; or
///  - padding: `padElements` unused elements after every row (not a linear layout).
/// With `blockCols` > 0 (the wgmma/TMA "NVMMA" layouts), rows longer than blockCols are cut
/// into column blocks of blockCols elements: the 2-D tile (order[0], order[1]) is stored block
/// by block, each block a whole tile of rows blockCols long (swizzled within itself), and
/// further dims (ring slots) index whole 2-D tiles.
struct SharedTileLayout {
  std::vector<int64_t> shape;
  std::vector<int> order;
  int vec = 1;
  int perPhase = 1;
  int maxPhase = 1;
  int padElements = 0;
  int blockCols = 0;

  /// Plain row-major tile (last dim fastest), no swizzle or padding.
  static SharedTileLayout rowMajor(const std::vector<int64_t> &shape);

  /// Throws std::invalid_argument unless shape, order and parameters fit together: powers of
  /// two, order a permutation, vec * maxPhase <= row length (of a column block) when swizzled,
  /// not both swizzled and padded, not both blocked and padded.
  void verify() const;
  /// Element offset of the element at `coords` (one entry per tensor dim).
  int64_t offsetOf(const std::vector<int64_t> &coords) const;
  /// Elements the buffer needs, padding included.
  int64_t allocationSize() const;
  bool isLinear() const { return padElements == 0; }
  /// Elements of one stored row: blockCols when the rows are cut into blocks, else the row.
  int64_t storedRowLength() const;
  /// The layout from "offset" to dim0, dim1, ... (unpadded tiles only; throws otherwise).
  LinearLayout toLinearLayout() const;
  std::string str() const;
};

/// Shared-memory element offset at which each (register, lane, warp) of a register layout
/// stores or loads its element (block index 0).
struct SharedAccessTable {
  int numRegisters = 0;
  int numLanes = 0;
  int numWarps = 0;
  /// Indexed [(warp * numLanes + lane) * numRegisters + register].
  std::vector<int64_t> offsets;
  /// The offsets are linear over GF(2) in the index (offset(a ^ b) = offset(a) ^ offset(b)),
  /// as computeSharedOffsets makes them for an unpadded tile: measureSharedAccesses then counts
  /// from the offsets of the index bits instead of simulating every access.
  bool linear = false;

  int64_t offset(int reg, int lane, int warp) const {
    return offsets[(static_cast<int64_t>(warp) * numLanes + lane) * numRegisters + reg];
  }
};

/// The tensor coordinates of every (register, lane, warp) of a register layout (output dims
/// dim0, dim1, ...), in SharedAccessTable order. Computing them once lets a caller try many
/// tiles cheaply.
struct HeldElements {
  int numRegisters = 0;
  int numLanes = 0;
  int numWarps = 0;
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> coords;
};
HeldElements listHeldElements(const LinearLayout &registerLayout);

/// Works for every tile (padded too). The register layout's output dims must be the tile's
/// dims (dim0, dim1, ...) with the same extents.
SharedAccessTable computeSharedOffsets(const LinearLayout &registerLayout,
                                       const SharedTileLayout &tile);
SharedAccessTable computeSharedOffsets(const HeldElements &held, const SharedTileLayout &tile);
/// The same map as a linear layout (register, lane, warp, block) -> offset, for unpadded
/// tiles: codegen can emit it as shifts and XORs of the thread id.
LinearLayout sharedOffsetLayout(const LinearLayout &registerLayout, const SharedTileLayout &tile);

struct BankConflictOptions {
  int elemBytes = 4;
  /// Registers accessed together by one instruction (registers g*vectorWidth ... g*vectorWidth
  /// + vectorWidth - 1); elemBytes * vectorWidth may be at most 16 bytes.
  int vectorWidth = 1;
  /// Which warp of the table to simulate.
  int warp = 0;
};

/// Simulates one warp accessing shared memory (32 banks of 4 bytes): for each access (one per
/// register, or per group of vectorWidth registers), the extra wavefronts caused by lanes
/// touching different 4-byte words in the same bank; 0 means conflict-free. Lanes reading the
/// same word share it (broadcast). As on NVIDIA GPUs, accesses of 8 (16) bytes per lane are
/// served per half-warp (quarter-warp), so they cost 2 (4) wavefronts with no conflict.
std::vector<int> countBankConflicts(const SharedAccessTable &table,
                                    const BankConflictOptions &options = {});
/// Sum of countBankConflicts over all accesses of the warp.
int totalBankConflicts(const SharedAccessTable &table, const BankConflictOptions &options = {});

struct SharedAccessCost {
  /// Shared-memory cycles the warp's accesses take in all: the phases of each access plus
  /// its conflicts. The fair cost for comparing tiles whose accesses differ in width.
  int wavefronts = 0;
  /// Sum of countBankConflicts.
  int conflicts = 0;
};
/// The totals of countBankConflicts' simulation; for a `linear` table, computed from the
/// index bits (the same counts: tests/cpp/layout/shared_tile_layout_test.cpp).
SharedAccessCost measureSharedAccesses(const SharedAccessTable &table,
                                       const BankConflictOptions &options = {});

} // namespace tessera
