// Tests for SliceEncoding (cpp/layout/slice.h): a known reduction layout, and the property
// that each thread of a slice holds exactly the parent's elements with the sliced dim dropped.
#include "layout/slice.h"
#include "layout_test_utils.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

namespace tessera {
namespace {

using layout_test::Rng;

TEST(SliceEncodingTest, RowReductionOfDefaultBlocked) {
  // sum(x, axis=1) for a [64, 64] tensor in the default f32 blocked layout.
  auto parent =
      std::make_shared<const BlockedEncoding>(std::vector<int>{1, 4}, std::vector<int>{2, 16},
                                              std::vector<int>{4, 1}, std::vector<int>{1, 0});
  SliceEncoding slice(1, parent);
  EXPECT_EQ(slice.rank(), 1);
  // Lanes along dim1 now broadcast; the 4 registers along dim1 collapse into one.
  EXPECT_EQ(slice.toLinearLayout({64}), LinearLayout({{"register", {{8}, {16}, {32}}},
                                                      {"lane", {{0}, {0}, {0}, {0}, {1}}},
                                                      {"warp", {{2}, {4}}},
                                                      {"block", {}}},
                                                     {"dim0"}));
  // Reducing along dim0 instead keeps the vector registers and broadcasts the warps.
  EXPECT_EQ(SliceEncoding(0, parent).toLinearLayout({64}),
            LinearLayout({{"register", {{1}, {2}}},
                          {"lane", {{4}, {8}, {16}, {32}, {0}}},
                          {"warp", {{0}, {0}}},
                          {"block", {}}},
                         {"dim0"}));
}

using ElementSet = std::set<std::vector<int32_t>>;

/// The tensor elements held by one thread, optionally with one coordinate removed.
ElementSet threadElements(const LinearLayout &layout, int lane, int warp, int droppedAxis) {
  ElementSet elements;
  for (int reg = 0; reg < layout.getInDimSize("register"); ++reg) {
    std::vector<int32_t> coords;
    auto outs = layout.apply({{"register", reg}, {"lane", lane}, {"warp", warp}});
    for (int axis = 0; axis < static_cast<int>(outs.size()); ++axis)
      if (axis != droppedAxis)
        coords.push_back(outs[axis].second);
    elements.insert(coords);
  }
  return elements;
}

TEST(SliceEncodingTest, ThreadsHoldTheParentsElementsProjected) {
  Rng rng(31);
  for (int trial = 0; trial < 200; ++trial) {
    int parentRank = 2 + rng() % 2;
    int numWarps = layout_test::randomPowerOfTwo(rng, 2);
    auto parent = layout_test::randomBlocked(rng, parentRank, numWarps);
    int dim = rng() % parentRank;
    SliceEncoding slice(dim, parent);
    std::vector<int64_t> shape = layout_test::randomShape(rng, parentRank - 1, 5);
    std::vector<int64_t> parentShape = shape;
    parentShape.insert(parentShape.begin() + dim, 1);
    LinearLayout sliced = slice.toLinearLayout(shape);
    LinearLayout parentLayout = parent->toLinearLayout(parentShape);
    SCOPED_TRACE(slice.str());

    ASSERT_TRUE(sliced.isSurjective());
    EXPECT_EQ(sliced.getInDimSize("lane"), parentLayout.getInDimSize("lane"));
    EXPECT_EQ(sliced.getInDimSize("warp"), parentLayout.getInDimSize("warp"));
    for (int bit = 0; bit < sliced.getInDimSizeLog2("register"); ++bit)
      EXPECT_NE(sliced.getBasis("register", bit), LinearLayout::BasisVector(parentRank - 1, 0));
    bool sameElements = true;
    for (int warp = 0; warp < numWarps; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        sameElements &=
            threadElements(sliced, lane, warp, -1) == threadElements(parentLayout, lane, warp, dim);
    EXPECT_TRUE(sameElements) << sliced;
  }
}

TEST(SliceEncodingTest, NestedSlicesAndErrors) {
  auto parent =
      std::make_shared<const BlockedEncoding>(std::vector<int>{1, 1, 2}, std::vector<int>{2, 4, 4},
                                              std::vector<int>{1, 2, 2}, std::vector<int>{2, 1, 0});
  auto inner = std::make_shared<const SliceEncoding>(2, parent);
  SliceEncoding outer(0, inner);
  EXPECT_EQ(outer.rank(), 1);
  EXPECT_TRUE(outer.toLinearLayout({16}).isSurjective());
  EXPECT_TRUE(outer.equals(SliceEncoding(0, std::make_shared<const SliceEncoding>(2, parent))));
  EXPECT_FALSE(outer.equals(SliceEncoding(1, inner)));
  EXPECT_THROW(SliceEncoding(3, parent), std::invalid_argument);
  EXPECT_THROW(SliceEncoding(0, nullptr), std::invalid_argument);
  EXPECT_THROW(outer.toLinearLayout({4, 4}), std::invalid_argument);
}

} // namespace
} // namespace tessera
