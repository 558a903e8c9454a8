// Tests for LinearLayout (cpp/layout/linear_layout.h): constructors and evaluation on small
// known cases, then seeded property tests of the GF(2) algebra.
#include "layout/linear_layout.h"
#include "layout_test_utils.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tessera {
namespace {

using layout_test::Rng;
using layout_test::sameFunction;
using DimSizes = LinearLayout::DimSizes;

LinearLayout identityOn(const DimSizes &dims) {
  LinearLayout result;
  for (const auto &[name, size] : dims)
    result *= LinearLayout::identity1D(size, name, name);
  return result;
}

TEST(LinearLayoutTest, OneDimensionalConstructors) {
  EXPECT_EQ(LinearLayout::identity1D(8, "lane", "dim0"),
            LinearLayout({{"lane", {{1}, {2}, {4}}}}, {"dim0"}));
  LinearLayout strided = LinearLayout::strided1D(4, 2, "lane", "dim0");
  EXPECT_EQ(strided.getOutDimSize("dim0"), 8);
  EXPECT_FALSE(strided.isSurjective());
  EXPECT_TRUE(strided.isInjective());
  LinearLayout zeros = LinearLayout::zeros1D(4, "lane", "dim0");
  EXPECT_EQ(zeros.getInDimSize("lane"), 4);
  EXPECT_EQ(zeros.getOutDimSize("dim0"), 1);
  EXPECT_TRUE(zeros.isSurjective());
  EXPECT_FALSE(zeros.isInjective());
}

TEST(LinearLayoutTest, ApplyXorsBases) {
  // The swizzle (t, w) -> (t, w ^ t) from Triton's LinearLayout.h overview.
  LinearLayout layout({{"t", {{1, 1}, {2, 2}}}, {"w", {{0, 1}, {0, 2}}}}, {"x", "y"});
  for (int t = 0; t < 4; ++t)
    for (int w = 0; w < 4; ++w) {
      LinearLayout::DimValues expected = {{"x", t}, {"y", w ^ t}};
      EXPECT_EQ(layout.apply({{"t", t}, {"w", w}}), expected);
      EXPECT_EQ(layout.apply({{"w", w}, {"t", t}}), expected); // any input order
    }
  EXPECT_EQ(layout.apply({{"w", 3}}), (LinearLayout::DimValues{{"x", 0}, {"y", 3}}));
  EXPECT_THROW(layout.apply({{"t", 4}}), std::invalid_argument);
  EXPECT_THROW(layout.apply({{"lane", 0}}), std::invalid_argument);
}

TEST(LinearLayoutTest, SizesAndAccessors) {
  LinearLayout layout({{"register", {{0, 1}}}, {"lane", {{1, 0}, {0, 2}}}, {"block", {}}},
                      {"dim0", "dim1"});
  EXPECT_EQ(layout.getInDimNames(), (std::vector<std::string>{"register", "lane", "block"}));
  EXPECT_EQ(layout.getOutDimNames(), (std::vector<std::string>{"dim0", "dim1"}));
  EXPECT_EQ(layout.getInDimSize("lane"), 4);
  EXPECT_EQ(layout.getInDimSize("block"), 1);
  EXPECT_EQ(layout.getOutDimSize("dim1"), 4);
  EXPECT_EQ(layout.getTotalInDimSize(), 8);
  EXPECT_EQ(layout.getTotalOutDimSize(), 8);
  EXPECT_EQ(layout.getBasis("lane", 1, "dim1"), 2);
  EXPECT_TRUE(layout.isInvertible());
  EXPECT_THROW(layout.getInDimSize("warp"), std::invalid_argument);
}

TEST(LinearLayoutTest, ConstructorRejectsMalformedBases) {
  // Not surjective when surjectivity is required: value 2 without value 1.
  EXPECT_THROW(LinearLayout({{"lane", {{2}}}}, {"dim0"}), std::invalid_argument);
  EXPECT_THROW(LinearLayout({{"lane", {{1, 0}}}}, {"dim0"}), std::invalid_argument);
  EXPECT_THROW(LinearLayout({{"lane", {{4}}}}, {{"dim0", 4}}, false), std::invalid_argument);
  EXPECT_THROW(LinearLayout({{"lane", {{1}}}}, {{"dim0", 3}}, false), std::invalid_argument);
  EXPECT_THROW(LinearLayout({{"lane", {}}, {"lane", {}}}, {}), std::invalid_argument);
}

TEST(LinearLayoutTest, ProductExamples) {
  using L = LinearLayout;
  EXPECT_EQ(L::identity1D(4, "i", "o") * L::identity1D(2, "i", "o"), L::identity1D(8, "i", "o"));
  EXPECT_EQ(L::identity1D(4, "i", "o") * L::zeros1D(2, "i", "o"),
            L({{"i", {{1}, {2}, {0}}}}, {"o"}));
  EXPECT_EQ(L::zeros1D(2, "i", "o") * L::identity1D(4, "i", "o"),
            L({{"i", {{0}, {1}, {2}}}}, {"o"}));
  EXPECT_EQ(L::identity1D(4, "i", "o1") * L::identity1D(8, "i", "o2"),
            L({{"i", {{1, 0}, {2, 0}, {0, 1}, {0, 2}, {0, 4}}}}, {"o1", "o2"}));
  L disjoint = L::identity1D(4, "i1", "o1") * L::identity1D(8, "i2", "o2");
  EXPECT_EQ(disjoint.getInDimNames(), (std::vector<std::string>{"i1", "i2"}));
  EXPECT_EQ(disjoint.apply({{"i1", 3}, {"i2", 5}}), (L::DimValues{{"o1", 3}, {"o2", 5}}));
  EXPECT_EQ(L::empty() * disjoint, disjoint);
  EXPECT_EQ(disjoint * L::empty(), disjoint);
  // Shared dims in conflicting orders have no product.
  L ab = L::identity1D(2, "a", "o") * L::identity1D(2, "b", "o");
  L ba = L::identity1D(2, "b", "o") * L::identity1D(2, "a", "o");
  EXPECT_THROW(ab * ba, std::invalid_argument);
}

TEST(LinearLayoutTest, ProductIsAssociative) {
  Rng rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    // Shared dims keep one relative order (r before l before w; x before y before z).
    LinearLayout a = layout_test::randomLayout(rng, {{"r", 4}, {"l", 2}}, {{"x", 4}, {"y", 2}});
    LinearLayout b = layout_test::randomLayout(rng, {{"r", 2}, {"l", 4}}, {{"y", 4}});
    LinearLayout c = layout_test::randomLayout(rng, {{"l", 2}, {"w", 2}}, {{"y", 2}, {"z", 2}});
    EXPECT_EQ((a * b) * c, a * (b * c));
  }
}

TEST(LinearLayoutTest, ComposeKnownCase) {
  // Transpose then 2x stride along the (new) first dim.
  LinearLayout transpose({{"a", {{0, 1}, {0, 2}}}, {"b", {{1, 0}}}}, {"x", "y"});
  LinearLayout outer =
      LinearLayout::identity1D(2, "x", "u") * LinearLayout::strided1D(4, 2, "y", "v");
  LinearLayout composed = transpose.compose(outer);
  EXPECT_EQ(composed.apply({{"a", 3}, {"b", 1}}), (LinearLayout::DimValues{{"u", 1}, {"v", 6}}));
  EXPECT_THROW(outer.compose(transpose), std::invalid_argument);
}

TEST(LinearLayoutTest, ComposeIsAssociative) {
  Rng rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    LinearLayout a = layout_test::randomLayout(rng, {{"r", 8}, {"l", 4}}, {{"x", 8}, {"y", 4}});
    LinearLayout b = layout_test::randomLayout(rng, {{"y", 4}, {"x", 8}}, {{"u", 16}});
    LinearLayout c = layout_test::randomLayout(rng, {{"u", 16}}, {{"p", 4}, {"q", 8}});
    EXPECT_EQ(a.compose(b).compose(c), a.compose(b.compose(c)));
    EXPECT_TRUE(sameFunction(a.compose(b), a.compose(b))); // deterministic
  }
}

TEST(LinearLayoutTest, InverseComposeIdentities) {
  Rng rng(2024);
  DimSizes ins = {{"register", 4}, {"lane", 8}, {"warp", 2}};
  DimSizes outs = {{"dim0", 16}, {"dim1", 4}};
  for (int trial = 0; trial < 200; ++trial) {
    LinearLayout layout = layout_test::randomInvertibleLayout(rng, ins, outs);
    ASSERT_TRUE(layout.isInvertible()) << layout;
    LinearLayout inverse = layout.invert();
    EXPECT_EQ(layout.compose(inverse), identityOn(ins));
    EXPECT_EQ(inverse.compose(layout), identityOn(outs));
    EXPECT_EQ(inverse.invert(), layout);
    // With an invertible outer, invertAndCompose is compose with the inverse.
    LinearLayout other = layout_test::randomLayout(rng, {{"offset", 32}, {"block", 2}}, outs);
    EXPECT_EQ(other.invertAndCompose(layout), other.compose(inverse));
  }
}

TEST(LinearLayoutTest, InvertAndComposeWithNonInjectiveOuter) {
  Rng rng(99);
  DimSizes outs = {{"dim0", 8}, {"dim1", 4}};
  for (int trial = 0; trial < 200; ++trial) {
    // outer has more inputs than outputs (broadcast), so many solutions exist.
    LinearLayout outer = layout_test::randomSurjectiveLayout(
        rng, {{"register", 8}, {"lane", 16}, {"warp", 2}}, outs);
    ASSERT_TRUE(outer.isSurjective());
    LinearLayout self = layout_test::randomLayout(rng, {{"register", 4}, {"lane", 32}}, outs);
    LinearLayout solution = self.invertAndCompose(outer);
    EXPECT_EQ(solution.getInDimNames(), self.getInDimNames());
    EXPECT_EQ(solution.getOutDimNames(), outer.getInDimNames());
    EXPECT_TRUE(sameFunction(solution.compose(outer), self));
    // The pseudo-inverse is a right inverse.
    EXPECT_EQ(outer.pseudoinvert().compose(outer), identityOn(outs));
  }
}

TEST(LinearLayoutTest, InvertAndComposeKeepsSharedBroadcastInPlace) {
  // Both layouts broadcast lane bit 1; the solution must leave it alone.
  LinearLayout layout({{"lane", {{1}, {0}, {2}}}}, {"dim0"});
  LinearLayout map = layout.invertAndCompose(layout);
  EXPECT_EQ(map, LinearLayout({{"lane", {{1}, {2}, {4}}}}, {{"lane", 8}}, false));
  // Broadcast on the other bit: lane 2 must read from lane 0 (the smallest source).
  LinearLayout moved({{"lane", {{1}, {2}, {0}}}}, {"dim0"});
  EXPECT_EQ(layout.invertAndCompose(moved).apply({{"lane", 2}}),
            (LinearLayout::DimValues{{"lane", 0}}));
}

TEST(LinearLayoutTest, InvertAndComposeRejectsUnreachableValues) {
  LinearLayout self = LinearLayout::identity1D(4, "lane", "dim0");
  LinearLayout outer({{"offset", {{1}, {0}}}}, {{"dim0", 4}}, false);
  EXPECT_THROW(self.invertAndCompose(outer), std::invalid_argument);
  EXPECT_THROW(outer.invert(), std::invalid_argument);
}

TEST(LinearLayoutTest, SublayoutAndQuotient) {
  // A conversion map (hardware -> hardware) that permutes registers and fixes lanes.
  LinearLayout map({{"register", {{2, 0}, {1, 0}}}, {"lane", {{0, 1}, {0, 2}}}},
                   {{"register", 4}, {"lane", 4}}, false);
  EXPECT_TRUE(map.isTrivialOver({"lane"}));
  EXPECT_FALSE(map.isTrivialOver({"register"}));
  EXPECT_TRUE(map.isTrivialOver({"warp"})); // absent on both sides: size 1
  std::optional<LinearLayout> registersOnly = map.quotient({"lane"});
  ASSERT_TRUE(registersOnly.has_value());
  EXPECT_EQ(*registersOnly, LinearLayout({{"register", {{2}, {1}}}}, {{"register", 4}}, false));
  EXPECT_FALSE(map.quotient({"register"}).has_value());
  EXPECT_EQ(map.sublayout({"lane"}, {"lane"}), LinearLayout::identity1D(4, "lane", "lane"));
  EXPECT_TRUE(map.sublayoutIsZero({"register"}, {"lane"}));

  // Lanes feeding registers block the quotient.
  LinearLayout mixing({{"register", {{1, 0}}}, {"lane", {{1, 1}}}}, {{"register", 2}, {"lane", 2}},
                      false);
  EXPECT_FALSE(mixing.quotient({"lane"}).has_value());
}

TEST(LinearLayoutTest, RemoveZeroBasesAndFreeVariables) {
  LinearLayout layout({{"register", {{1}, {0}, {2}}}, {"lane", {{0}, {4}, {1}}}}, {"dim0"});
  EXPECT_EQ(layout.removeZeroBasesAlongDim("register"),
            LinearLayout({{"register", {{1}, {2}}}, {"lane", {{0}, {4}, {1}}}}, {"dim0"}));
  // register bit 1 is zero; lane bit 0 is zero; lane bit 2 repeats register bit 0.
  EXPECT_EQ(layout.getFreeVariableMasks(),
            (LinearLayout::DimValues{{"register", 0b010}, {"lane", 0b101}}));
}

TEST(LinearLayoutTest, Transposes) {
  LinearLayout layout({{"a", {{1, 0}}}, {"b", {{0, 1}, {0, 2}}}}, {"x", "y"});
  LinearLayout swapped = layout.transposeOuts({"y", "x"}).transposeIns({"b", "a"});
  EXPECT_EQ(swapped.getOutDimNames(), (std::vector<std::string>{"y", "x"}));
  EXPECT_EQ(swapped.getBasis("b", 1), (LinearLayout::BasisVector{2, 0}));
  EXPECT_TRUE(sameFunction(layout, swapped));
  EXPECT_THROW(layout.transposeOuts({"x"}), std::invalid_argument);
}

TEST(LinearLayoutTest, NumConsecutiveInOut) {
  // 4 registers contiguous along dim1, then lanes continue dim1 at 4.
  LinearLayout rowMajor({{"register", {{0, 1}, {0, 2}, {1, 0}}}, {"lane", {{0, 4}, {0, 8}}}},
                        {"dim0", "dim1"});
  EXPECT_EQ(rowMajor.getNumConsecutiveInOut(), 4);
  EXPECT_EQ(rowMajor.getNumConsecutiveInOut("register", "dim1"), 4);
  EXPECT_EQ(rowMajor.getNumConsecutiveInOut("register", "dim0"), 1);
  // A lane basis at 2 along dim1 cuts the run of 4 registers down to 2.
  LinearLayout interleaved({{"register", {{1}, {2}, {4}}}, {"lane", {{2}}}}, {{"dim0", 8}}, false);
  EXPECT_EQ(interleaved.getNumConsecutiveInOut(), 2);
  LinearLayout broadcastFirst({{"register", {{0}, {1}}}}, {"dim0"});
  EXPECT_EQ(broadcastFirst.getNumConsecutiveInOut(), 1);
  EXPECT_EQ(LinearLayout::empty().getNumConsecutiveInOut(), 1);
}

TEST(LinearLayoutTest, NumConsecutiveMatchesDefinition) {
  // Checks the formal definition by brute force on random layouts.
  Rng rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    LinearLayout layout =
        layout_test::randomLayout(rng, {{"register", 8}, {"lane", 4}}, {{"dim0", 4}, {"dim1", 8}});
    // Make long runs likely: often force leading unit-step register bases.
    LinearLayout::Bases bases = layout.getBases();
    int forced = rng() % 4;
    for (int bit = 0; bit < forced; ++bit)
      bases[0].second[bit] = {0, 1 << bit};
    layout = LinearLayout(bases, layout.getOutDims(), false);
    int32_t width = layout.getNumConsecutiveInOut("register", "dim1");
    bool holds = true;
    for (int32_t start = 0; start < 8; start += width)
      for (int lane = 0; lane < 4; ++lane) {
        auto base = layout.apply({{"register", start}, {"lane", lane}});
        for (int32_t v = 0; v < width; ++v) {
          auto value = layout.apply({{"register", start + v}, {"lane", lane}});
          holds &= value[0].second == base[0].second && value[1].second == base[1].second + v;
        }
      }
    EXPECT_TRUE(holds) << layout << " width " << width;
  }
}

TEST(LinearLayoutTest, StrAndEquality) {
  LinearLayout layout({{"register", {{0, 1}}}, {"lane", {{1, 0}, {0, 2}}}}, {"dim0", "dim1"});
  EXPECT_EQ(layout.str(), "{register: [[0, 1]], lane: [[1, 0], [0, 2]]} -> {dim0: 2, dim1: 4}");
  EXPECT_EQ(layout, LinearLayout(layout.getBases(), layout.getOutDims(), true));
  EXPECT_NE(layout, layout.transposeOuts({"dim1", "dim0"}));
  EXPECT_NE(layout, LinearLayout(layout.getBases(), {{"dim0", 4}, {"dim1", 4}}, false));
}

} // namespace
} // namespace tessera
