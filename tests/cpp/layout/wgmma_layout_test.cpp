// Tests for the wgmma (sm_90a) layouts: #mma version 3 (cpp/layout/mma.h) element by element
// against the PTX ISA's "wgmma .m64nNk16 register fragment D" formula, its A operand
// (dot_operand.h) against the accumulator and the mma.sync A fragment, SharedTileLayout's
// column blocks (shared_tile_layout.h) and wgmmaSharedEncoding's placements (swizzled_shared.h)
// against the 32/64/128-byte swizzle modes' address-bit formulas, and the text forms.
#include "layout/dot_operand.h"
#include "layout/encoding.h"
#include "layout/linear_layout.h"
#include "layout/mma.h"
#include "layout/swizzled_shared.h"
#include "layout/shared_tile_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace tessera {
namespace {

using Coords = std::pair<int64_t, int64_t>;

Coords at(const LinearLayout &layout, int reg, int lane, int warp) {
  LinearLayout::DimValues out =
      layout.apply({{kRegisterDim, reg}, {kLaneDim, lane}, {kWarpDim, warp}});
  return {out[0].second, out[1].second};
}

std::shared_ptr<const MmaEncoding> wgmma(int warpsM, int warpsN, int n) {
  return std::make_shared<const MmaEncoding>(3, std::vector<int>{warpsM, warpsN},
                                             std::vector<int>{16, n});
}

std::shared_ptr<const MmaEncoding> mmaSync(int warpsM, int warpsN) {
  return std::make_shared<const MmaEncoding>(2, std::vector<int>{warpsM, warpsN});
}

struct V3Case {
  int warpsM, warpsN, n;
  int64_t rows, cols;
};

// Warpgroups along M and N, every N from 8 to 256, and tiles with repetitions along both.
const V3Case kV3Cases[] = {
    {4, 1, 8, 64, 8},     {4, 1, 16, 64, 16},   {4, 1, 64, 64, 64},  {4, 1, 128, 128, 128},
    {4, 1, 256, 64, 256}, {4, 2, 64, 64, 128},  {4, 2, 32, 128, 128}, {8, 1, 128, 128, 128},
    {8, 1, 64, 256, 256}, {8, 2, 128, 256, 256}, {16, 1, 32, 256, 64}, {4, 4, 16, 64, 64},
};

TEST(WgmmaLayoutTest, AccumulatorMatchesPtxFragmentD) {
  for (const V3Case &c : kV3Cases) {
    SCOPED_TRACE("warps [" + std::to_string(c.warpsM) + ", " + std::to_string(c.warpsN) +
                 "], n " + std::to_string(c.n) + ", shape [" + std::to_string(c.rows) + ", " +
                 std::to_string(c.cols) + "]");
    LinearLayout layout = wgmma(c.warpsM, c.warpsN, c.n)->toLinearLayout({c.rows, c.cols});
    ASSERT_TRUE(layout.isInvertible());
    // m64nN: N / 2 f32 per thread and instruction; the CTA tile [16 wm, N wn] repeats along
    // N, then M.
    int perInstr = c.n / 2;
    int64_t repsN = c.cols / (int64_t(c.n) * c.warpsN);
    ASSERT_EQ(layout.getInDimSize(kRegisterDim),
              perInstr * repsN * (c.rows / (16 * int64_t(c.warpsM))));
    int groupsM = c.warpsM / 4;
    bool allMatch = true;
    for (int warp = 0; warp < c.warpsM * c.warpsN; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        for (int reg = 0; reg < layout.getInDimSize(kRegisterDim); ++reg) {
          int i = reg % perInstr, rep = reg / perInstr;
          int64_t repN = rep % repsN, repM = rep / repsN;
          int w4 = warp % 4, group = warp / 4;
          int64_t groupM = group % groupsM, groupN = group / groupsM;
          int64_t row = repM * 16 * c.warpsM + 64 * groupM + 16 * w4 + lane / 4 +
                        8 * ((i / 2) % 2);
          int64_t col = repN * int64_t(c.n) * c.warpsN + groupN * c.n + 8 * (i / 4) +
                        2 * (lane % 4) + i % 2;
          if (at(layout, reg, lane, warp) != Coords(row, col)) {
            allMatch = false;
            ADD_FAILURE() << "warp " << warp << " lane " << lane << " reg " << reg << ": ("
                          << at(layout, reg, lane, warp).first << ", "
                          << at(layout, reg, lane, warp).second << ") != (" << row << ", "
                          << col << ")";
          }
          if (!allMatch)
            return;
        }
  }
}

TEST(WgmmaLayoutTest, OneWarpColumnEqualsMmaSync) {
  // With warps only along M both number the rows the same way and step n by 8 in registers.
  for (int warpsM : {4, 8, 16})
    for (int n : {8, 16, 64, 256})
      for (std::vector<int64_t> shape : {std::vector<int64_t>{256, 256},
                                         std::vector<int64_t>{512, 256},
                                         std::vector<int64_t>{256, 512}}) {
        LinearLayout v3 = wgmma(warpsM, 1, n)->toLinearLayout(shape);
        LinearLayout v2 = mmaSync(warpsM, 1)->toLinearLayout(shape);
        EXPECT_TRUE(v3 == v2) << "warps [" << warpsM << ", 1], n " << n << ", shape ["
                              << shape[0] << ", " << shape[1] << "]";
      }
  // With warps along N they differ: a v3 warp holds N contiguous columns, a v2 warp 8.
  EXPECT_FALSE(wgmma(4, 2, 64)->toLinearLayout({64, 128}) ==
               mmaSync(4, 2)->toLinearLayout({64, 128}));
}

TEST(WgmmaLayoutTest, InvalidParametersThrow) {
  using Warps = std::vector<int>;
  auto make = [](int version, Warps warps, Warps instr) {
    return MmaEncoding(version, std::move(warps), std::move(instr));
  };
  EXPECT_NO_THROW(make(3, {4, 1}, {16, 8}));
  EXPECT_NO_THROW(make(3, {8, 2}, {16, 256}));
  EXPECT_THROW(make(3, {2, 2}, {16, 64}), std::invalid_argument); // not a warpgroup along M
  EXPECT_THROW(make(3, {1, 4}, {16, 64}), std::invalid_argument);
  EXPECT_THROW(make(3, {12, 1}, {16, 64}), std::invalid_argument); // not a power of two
  EXPECT_THROW(make(3, {4, 1}, {16, 4}), std::invalid_argument);   // N < 8
  EXPECT_THROW(make(3, {4, 1}, {16, 512}), std::invalid_argument); // N > 256
  EXPECT_THROW(make(3, {4, 1}, {16, 24}), std::invalid_argument);  // N not a power of two
  EXPECT_THROW(make(3, {4, 1}, {8, 64}), std::invalid_argument);   // rows per warp not 16
  EXPECT_THROW(make(3, {4, 1}, {16}), std::invalid_argument);
  EXPECT_THROW(make(3, {4, 1}, {16, 64, 16}), std::invalid_argument);
  EXPECT_THROW(make(4, {4, 1}, {16, 64}), std::invalid_argument);
  EXPECT_THROW(make(2, {4, 1}, {16, 64}), std::invalid_argument); // v2 is m16n8 only
}

TEST(WgmmaLayoutTest, OperandAIsTheAccumulatorLayoutAndTheMmaSyncFragment) {
  for (int warpsM : {4, 8})
    for (int64_t k : {int64_t(16), int64_t(64), int64_t(128)})
      for (int64_t rows : {16 * int64_t(warpsM), int64_t(256)}) {
        SCOPED_TRACE("warps [" + std::to_string(warpsM) + ", 1], A [" + std::to_string(rows) +
                     ", " + std::to_string(k) + "]");
        LinearLayout a = DotOperandEncoding(0, wgmma(warpsM, 1, 64), 2).toLinearLayout({rows, k});
        // Chained dots: a [M, K] accumulator (its own dot's N = K, up to 256) casts to f16
        // and feeds the next dot as A without moving between threads.
        for (int n = 16; n <= k; n *= 2)
          EXPECT_TRUE(a == wgmma(warpsM, 1, n)->toLinearLayout({rows, k})) << "n " << n;
        // wgmma's A from registers is the m16n8k16 A fragment of each warp's 16 rows.
        EXPECT_TRUE(a == DotOperandEncoding(0, mmaSync(warpsM, 1), 2).toLinearLayout({rows, k}));
        bool allMatch = true;
        for (int warp = 0; warp < warpsM && allMatch; ++warp)
          for (int lane = 0; lane < 32; ++lane)
            for (int reg = 0; reg < a.getInDimSize(kRegisterDim); ++reg) {
              int i = reg % 8;
              auto [m, kk] = at(a, reg, lane, warp);
              int64_t row = lane / 4 + ((i < 2 || (i >= 4 && i < 6)) ? 0 : 8);
              int64_t col = 2 * (lane % 4) + (i & 1) + (i >= 4 ? 8 : 0);
              bool ok = m % 16 == row && kk % 16 == col && (m / 16) % warpsM == warp;
              if (!ok)
                ADD_FAILURE() << "warp " << warp << " lane " << lane << " a" << reg << ": ("
                              << m << ", " << kk << ")";
              allMatch &= ok;
            }
      }
}

TEST(WgmmaLayoutTest, OperandsCoverTheirWarpgroupsAccumulator) {
  // Each warp names, in A, every row and, in B, every column of its accumulator elements.
  auto parent = wgmma(8, 2, 64);
  LinearLayout c = parent->toLinearLayout({256, 256});
  LinearLayout a = DotOperandEncoding(0, parent, 2).toLinearLayout({256, 32});
  LinearLayout b = DotOperandEncoding(1, parent, 2).toLinearLayout({32, 256});
  EXPECT_TRUE(a.isSurjective());
  EXPECT_TRUE(b.isSurjective());
  for (int warp = 0; warp < 16; ++warp) {
    std::set<int64_t> rowsA, colsB, rowsC, colsC;
    for (int lane = 0; lane < 32; ++lane) {
      for (int reg = 0; reg < a.getInDimSize(kRegisterDim); ++reg)
        rowsA.insert(at(a, reg, lane, warp).first);
      for (int reg = 0; reg < b.getInDimSize(kRegisterDim); ++reg)
        colsB.insert(at(b, reg, lane, warp).second);
      for (int reg = 0; reg < c.getInDimSize(kRegisterDim); ++reg) {
        rowsC.insert(at(c, reg, lane, warp).first);
        colsC.insert(at(c, reg, lane, warp).second);
      }
    }
    EXPECT_EQ(rowsA, rowsC) << "warp " << warp;
    EXPECT_EQ(colsB, colsC) << "warp " << warp;
    // 256 / 128 repetitions of 16 rows; 2 repetitions of N = 64 columns at (warp / 8) * 64.
    EXPECT_EQ(rowsC.size(), 32u);
    EXPECT_EQ(colsC.size(), 128u);
    EXPECT_EQ(*colsC.begin(), (warp / 8) * 64);
  }
}

// ---- SharedTileLayout column blocks -------------------------------------------------------

SharedTileLayout blockedTile(std::vector<int64_t> shape, std::vector<int> order, int vec,
                             int perPhase, int maxPhase, int blockCols) {
  SharedTileLayout tile;
  tile.shape = std::move(shape);
  tile.order = std::move(order);
  tile.vec = vec;
  tile.perPhase = perPhase;
  tile.maxPhase = maxPhase;
  tile.blockCols = blockCols;
  tile.verify();
  return tile;
}

/// Hand formula: the 2-D tile (rows along order[0]) is stored block by block of `blockCols`
/// columns, each block rows x blockCols with chunk c of row r at c ^ (r / perPhase % maxPhase);
/// outer dims index whole 2-D tiles.
int64_t expectedOffset(const SharedTileLayout &tile, const std::vector<int64_t> &coords) {
  int64_t cols = tile.shape[tile.order[0]], rows = tile.shape[tile.order[1]];
  int64_t width = tile.blockCols > 0 ? std::min<int64_t>(tile.blockCols, cols) : cols;
  int64_t col = coords[tile.order[0]], row = coords[tile.order[1]];
  int64_t chunk = ((col % width) / tile.vec) ^ ((row / tile.perPhase) % tile.maxPhase);
  int64_t inTile = (col / width) * rows * width + row * width + chunk * tile.vec + col % tile.vec;
  int64_t outer = 0;
  for (size_t i = tile.order.size(); i-- > 2;)
    outer = outer * tile.shape[tile.order[i]] + coords[tile.order[i]];
  return outer * rows * cols + inTile;
}

std::vector<std::vector<int64_t>> allCoords(const std::vector<int64_t> &shape) {
  std::vector<std::vector<int64_t>> result{{}};
  for (int64_t extent : shape) {
    std::vector<std::vector<int64_t>> grown;
    for (const auto &prefix : result)
      for (int64_t value = 0; value < extent; ++value) {
        grown.push_back(prefix);
        grown.back().push_back(value);
      }
    result = std::move(grown);
  }
  return result;
}

void checkTile(const SharedTileLayout &tile) {
  SCOPED_TRACE(tile.str());
  int64_t elements = 1;
  for (int64_t extent : tile.shape)
    elements *= extent;
  EXPECT_EQ(tile.allocationSize(), elements); // blocks only reorder the rows
  std::set<int64_t> offsets;
  bool matches = true;
  for (const auto &coords : allCoords(tile.shape)) {
    matches &= tile.offsetOf(coords) == expectedOffset(tile, coords);
    offsets.insert(tile.offsetOf(coords));
  }
  EXPECT_TRUE(matches);
  EXPECT_EQ(int64_t(offsets.size()), elements);
  EXPECT_EQ(*offsets.rbegin(), elements - 1);
  LinearLayout layout = tile.toLinearLayout();
  ASSERT_TRUE(layout.isInvertible());
  bool inverse = true;
  for (int32_t offset = 0; offset < elements; ++offset) {
    std::vector<int64_t> coords;
    for (const auto &entry : layout.apply({{kOffsetDim, offset}}))
      coords.push_back(entry.second);
    inverse &= tile.offsetOf(coords) == offset;
  }
  EXPECT_TRUE(inverse);
}

TEST(WgmmaSharedTest, ColumnBlocksMatchHandFormula) {
  checkTile(blockedTile({32, 128}, {1, 0}, 8, 1, 8, 64));   // B [32, 128] fp16, N-major
  checkTile(blockedTile({128, 32}, {0, 1}, 8, 1, 8, 64));   // the same, column-major dims
  checkTile(blockedTile({16, 256}, {1, 0}, 8, 1, 8, 64));   // four blocks
  checkTile(blockedTile({4, 32, 128}, {2, 1, 0}, 8, 1, 8, 64)); // a 4-slot ring
  checkTile(blockedTile({2, 64, 64}, {1, 2, 0}, 4, 1, 8, 32)); // ring, rows along dim 1
  checkTile(blockedTile({16, 64}, {1, 0}, 4, 2, 4, 16));    // a narrower swizzle per block
  checkTile(blockedTile({8, 64}, {1, 0}, 1, 1, 1, 16));     // blocks without a swizzle
  // In block 1 of B [32, 128] (columns 64-127), row 3, column 64 + 9 (chunk 1 ^ 3 = 2):
  // after block 0's 32 rows of 64.
  EXPECT_EQ(blockedTile({32, 128}, {1, 0}, 8, 1, 8, 64).offsetOf({3, 73}),
            32 * 64 + 3 * 64 + 2 * 8 + 1);
  // blockCols at least the row length changes nothing.
  SharedTileLayout wide = blockedTile({16, 64}, {1, 0}, 8, 1, 8, 64);
  SharedTileLayout plain = blockedTile({16, 64}, {1, 0}, 8, 1, 8, 0);
  EXPECT_EQ(wide.storedRowLength(), 64);
  for (const auto &coords : allCoords(wide.shape))
    ASSERT_EQ(wide.offsetOf(coords), plain.offsetOf(coords));
  EXPECT_EQ(blockedTile({16, 256}, {1, 0}, 8, 1, 8, 64).storedRowLength(), 64);
}

TEST(WgmmaSharedTest, InvalidColumnBlocksThrow) {
  EXPECT_THROW(blockedTile({32, 128}, {1, 0}, 8, 1, 8, 48), std::invalid_argument);
  EXPECT_THROW(blockedTile({32, 128}, {1, 0}, 8, 1, 8, -64), std::invalid_argument);
  // The swizzle must fit in a block: 8 chunks of 8 exceed 32 columns.
  EXPECT_NO_THROW(blockedTile({32, 128}, {1, 0}, 8, 1, 8, 0));
  EXPECT_THROW(blockedTile({32, 128}, {1, 0}, 8, 1, 8, 32), std::invalid_argument);
  SharedTileLayout padded = SharedTileLayout::rowMajor({32, 128});
  padded.padElements = 8;
  EXPECT_NO_THROW(padded.verify());
  padded.blockCols = 64;
  EXPECT_THROW(padded.verify(), std::invalid_argument);
  EXPECT_THROW(SharedEncoding(8, 1, 8, {1, 0}, 24), std::invalid_argument);
  EXPECT_THROW(SharedEncoding(8, 1, 8, {1, 0}, -8), std::invalid_argument);
}

// ---- wgmmaSharedEncoding: the PTX swizzle modes ---------------------------------------------

/// Byte address of the element under the PTX swizzle of `swizzleBytes` (32, 64, 128), from
/// the unswizzled byte offset: 16-byte chunk bits [4, 4 + log2(swizzle / 16)) XOR bits from 7
/// up, within each 1024-byte atom (the 128-byte mode: bits 4-6 ^= bits 7-9).
int64_t swizzledAddress(int64_t linear, int swizzleBytes) {
  int bits = __builtin_ctz(swizzleBytes / 16); // 1, 2, 3
  int64_t mask = (int64_t(1) << bits) - 1;
  return linear ^ (((linear >> 7) & mask) << 4);
}

TEST(WgmmaSharedTest, EncodingsFollowPtxSwizzleModes) {
  for (int rowBytes : {32, 64, 128, 256})
    for (int64_t rows : {8, 64, 128})
      for (std::vector<int> order : {std::vector<int>{1, 0}, std::vector<int>{0, 1}}) {
        const int elemBytes = 2; // fp16 and bf16
        int64_t cols = rowBytes / elemBytes;
        std::vector<int64_t> shape(2);
        shape[order[0]] = cols;
        shape[order[1]] = rows;
        SCOPED_TRACE(std::to_string(rowBytes) + "-byte rows, " + std::to_string(rows) +
                     " rows, order [" + std::to_string(order[0]) + ", " +
                     std::to_string(order[1]) + "]");
        auto encoding = wgmmaSharedEncoding(shape, order, elemBytes);
        ASSERT_TRUE(encoding);
        SharedTileLayout tile = encoding->tileFor(shape);
        int swizzle = std::min(rowBytes, 128);
        EXPECT_EQ(wgmmaSwizzleBytes(tile, elemBytes), swizzle);
        EXPECT_EQ(tile.allocationSize(), rows * cols);
        bool matches = true;
        for (int64_t row = 0; row < rows; ++row)
          for (int64_t col = 0; col < cols; ++col) {
            std::vector<int64_t> coords(2);
            coords[order[0]] = col;
            coords[order[1]] = row;
            // 128-byte column blocks, each rows x 128 bytes, one after another.
            int64_t blockBytes = std::min(rowBytes, 128);
            int64_t linear = (col * elemBytes / blockBytes) * rows * blockBytes +
                             row * blockBytes + (col * elemBytes) % blockBytes;
            int64_t expected = swizzledAddress(linear, swizzle) / elemBytes;
            if (tile.offsetOf(coords) != expected && matches) {
              matches = false;
              ADD_FAILURE() << "(" << row << ", " << col << "): " << tile.offsetOf(coords)
                            << " != " << expected;
            }
          }
        // A ring of such tiles: each slot a whole tile, the same pattern (1 KiB multiples).
        SharedTileLayout ring = withRingDim(*encoding)->tileFor({4, shape[0], shape[1]});
        EXPECT_EQ(ring.offsetOf({2, shape[0] - 1, shape[1] - 1}),
                  2 * rows * cols + tile.offsetOf({shape[0] - 1, shape[1] - 1}));
      }
  // Rows under 32 bytes fit no swizzled mode.
  EXPECT_EQ(wgmmaSharedEncoding({64, 8}, {1, 0}, 2), nullptr);
  EXPECT_EQ(wgmmaSharedEncoding({8, 64}, {0, 1}, 2), nullptr);
  EXPECT_NE(wgmmaSharedEncoding({64, 16}, {1, 0}, 2), nullptr);
  EXPECT_EQ(wgmmaSharedEncoding({32, 128}, {1, 0}, 2)->str(),
            "#shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0], blockCols = 64}>");
  EXPECT_EQ(wgmmaSharedEncoding({64, 32}, {1, 0}, 2)->str(),
            "#shared<{vec = 8, perPhase = 2, maxPhase = 4, order = [1, 0]}>");
}

TEST(WgmmaSharedTest, SwizzleBytesRejectOtherPlacements) {
  auto tile = [](std::vector<int64_t> shape, int vec, int perPhase, int maxPhase, int blockCols,
                 int pad = 0) {
    SharedTileLayout out = SharedTileLayout::rowMajor(std::move(shape));
    out.vec = vec;
    out.perPhase = perPhase;
    out.maxPhase = maxPhase;
    out.blockCols = blockCols;
    out.padElements = pad;
    out.verify();
    return out;
  };
  EXPECT_EQ(wgmmaSwizzleBytes(tile({64, 64}, 8, 1, 8, 0), 2), 128);
  EXPECT_EQ(wgmmaSwizzleBytes(tile({64, 32}, 8, 2, 4, 0), 2), 64);
  EXPECT_EQ(wgmmaSwizzleBytes(tile({64, 16}, 8, 4, 2, 0), 2), 32);
  EXPECT_EQ(wgmmaSwizzleBytes(tile({64, 128}, 8, 1, 8, 64), 2), 128);
  EXPECT_EQ(wgmmaSwizzleBytes(tile({64, 128}, 8, 1, 8, 0), 2), 0);  // 256-byte rows, no blocks
  EXPECT_EQ(wgmmaSwizzleBytes(tile({64, 64}, 4, 1, 8, 0), 2), 0);   // 8-byte chunks
  EXPECT_EQ(wgmmaSwizzleBytes(tile({64, 64}, 8, 2, 4, 0), 2), 0);   // half the 128B pattern
  EXPECT_EQ(wgmmaSwizzleBytes(tile({64, 64}, 1, 1, 1, 0), 2), 0);   // not swizzled
  EXPECT_EQ(wgmmaSwizzleBytes(tile({64, 64}, 1, 1, 1, 0, 8), 2), 0); // padded
  EXPECT_EQ(wgmmaSwizzleBytes(tile({64, 32}, 8, 4, 2, 16), 2), 0);  // 32-byte blocks
  EXPECT_EQ(wgmmaSwizzleBytes(tile({2, 64, 64}, 8, 1, 8, 0), 2), 0); // a whole ring
}

TEST(WgmmaLayoutTest, TextFormsRoundTrip) {
  auto parent = wgmma(8, 2, 128);
  EXPECT_EQ(parent->str(), "#mma<{version = 3, warpsPerCTA = [8, 2], instrShape = [16, 128]}>");
  auto a = std::make_shared<const DotOperandEncoding>(0, parent, 2);
  auto blocked = std::make_shared<const SharedEncoding>(8, 1, 8, std::vector<int>{1, 0}, 64);
  EXPECT_EQ(blocked->str(),
            "#shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0], blockCols = 64}>");
  auto ring = withRingDim(*blocked);
  for (const EncodingPtr &encoding :
       {EncodingPtr(parent), EncodingPtr(a), EncodingPtr(blocked), EncodingPtr(ring)}) {
    EncodingPtr parsed = parseEncoding(encoding->str());
    EXPECT_TRUE(parsed->equals(*encoding)) << encoding->str();
    EXPECT_EQ(parsed->str(), encoding->str());
  }
  auto parsedBlocked = std::dynamic_pointer_cast<const SharedEncoding>(parseEncoding(
      "#shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0], blockCols = 64}>"));
  ASSERT_TRUE(parsedBlocked);
  EXPECT_EQ(parsedBlocked->getBlockCols(), 64);
  // blockCols is part of the encoding's identity; its absence means 0.
  EncodingPtr unblocked =
      parseEncoding("#shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0]}>");
  EXPECT_FALSE(unblocked->equals(*blocked));
  EXPECT_EQ(std::dynamic_pointer_cast<const SharedEncoding>(unblocked)->getBlockCols(), 0);
  auto parsedMma = std::dynamic_pointer_cast<const MmaEncoding>(
      parseEncoding("#mma<{version = 3, warpsPerCTA = [4, 1], instrShape = [16, 256]}>"));
  ASSERT_TRUE(parsedMma);
  EXPECT_TRUE(parsedMma->isWgmma());
  EXPECT_EQ(parsedMma->getInstrShape(), (std::vector<int>{16, 256}));
  EXPECT_FALSE(parsedMma->equals(*wgmma(4, 1, 128)));
  EXPECT_TRUE(isWgmmaOperand(parseEncoding(a->str()).get()));
  EXPECT_FALSE(
      isWgmmaOperand(parseEncoding(DotOperandEncoding(0, mmaSync(4, 1), 2).str()).get()));
  EXPECT_FALSE(isWgmmaOperand(parent.get()));
  EXPECT_THROW(parseEncoding("#mma<{version = 3, warpsPerCTA = [4, 1], instrShape = [16, 12]}>"),
               std::runtime_error);
  EXPECT_THROW(parseEncoding("#shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0], "
                             "blockCols = 48}>"),
               std::runtime_error);
}

} // namespace
} // namespace tessera
