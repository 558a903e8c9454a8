// Tests for BlockedEncoding and defaultBlocked (cpp/layout/blocked.h): fixed cases whose
// expected layouts match Triton's #ttg.blocked, and apply() against a direct computation of
// the blocked mapping for many random shapes and parameters.
#include "layout/blocked.h"
#include "layout_test_utils.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tessera {
namespace {

using layout_test::Rng;

LinearLayout blockedLayout(std::vector<int> sizePerThread, std::vector<int> threadsPerWarp,
                           std::vector<int> warpsPerCTA, std::vector<int> order,
                           const std::vector<int64_t> &shape) {
  return BlockedEncoding(sizePerThread, threadsPerWarp, warpsPerCTA, order).toLinearLayout(shape);
}

TEST(BlockedEncodingTest, ExactTile) {
  EXPECT_EQ(
      blockedLayout({1}, {4}, {4}, {0}, {16}),
      LinearLayout({{"register", {}}, {"lane", {{1}, {2}}}, {"warp", {{4}, {8}}}, {"block", {}}},
                   {"dim0"}));
}

TEST(BlockedEncodingTest, ShapeLargerThanTileAddsRegisters) {
  EXPECT_EQ(blockedLayout({1}, {4}, {4}, {0}, {128}),
            LinearLayout({{"register", {{16}, {32}, {64}}},
                          {"lane", {{1}, {2}}},
                          {"warp", {{4}, {8}}},
                          {"block", {}}},
                         {"dim0"}));
  EXPECT_EQ(blockedLayout({2}, {4}, {1}, {0}, {32}),
            LinearLayout(
                {{"register", {{1}, {8}, {16}}}, {"lane", {{2}, {4}}}, {"warp", {}}, {"block", {}}},
                {"dim0"}));
}

TEST(BlockedEncodingTest, ShapeSmallerThanTileBroadcasts) {
  EXPECT_EQ(
      blockedLayout({4}, {4}, {4}, {0}, {8}),
      LinearLayout(
          {{"register", {{1}, {2}}}, {"lane", {{4}, {0}}}, {"warp", {{0}, {0}}}, {"block", {}}},
          {"dim0"}));
  // Registers past the extent are zero too: the thread holds duplicates, as in Triton.
  EXPECT_EQ(blockedLayout({1, 1, 1, 4}, {2, 1, 1, 16}, {1, 2, 4, 1}, {3, 0, 1, 2}, {2, 1, 1, 1}),
            LinearLayout(
                {{"register", {{0, 0, 0, 0}, {0, 0, 0, 0}}},
                 {"lane", {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {1, 0, 0, 0}}},
                 {"warp", {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}},
                 {"block", {}}},
                {"dim0", "dim1", "dim2", "dim3"}));
}

TEST(BlockedEncodingTest, TwoDimensionalOrders) {
  EXPECT_EQ(blockedLayout({1, 1}, {32, 1}, {1, 8}, {0, 1}, {1, 64}),
            LinearLayout({{"register", {{0, 8}, {0, 16}, {0, 32}}},
                          {"lane", {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}}},
                          {"warp", {{0, 1}, {0, 2}, {0, 4}}},
                          {"block", {}}},
                         {"dim0", "dim1"}));
  // Row-major [64, 64] f32: 4-wide vectors along dim1, wrapping rows into registers.
  EXPECT_EQ(blockedLayout({1, 4}, {2, 16}, {4, 1}, {1, 0}, {64, 64}),
            LinearLayout({{"register", {{0, 1}, {0, 2}, {8, 0}, {16, 0}, {32, 0}}},
                          {"lane", {{0, 4}, {0, 8}, {0, 16}, {0, 32}, {1, 0}}},
                          {"warp", {{2, 0}, {4, 0}}},
                          {"block", {}}},
                         {"dim0", "dim1"}));
}

/// The blocked mapping computed directly: split each hardware index into per-dim coordinates
/// (fastest dim in `order` first), place them at the thread's, warp's and repetition's
/// offsets, and wrap around extents smaller than the tile.
std::vector<int64_t> directBlockedCoords(const BlockedEncoding &encoding,
                                         const std::vector<int64_t> &shape, int reg, int lane,
                                         int warp) {
  int rank = encoding.rank();
  const auto &order = encoding.getOrder();
  std::vector<int64_t> tile = encoding.getShapePerCTATile();
  auto split = [&](int64_t index, const std::vector<int64_t> &extents) {
    std::vector<int64_t> coords(rank);
    for (int axis : order) {
      coords[axis] = index % extents[axis];
      index /= extents[axis];
    }
    return coords;
  };
  auto widen = [](const std::vector<int> &values) {
    return std::vector<int64_t>(values.begin(), values.end());
  };
  std::vector<int64_t> sizePerThread = widen(encoding.getSizePerThread());
  std::vector<int64_t> repeats(rank);
  int64_t registersPerRepeat = 1;
  for (int axis = 0; axis < rank; ++axis) {
    repeats[axis] = std::max<int64_t>(1, shape[axis] / tile[axis]);
    registersPerRepeat *= sizePerThread[axis];
  }
  std::vector<int64_t> inThread = split(reg % registersPerRepeat, sizePerThread);
  std::vector<int64_t> repeat = split(reg / registersPerRepeat, repeats);
  std::vector<int64_t> laneCoords = split(lane, widen(encoding.getThreadsPerWarp()));
  std::vector<int64_t> warpCoords = split(warp, widen(encoding.getWarpsPerCTA()));
  std::vector<int64_t> coords(rank);
  for (int axis = 0; axis < rank; ++axis) {
    int64_t perWarp = sizePerThread[axis] * encoding.getThreadsPerWarp()[axis];
    coords[axis] = (repeat[axis] * tile[axis] + warpCoords[axis] * perWarp +
                    laneCoords[axis] * sizePerThread[axis] + inThread[axis]) %
                   shape[axis];
  }
  return coords;
}

TEST(BlockedEncodingTest, MatchesDirectComputation) {
  Rng rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    int rank = 1 + rng() % 3;
    int numWarps = layout_test::randomPowerOfTwo(rng, 3);
    auto encoding = layout_test::randomBlocked(rng, rank, numWarps);
    const int maxLog2PerDim[] = {10, 6, 4}; // from far below to far above the CTA tile
    std::vector<int64_t> shape = layout_test::randomShape(rng, rank, maxLog2PerDim[rank - 1]);
    SCOPED_TRACE(encoding->str());
    LinearLayout layout = encoding->toLinearLayout(shape);
    ASSERT_TRUE(layout.isSurjective());
    ASSERT_EQ(layout.getInDimSize("lane"), 32);
    ASSERT_EQ(layout.getInDimSize("warp"), numWarps);
    int64_t expectedRegisters = 1;
    std::vector<int64_t> tile = encoding->getShapePerCTATile();
    for (int axis = 0; axis < rank; ++axis)
      expectedRegisters *=
          encoding->getSizePerThread()[axis] * std::max<int64_t>(1, shape[axis] / tile[axis]);
    ASSERT_EQ(layout.getInDimSize("register"), expectedRegisters);

    bool allMatch = true;
    for (int warp = 0; warp < numWarps; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        for (int reg = 0; reg < expectedRegisters; ++reg) {
          auto outs = layout.apply({{"register", reg}, {"lane", lane}, {"warp", warp}});
          std::vector<int64_t> got;
          for (const auto &entry : outs)
            got.push_back(entry.second);
          allMatch &= got == directBlockedCoords(*encoding, shape, reg, lane, warp);
        }
    EXPECT_TRUE(allMatch) << "shape rank " << rank << " layout " << layout;
  }
}

TEST(BlockedEncodingTest, DefaultBlocked) {
  auto vector1D = defaultBlocked({1024}, 4);
  EXPECT_EQ(
      vector1D->str(),
      "#blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>");
  EXPECT_EQ(vector1D->toLinearLayout({1024}).getNumConsecutiveInOut(), 4);

  auto square = defaultBlocked({64, 64}, 4);
  EXPECT_EQ(square->getSizePerThread(), (std::vector<int>{1, 4}));
  EXPECT_EQ(square->getThreadsPerWarp(), (std::vector<int>{2, 16}));
  EXPECT_EQ(square->getWarpsPerCTA(), (std::vector<int>{4, 1}));
  EXPECT_EQ(square->getOrder(), (std::vector<int>{1, 0}));
  EXPECT_EQ(square->toLinearLayout({64, 64}).getNumConsecutiveInOut(), 4);

  // Too few elements for 16-byte vectors in every thread: fall back to what keeps all busy.
  EXPECT_EQ(defaultBlocked({128}, 4)->getSizePerThread(), (std::vector<int>{1}));
  EXPECT_EQ(defaultBlocked({256}, 4)->getSizePerThread(), (std::vector<int>{2}));
  // f16 gets 8 elements (16 bytes); f64 gets 2.
  EXPECT_EQ(defaultBlocked({4096}, 4, 32, 16)->getSizePerThread(), (std::vector<int>{8}));
  EXPECT_EQ(defaultBlocked({4096}, 4, 32, 64)->getSizePerThread(), (std::vector<int>{2}));
  // A narrow last dim limits both the vector and the lanes along it.
  auto narrow = defaultBlocked({256, 2}, 8);
  EXPECT_EQ(narrow->getSizePerThread(), (std::vector<int>{1, 2}));
  EXPECT_EQ(narrow->getThreadsPerWarp(), (std::vector<int>{32, 1}));
  EXPECT_EQ(narrow->getWarpsPerCTA(), (std::vector<int>{8, 1}));
}

TEST(BlockedEncodingTest, DefaultBlockedIsAlwaysValid) {
  Rng rng(77);
  for (int trial = 0; trial < 200; ++trial) {
    int rank = 1 + rng() % 3;
    int numWarps = layout_test::randomPowerOfTwo(rng, 3);
    std::vector<int64_t> shape = layout_test::randomShape(rng, rank, 8);
    auto encoding = defaultBlocked(shape, numWarps, 32, 8 << (rng() % 4));
    EXPECT_EQ(encoding->getNumWarps(), numWarps) << encoding->str();
    EXPECT_EQ(encoding->getWarpSize(), 32) << encoding->str();
    EXPECT_TRUE(encoding->toLinearLayout(shape).isSurjective());
  }
}

TEST(BlockedEncodingTest, RejectsBadParameters) {
  EXPECT_THROW(BlockedEncoding({3}, {32}, {4}, {0}), std::invalid_argument);
  EXPECT_THROW(BlockedEncoding({1, 1}, {32}, {4}, {0}), std::invalid_argument);
  EXPECT_THROW(BlockedEncoding({1, 1}, {4, 8}, {4, 1}, {0, 0}), std::invalid_argument);
  BlockedEncoding ok({1}, {32}, {4}, {0});
  EXPECT_THROW(ok.toLinearLayout({96}), std::invalid_argument);
  EXPECT_THROW(ok.toLinearLayout({32, 32}), std::invalid_argument);
}

TEST(BlockedEncodingTest, Equality) {
  BlockedEncoding a({1, 4}, {2, 16}, {4, 1}, {1, 0});
  EXPECT_TRUE(a.equals(BlockedEncoding({1, 4}, {2, 16}, {4, 1}, {1, 0})));
  EXPECT_FALSE(a.equals(BlockedEncoding({1, 4}, {2, 16}, {4, 1}, {0, 1})));
}

} // namespace
} // namespace tessera
