// Tests for shared-memory tiles and the bank-conflict simulator (cpp/layout/shared_tile_layout.h):
// swizzled tiles against their linear layouts, and conflict counts on textbook access
// patterns (row, column, strided, broadcast, wide accesses).
#include "layout/shared_tile_layout.h"
#include "layout_test_utils.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

namespace tessera {
namespace {

using layout_test::Rng;

SharedTileLayout tile2D(int64_t rows, int64_t columns, int vec, int perPhase, int maxPhase,
                        int pad = 0) {
  SharedTileLayout tile = SharedTileLayout::rowMajor({rows, columns});
  tile.vec = vec;
  tile.perPhase = perPhase;
  tile.maxPhase = maxPhase;
  tile.padElements = pad;
  tile.verify();
  return tile;
}

/// 32 x 32 f32 tile, one warp; lanes walk rows (column access) or columns (row access).
LinearLayout columnAccess() {
  return BlockedEncoding({1, 1}, {32, 1}, {1, 1}, {0, 1}).toLinearLayout({32, 32});
}
LinearLayout rowAccess() {
  return BlockedEncoding({1, 1}, {1, 32}, {1, 1}, {1, 0}).toLinearLayout({32, 32});
}

TEST(SharedMemoryTest, RowMajorOffsets) {
  SharedTileLayout tile = SharedTileLayout::rowMajor({4, 8, 16});
  EXPECT_EQ(tile.order, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(tile.offsetOf({1, 2, 3}), 1 * 128 + 2 * 16 + 3);
  EXPECT_EQ(tile.allocationSize(), 512);
  SharedTileLayout padded = tile2D(8, 32, 1, 1, 1, /*pad=*/4);
  EXPECT_EQ(padded.offsetOf({2, 5}), 2 * 36 + 5);
  EXPECT_EQ(padded.allocationSize(), 8 * 36);
  SharedTileLayout swizzled = tile2D(8, 32, 4, 2, 4);
  // Row 5: phase (5 / 2) % 4 = 2, so column chunk 1 (columns 4-7) moves to chunk 3.
  EXPECT_EQ(swizzled.offsetOf({5, 6}), 5 * 32 + 3 * 4 + 2);
}

TEST(SharedMemoryTest, SwizzledTilesAreLinear) {
  Rng rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    int rank = 2 + rng() % 2;
    SharedTileLayout tile;
    tile.shape = layout_test::randomShape(rng, rank, 5);
    tile.order = {0, 1, 2};
    tile.order.resize(rank);
    std::shuffle(tile.order.begin(), tile.order.end(), rng);
    int64_t rowLength = tile.shape[tile.order[0]];
    tile.vec =
        static_cast<int>(std::min<int64_t>(rowLength, layout_test::randomPowerOfTwo(rng, 3)));
    tile.maxPhase = static_cast<int>(
        std::max<int64_t>(1, rowLength / tile.vec / layout_test::randomPowerOfTwo(rng, 2)));
    tile.perPhase = layout_test::randomPowerOfTwo(rng, 2);
    SCOPED_TRACE(tile.str());
    LinearLayout layout = tile.toLinearLayout();
    ASSERT_TRUE(layout.isInvertible());
    bool matches = true;
    for (int32_t offset = 0; offset < tile.allocationSize(); ++offset) {
      std::vector<int64_t> coords;
      for (const auto &entry : layout.apply({{"offset", offset}}))
        coords.push_back(entry.second);
      matches &= tile.offsetOf(coords) == offset;
    }
    EXPECT_TRUE(matches);
  }
}

TEST(SharedMemoryTest, PaddedTilesAreInjectiveButNotLinear) {
  SharedTileLayout tile = tile2D(16, 16, 1, 1, 1, /*pad=*/3);
  std::set<int64_t> offsets;
  for (int64_t row = 0; row < 16; ++row)
    for (int64_t column = 0; column < 16; ++column)
      offsets.insert(tile.offsetOf({row, column}));
  EXPECT_EQ(offsets.size(), 256u);
  EXPECT_LT(*offsets.rbegin(), tile.allocationSize());
  EXPECT_THROW(tile.toLinearLayout(), std::invalid_argument);
}

TEST(SharedMemoryTest, OffsetTableMatchesOffsetLayout) {
  Rng rng(4);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int64_t> shape = layout_test::randomShape(rng, 2, 6);
    LinearLayout layout = layout_test::randomBlocked(rng, 2, 4)->toLinearLayout(shape);
    SharedTileLayout tile = SharedTileLayout::rowMajor(shape);
    tile.vec = static_cast<int>(std::min<int64_t>(shape[1], 2));
    tile.maxPhase = static_cast<int>(shape[1] / tile.vec);
    SharedAccessTable table = computeSharedOffsets(layout, tile);
    LinearLayout offsets = sharedOffsetLayout(layout, tile);
    bool matches = true;
    for (int warp = 0; warp < table.numWarps; ++warp)
      for (int lane = 0; lane < table.numLanes; ++lane)
        for (int reg = 0; reg < table.numRegisters; ++reg)
          matches &= offsets.apply({{"register", reg}, {"lane", lane}, {"warp", warp}})[0].second ==
                     table.offset(reg, lane, warp);
    EXPECT_TRUE(matches) << layout << " " << tile.str();
  }
}

// computeSharedOffsets builds an unpadded tile's table from one offset per index bit (XORs):
// every entry must still be offsetOf of the element it holds, for swizzled, column-blocked
// and 3-D tiles, and for padded ones (computed element by element).
TEST(SharedMemoryTest, OffsetTableIsOffsetOfEachElement) {
  Rng rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    int rank = 2 + static_cast<int>(rng() % 2);
    std::vector<int64_t> shape = layout_test::randomShape(rng, rank, 5);
    HeldElements held =
        listHeldElements(layout_test::randomBlocked(rng, rank, 4)->toLinearLayout(shape));
    SharedTileLayout tile = SharedTileLayout::rowMajor(shape);
    std::shuffle(tile.order.begin(), tile.order.end(), rng);
    int64_t rowLength = shape[tile.order[0]];
    switch (trial % 3) {
    case 0: // swizzled
      tile.vec =
          static_cast<int>(std::min<int64_t>(rowLength, layout_test::randomPowerOfTwo(rng, 3)));
      tile.maxPhase = static_cast<int>(rowLength / tile.vec);
      tile.perPhase = layout_test::randomPowerOfTwo(rng, 2);
      break;
    case 1: // column blocks, swizzled within each
      tile.blockCols = static_cast<int>(std::max<int64_t>(1, rowLength / 2));
      tile.vec = static_cast<int>(std::min<int64_t>(tile.blockCols, 2));
      tile.maxPhase = static_cast<int>(tile.blockCols / tile.vec);
      break;
    default: tile.padElements = 1 + static_cast<int>(rng() % 4); break;
    }
    SCOPED_TRACE(tile.str());
    tile.verify();
    SharedAccessTable table = computeSharedOffsets(held, tile);
    ASSERT_EQ(table.offsets.size(), held.coords.size());
    bool matches = true;
    for (size_t i = 0; i < held.coords.size(); ++i)
      matches &= table.offsets[i] == tile.offsetOf(held.coords[i]);
    EXPECT_TRUE(matches);
  }
}

// measureSharedAccesses counts a linear table's wavefronts from its index bits: the counts
// must be the simulator's, for any layout (broadcasts too), swizzle, element size and width.
TEST(SharedMemoryTest, LinearCountsMatchTheSimulation) {
  Rng rng(6);
  int compared = 0;
  for (int trial = 0; trial < 400; ++trial) {
    int rank = 1 + static_cast<int>(rng() % 2);
    std::vector<int64_t> shape = layout_test::randomShape(rng, rank, 7);
    LinearLayout layout = layout_test::randomBlocked(rng, rank, 4)->toLinearLayout(shape);
    SharedTileLayout tile = SharedTileLayout::rowMajor(shape);
    if (rank == 2) {
      int64_t rowLength = shape[tile.order[0]];
      tile.vec =
          static_cast<int>(std::min<int64_t>(rowLength, layout_test::randomPowerOfTwo(rng, 3)));
      tile.maxPhase = static_cast<int>(
          std::min<int64_t>(rowLength / tile.vec, layout_test::randomPowerOfTwo(rng, 3)));
      tile.perPhase = layout_test::randomPowerOfTwo(rng, 2);
    }
    SharedAccessTable table = computeSharedOffsets(layout, tile);
    ASSERT_TRUE(table.linear);
    SharedAccessTable simulated = table;
    simulated.linear = false;
    BankConflictOptions options;
    options.elemBytes = layout_test::randomPowerOfTwo(rng, 3);
    options.vectorWidth = std::min(layout_test::randomPowerOfTwo(rng, 3), 16 / options.elemBytes);
    options.warp = static_cast<int>(rng() % table.numWarps);
    if (table.numRegisters % options.vectorWidth != 0)
      continue;
    SCOPED_TRACE(layout.str() + " " + tile.str() + " bytes " + std::to_string(options.elemBytes) +
                 " width " + std::to_string(options.vectorWidth));
    SharedAccessCost fast = measureSharedAccesses(table, options);
    SharedAccessCost slow = measureSharedAccesses(simulated, options);
    EXPECT_EQ(fast.wavefronts, slow.wavefronts);
    EXPECT_EQ(fast.conflicts, slow.conflicts);
    ++compared;
  }
  EXPECT_GT(compared, 200);
}

TEST(SharedMemoryTest, ColumnAccessConflictsUnlessSwizzledOrPadded) {
  SharedAccessTable plain = computeSharedOffsets(columnAccess(), tile2D(32, 32, 1, 1, 1));
  std::vector<int> perRegister = countBankConflicts(plain);
  ASSERT_EQ(perRegister.size(), 32u);
  for (int conflicts : perRegister)
    EXPECT_EQ(conflicts, 31); // all 32 lanes hit the same bank
  EXPECT_EQ(totalBankConflicts(computeSharedOffsets(columnAccess(), tile2D(32, 32, 1, 1, 32))), 0);
  EXPECT_EQ(totalBankConflicts(computeSharedOffsets(columnAccess(), tile2D(32, 32, 1, 1, 1, 1))),
            0);
  // A half-strength swizzle leaves 2-way conflicts.
  for (int conflicts :
       countBankConflicts(computeSharedOffsets(columnAccess(), tile2D(32, 32, 1, 2, 16))))
    EXPECT_EQ(conflicts, 1);
  EXPECT_EQ(totalBankConflicts(computeSharedOffsets(rowAccess(), tile2D(32, 32, 1, 1, 1))), 0);
}

TEST(SharedMemoryTest, StridedBroadcastAndWideAccesses) {
  SharedTileLayout flat = SharedTileLayout::rowMajor({64});
  // Lane l reads element 2l: lanes l and l + 16 share a bank.
  LinearLayout strideTwo({{"register", {{1}}}, {"lane", {{2}, {4}, {8}, {16}, {32}}}}, {"dim0"});
  SharedAccessTable strided = computeSharedOffsets(strideTwo, flat);
  EXPECT_EQ(countBankConflicts(strided), (std::vector<int>{1, 1}));
  // Reading both registers as one 8-byte access is served per half-warp, conflict-free.
  EXPECT_EQ(countBankConflicts(strided, {4, 2, 0}), (std::vector<int>{0}));
  // The same pattern on 2-byte elements: each lane reads its own word.
  EXPECT_EQ(countBankConflicts(strided, {2, 1, 0}), (std::vector<int>{0, 0}));
  // 8-byte elements at a 16-byte stride: each half-warp phase still has 2-way conflicts.
  EXPECT_EQ(countBankConflicts(strided, {8, 1, 0}), (std::vector<int>{2, 2}));
  // 8-byte elements, one per lane, consecutive: two phases, no conflict.
  LinearLayout consecutive({{"register", {{32}}}, {"lane", {{1}, {2}, {4}, {8}, {16}}}}, {"dim0"});
  EXPECT_EQ(countBankConflicts(computeSharedOffsets(consecutive, flat), {8, 1, 0}),
            (std::vector<int>{0, 0}));

  // Every lane reads the same element: a broadcast, not a conflict.
  LinearLayout broadcast({{"register", {{1}, {2}}}, {"lane", {{0}, {0}, {0}, {0}, {0}}}}, {"dim0"});
  EXPECT_EQ(totalBankConflicts(computeSharedOffsets(broadcast, SharedTileLayout::rowMajor({4}))),
            0);

  // The default [1024] f32 layout stores 16 bytes per lane: quarter-warp phases, no conflict.
  LinearLayout vectorized = defaultBlocked({1024}, 4)->toLinearLayout({1024});
  SharedAccessTable table = computeSharedOffsets(vectorized, SharedTileLayout::rowMajor({1024}));
  EXPECT_EQ(totalBankConflicts(table, {4, 4, 3}), 0);
  // Scalar accesses of the same layout: lanes 8 apart collide (stride 4 words).
  EXPECT_EQ(countBankConflicts(table, {4, 1, 0})[0], 3);
  EXPECT_THROW(countBankConflicts(table, {4, 8, 0}), std::invalid_argument); // 32 bytes
  EXPECT_THROW(countBankConflicts(table, {4, 1, 4}), std::invalid_argument); // no warp 4
}

TEST(SharedMemoryTest, VerifyRejectsBadTiles) {
  SharedTileLayout tile = SharedTileLayout::rowMajor({8, 8});
  tile.vec = 4;
  tile.maxPhase = 4; // 4 * 4 > 8 columns
  EXPECT_THROW(tile.verify(), std::invalid_argument);
  tile.maxPhase = 2;
  tile.padElements = 1; // padding and swizzle together
  EXPECT_THROW(tile.verify(), std::invalid_argument);
  SharedTileLayout bad = SharedTileLayout::rowMajor({8, 6});
  EXPECT_THROW(bad.verify(), std::invalid_argument);
  EXPECT_THROW(computeSharedOffsets(rowAccess(), SharedTileLayout::rowMajor({32, 64})),
               std::invalid_argument);
}

} // namespace
} // namespace tessera
