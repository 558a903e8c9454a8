// Tests for the tensor-core encodings (cpp/layout/mma.h, dot_operand.h, swizzled_shared.h):
// every fragment element of one instruction against the formulas of the PTX ISA tables
// ("Matrix Fragments for mma.m16n8k16 / mma.m16n8k8 with floating point type"), the warp
// tiling of larger tiles, the register-only conversion that chained dots rely on, the FMA
// (Blocked-parent) operand layouts, and the text forms.
#include "layout/blocked.h"
#include "layout/conversion.h"
#include "layout/dot_operand.h"
#include "layout/encoding.h"
#include "layout/mma.h"
#include "layout/swizzled_shared.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

namespace tessera {
namespace {

using Coords = std::pair<int, int>;

Coords at(const LinearLayout &layout, int reg, int lane, int warp = 0) {
  LinearLayout::DimValues out =
      layout.apply({{kRegisterDim, reg}, {kLaneDim, lane}, {kWarpDim, warp}});
  return {out[0].second, out[1].second};
}

EncodingPtr mma(int warpsM, int warpsN) {
  return std::make_shared<const MmaEncoding>(2, std::vector<int>{warpsM, warpsN});
}

LinearLayout operand(int opIdx, const EncodingPtr &parent, int kWidth,
                     std::vector<int64_t> shape) {
  return DotOperandEncoding(opIdx, parent, kWidth).toLinearLayout(shape);
}

// The PTX ISA formulas, written out as the tables give them.
int groupId(int lane) { return lane >> 2; }
int threadInGroup(int lane) { return lane % 4; }

TEST(MmaLayoutTest, AccumulatorMatchesPtxTable) {
  // C/D of m16n8k16 (f32): row = groupID (+8 for c2, c3), col = 2 * threadID_in_group + (i & 1).
  LinearLayout layout = mma(1, 1)->toLinearLayout({16, 8});
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(at(layout, i, lane),
                Coords(groupId(lane) + (i >= 2 ? 8 : 0), threadInGroup(lane) * 2 + (i & 1)))
          << "lane " << lane << " c" << i;
}

TEST(MmaLayoutTest, OperandAF16MatchesPtxTable) {
  // A of m16n8k16 (f16/bf16): row = groupID for a0, a1, a4, a5, else groupID + 8;
  // col = 2 * threadID_in_group + (i & 1), + 8 for i >= 4.
  LinearLayout layout = operand(0, mma(1, 1), 2, {16, 16});
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 8; ++i) {
      int row = groupId(lane) + ((i < 2 || (i >= 4 && i < 6)) ? 0 : 8);
      int col = threadInGroup(lane) * 2 + (i & 1) + (i >= 4 ? 8 : 0);
      EXPECT_EQ(at(layout, i, lane), Coords(row, col)) << "lane " << lane << " a" << i;
    }
}

TEST(MmaLayoutTest, OperandBF16MatchesPtxTable) {
  // B of m16n8k16 (f16/bf16): row = 2 * threadID_in_group + (i & 1), + 8 for i >= 2;
  // col = groupID.
  LinearLayout layout = operand(1, mma(1, 1), 2, {16, 8});
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(at(layout, i, lane),
                Coords(threadInGroup(lane) * 2 + (i & 1) + (i >= 2 ? 8 : 0), groupId(lane)))
          << "lane " << lane << " b" << i;
}

TEST(MmaLayoutTest, OperandsTf32MatchPtxTable) {
  // A of m16n8k8 (tf32): row = groupID for a0, a2, groupID + 8 for a1, a3;
  // col = threadID_in_group for a0, a1, + 4 for a2, a3.
  LinearLayout a = operand(0, mma(1, 1), 1, {16, 8});
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(at(a, i, lane), Coords(groupId(lane) + (i % 2 ? 8 : 0),
                                       threadInGroup(lane) + (i >= 2 ? 4 : 0)))
          << "lane " << lane << " a" << i;
  // B of m16n8k8 (tf32): row = threadID_in_group (+ 4 for b1), col = groupID.
  LinearLayout b = operand(1, mma(1, 1), 1, {8, 8});
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ(at(b, i, lane), Coords(threadInGroup(lane) + 4 * i, groupId(lane)))
          << "lane " << lane << " b" << i;
}

TEST(MmaLayoutTest, WarpsTileTheCtaAndRegistersRepeatIt) {
  // [64, 64] with 2 x 2 warps: each element exactly once; within its m16n8 tile every element
  // sits where the PTX table puts it; tiles go to warps round robin (N fastest).
  LinearLayout layout = mma(2, 2)->toLinearLayout({64, 64});
  EXPECT_TRUE(layout.isInvertible());
  EXPECT_EQ(layout.getInDimSize(kRegisterDim), 32);
  for (int warp = 0; warp < 4; ++warp)
    for (int lane = 0; lane < 32; ++lane)
      for (int reg = 0; reg < 32; ++reg) {
        auto [m, n] = at(layout, reg, lane, warp);
        int i = reg % 4;
        EXPECT_EQ(m % 16, groupId(lane) + (i >= 2 ? 8 : 0));
        EXPECT_EQ(n % 8, threadInGroup(lane) * 2 + (i & 1));
        EXPECT_EQ((m / 16) % 2, warp / 2) << "warps along M";
        EXPECT_EQ((n / 8) % 2, warp % 2) << "warps along N";
      }
}

TEST(MmaLayoutTest, OperandsBroadcastAcrossTheWarpsOfTheOtherDim) {
  EncodingPtr parent = mma(2, 2);
  LinearLayout a = operand(0, parent, 2, {64, 32}), b = operand(1, parent, 2, {32, 64});
  LinearLayout c = parent->toLinearLayout({64, 64});
  EXPECT_TRUE(a.isSurjective());
  EXPECT_TRUE(b.isSurjective());
  // The tensor cores exchange fragments within a warp: each warp holds in A every row, and
  // in B every column, of its accumulator elements.
  for (int warp = 0; warp < 4; ++warp) {
    std::set<int> rowsA, colsB, rowsC, colsC;
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
    EXPECT_EQ(rowsA, rowsC);
    EXPECT_EQ(colsB, colsC);
    EXPECT_EQ(rowsA.size(), 32u);
  }
}

TEST(MmaLayoutTest, ChainedDotsConvertInRegistersWhenWarpsLieAlongM) {
  // attention: P = softmax(Q K^T) cast to f16 feeds P V as operand A.
  LinearLayout acc = mma(4, 1)->toLinearLayout({64, 64});
  LinearLayout a = operand(0, mma(4, 1), 2, {64, 64});
  ConversionPlan plan = planConversion(acc, a, 2);
  EXPECT_LE(plan.kind, ConversionKind::RegisterPermutation);
  // With warps along N a row of P is spread over warps: shared memory is needed.
  EXPECT_EQ(planConversion(mma(2, 2)->toLinearLayout({64, 64}), operand(0, mma(2, 2), 2, {64, 64}))
                .kind,
            ConversionKind::SharedMemory);
}

TEST(MmaLayoutTest, BlockedParentOperandsHoldWholeRowsAndColumns) {
  auto blocked = std::make_shared<const BlockedEncoding>(
      std::vector<int>{1, 4}, std::vector<int>{4, 8}, std::vector<int>{4, 1}, std::vector<int>{1, 0});
  LinearLayout c = blocked->toLinearLayout({32, 32});
  LinearLayout a = operand(0, blocked, 1, {32, 16}), b = operand(1, blocked, 1, {16, 32});
  for (int warp = 0; warp < 4; ++warp)
    for (int lane = 0; lane < 32; ++lane)
      for (int reg = 0; reg < c.getInDimSize(kRegisterDim); ++reg) {
        auto [m, n] = at(c, reg, lane, warp);
        std::set<Coords> heldA, heldB;
        for (int r = 0; r < a.getInDimSize(kRegisterDim); ++r)
          heldA.insert(at(a, r, lane, warp));
        for (int r = 0; r < b.getInDimSize(kRegisterDim); ++r)
          heldB.insert(at(b, r, lane, warp));
        for (int k = 0; k < 16; ++k) {
          EXPECT_TRUE(heldA.count({m, k})) << "A(" << m << ", " << k << ")";
          EXPECT_TRUE(heldB.count({k, n})) << "B(" << k << ", " << n << ")";
        }
      }
  // Consecutive registers step K, so shared-memory reads vectorize.
  EXPECT_EQ(at(a, 1, 0), Coords(0, 1));
}

TEST(MmaLayoutTest, TextFormsRoundTrip) {
  EncodingPtr parent = mma(2, 4);
  auto a = std::make_shared<const DotOperandEncoding>(0, parent, 2);
  auto shared = std::make_shared<const SharedEncoding>(8, 2, 4, std::vector<int>{1, 0});
  for (const EncodingPtr &encoding : {parent, EncodingPtr(a), EncodingPtr(shared)}) {
    EncodingPtr parsed = parseEncoding(encoding->str());
    EXPECT_TRUE(parsed->equals(*encoding)) << encoding->str();
  }
  EXPECT_EQ(a->str(), "#dot_op<{opIdx = 0, parent = #mma<{version = 2, warpsPerCTA = [2, 4], "
                      "instrShape = [16, 8]}>, kWidth = 2}>");
  EXPECT_THROW(parseEncoding("#mma<{version = 3, warpsPerCTA = [2, 2], instrShape = [16, 8]}>"),
               std::runtime_error);
  EXPECT_THROW(parseEncoding("#dot_op<{opIdx = 2, parent = #mma<{version = 2, warpsPerCTA = [1, "
                             "1], instrShape = [16, 8]}>, kWidth = 2}>"),
               std::runtime_error);
}

TEST(MmaLayoutTest, OperandSwizzleFollowsRowWidth) {
  // 16-byte chunks; phases so that 8 consecutive rows hit 8 distinct 16-byte bank groups.
  auto wide = dotOperandSharedEncoding({64, 64}, {1, 0}, 2);   // 128-byte rows
  auto narrow = dotOperandSharedEncoding({64, 32}, {1, 0}, 2); // 64-byte rows
  auto f32 = dotOperandSharedEncoding({32, 16}, {1, 0}, 4);    // 64-byte rows
  EXPECT_EQ(wide->str(), "#shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0]}>");
  EXPECT_EQ(narrow->str(), "#shared<{vec = 8, perPhase = 2, maxPhase = 4, order = [1, 0]}>");
  EXPECT_EQ(f32->str(), "#shared<{vec = 4, perPhase = 2, maxPhase = 4, order = [1, 0]}>");
  EXPECT_EQ(withRingDim(*narrow)->str(),
            "#shared<{vec = 8, perPhase = 2, maxPhase = 4, order = [2, 1, 0]}>");
}

} // namespace
} // namespace tessera
