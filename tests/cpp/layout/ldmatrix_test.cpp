// Tests for ldmatrix plans (cpp/layout/ldmatrix.h): a simulated warp executes each plan on the
// swizzled operand tiles (dotOperandSharedEncoding) and every register must receive the
// element its dot-operand layout assigns it; the row reads of ldmatrix and the 16-byte stores
// of the coalesced tiles that fill the buffers must be free of bank conflicts. The same plans
// run as stmatrix (planStmatrix) must write every register at its element's place.
#include "layout/blocked.h"
#include "layout/conversion.h"
#include "layout/dot_operand.h"
#include "layout/ldmatrix.h"
#include "layout/swizzled_shared.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

struct Case {
  int opIdx;
  std::vector<int64_t> shape;
  std::vector<int> order; // of the tile: order[0] = the dim contiguous in global memory
  int elemBytes;
};

LinearLayout operandLayout(const Case &c, std::vector<int> warps = {2, 2}) {
  auto parent = std::make_shared<const MmaEncoding>(2, warps);
  return DotOperandEncoding(c.opIdx, parent, dotOperandKWidth(8 * c.elemBytes))
      .toLinearLayout(c.shape);
}

SharedTileLayout tileOf(const Case &c) {
  return dotOperandSharedEncoding(c.shape, c.order, c.elemBytes)->tileFor(c.shape);
}

/// Every register of every lane and warp receives the element the layout gives it.
void expectDelivers(const LdmatrixPlan &plan, const LinearLayout &layout,
                    const SharedTileLayout &tile) {
  int numRegisters = layout.getInDimSize(kRegisterDim), numWarps = layout.getInDimSize(kWarpDim);
  std::vector<int64_t> delivered = simulateLdmatrix(plan, numRegisters, numWarps);
  for (int warp = 0; warp < numWarps; ++warp)
    for (int lane = 0; lane < 32; ++lane)
      for (int reg = 0; reg < numRegisters; ++reg) {
        auto coords = layout.apply({{kRegisterDim, reg}, {kLaneDim, lane}, {kWarpDim, warp}});
        int64_t expected = tile.offsetOf({coords[0].second, coords[1].second});
        ASSERT_EQ(delivered[(int64_t(warp) * 32 + lane) * numRegisters + reg], expected)
            << "warp " << warp << " lane " << lane << " register " << reg;
      }
}

void expectConflictFreeRows(const LdmatrixPlan &plan, int numWarps, int elemBytes) {
  SharedAccessTable rows = ldmatrixRowAccesses(plan, numWarps, elemBytes);
  for (int warp = 0; warp < numWarps; ++warp)
    EXPECT_EQ(totalBankConflicts(rows, {elemBytes, 16 / elemBytes, warp}), 0) << "warp " << warp;
}

TEST(LdmatrixTest, OperandAKContiguousIsPlainX4) {
  Case c{0, {64, 32}, {1, 0}, 2};
  LinearLayout layout = operandLayout(c);
  SharedTileLayout tile = tileOf(c);
  std::optional<LdmatrixPlan> plan = planLdmatrix(layout, tile, 2);
  ASSERT_TRUE(plan);
  EXPECT_FALSE(plan->transposed);
  EXPECT_EQ(plan->numMatrices, 4);
  expectDelivers(*plan, layout, tile);
  expectConflictFreeRows(*plan, 4, 2);
}

TEST(LdmatrixTest, OperandBNContiguousIsTransposed) {
  Case c{1, {32, 64}, {1, 0}, 2};
  LinearLayout layout = operandLayout(c);
  SharedTileLayout tile = tileOf(c);
  std::optional<LdmatrixPlan> plan = planLdmatrix(layout, tile, 2);
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->transposed);
  EXPECT_EQ(plan->numMatrices, 4);
  expectDelivers(*plan, layout, tile);
  expectConflictFreeRows(*plan, 4, 2);
}

TEST(LdmatrixTest, TransposedOperandsSwapTheForm) {
  // B^T stored K-contiguous (tl.trans of an [N, K] tile), A^T stored M-contiguous.
  for (Case c : {Case{1, {64, 64}, {0, 1}, 2}, Case{0, {128, 64}, {0, 1}, 2}}) {
    LinearLayout layout = operandLayout(c);
    SharedTileLayout tile = tileOf(c);
    std::optional<LdmatrixPlan> plan = planLdmatrix(layout, tile, 2);
    ASSERT_TRUE(plan) << "opIdx " << c.opIdx;
    EXPECT_EQ(plan->transposed, c.opIdx == 0);
    expectDelivers(*plan, layout, tile);
    expectConflictFreeRows(*plan, 4, 2);
  }
}

TEST(LdmatrixTest, Tf32LoadsWordsAndHasNoTransposedForm) {
  Case a{0, {64, 32}, {1, 0}, 4};
  LinearLayout layout = operandLayout(a);
  SharedTileLayout tile = tileOf(a);
  std::optional<LdmatrixPlan> plan = planLdmatrix(layout, tile, 4);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->elementsPerWord, 1);
  expectDelivers(*plan, layout, tile);
  expectConflictFreeRows(*plan, 4, 4);
  Case b{1, {32, 64}, {1, 0}, 4}; // would need .trans of 32-bit elements
  EXPECT_FALSE(planLdmatrix(operandLayout(b), tileOf(b), 4));
}

TEST(LdmatrixTest, SmallOperandsUseFewerMatrices) {
  // B of [16, 16] with 4 warps along N... one n8 tile per warp: 4 registers, an x2.
  Case c{1, {16, 32}, {1, 0}, 2};
  LinearLayout layout = operandLayout(c, {1, 4});
  SharedTileLayout tile = tileOf(c);
  std::optional<LdmatrixPlan> plan = planLdmatrix(layout, tile, 2);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->numMatrices, 2);
  expectDelivers(*plan, layout, tile);
}

TEST(LdmatrixTest, CoalescedStoresIntoOperandTilesAreConflictFree) {
  // The 16-byte-per-thread layouts coalesce gives loads of these tiles (row-major f16 A and B,
  // K-major B, row-major f32 A).
  struct StoreCase {
    Case tile;
    BlockedEncoding blocked;
  };
  std::vector<StoreCase> cases = {
      {{0, {128, 32}, {1, 0}, 2}, BlockedEncoding({1, 8}, {8, 4}, {4, 1}, {1, 0})},
      {{1, {32, 128}, {1, 0}, 2}, BlockedEncoding({1, 8}, {2, 16}, {4, 1}, {1, 0})},
      {{1, {64, 128}, {0, 1}, 2}, BlockedEncoding({8, 1}, {8, 4}, {1, 4}, {0, 1})},
      {{0, {64, 32}, {1, 0}, 4}, BlockedEncoding({1, 4}, {4, 8}, {4, 1}, {1, 0})},
  };
  for (const StoreCase &sc : cases) {
    SharedTileLayout tile = tileOf(sc.tile);
    SharedAccessTable stores = computeSharedOffsets(sc.blocked.toLinearLayout(sc.tile.shape), tile);
    for (int warp = 0; warp < 4; ++warp)
      EXPECT_EQ(totalBankConflicts(stores, {sc.tile.elemBytes, 16 / sc.tile.elemBytes, warp}), 0)
          << sc.blocked.str() << " into " << tile.str();
  }
}

/// A product's accumulator (mma.sync or wgmma) in f16, converted for 16-byte global stores
/// through the tile the conversion chooses: the matmul epilogue.
struct EpilogueCase {
  MmaEncoding mma;
  std::vector<int64_t> shape;
  BlockedEncoding stores;
};

TEST(StmatrixTest, ProductEpiloguesStoreWithX4) {
  std::vector<EpilogueCase> cases = {
      {MmaEncoding(3, {8, 1}, {16, 128}),
       {128, 128},
       BlockedEncoding({1, 8}, {2, 16}, {8, 1}, {1, 0})},
      {MmaEncoding(3, {4, 1}, {16, 128}),
       {128, 128},
       BlockedEncoding({1, 8}, {2, 16}, {4, 1}, {1, 0})},
      {MmaEncoding(3, {8, 1}, {16, 256}),
       {128, 256},
       BlockedEncoding({1, 8}, {1, 32}, {8, 1}, {1, 0})},
      {MmaEncoding(2, {2, 2}), {64, 64}, BlockedEncoding({1, 8}, {4, 8}, {4, 1}, {1, 0})},
  };
  for (const EpilogueCase &c : cases) {
    LinearLayout accumulator = c.mma.toLinearLayout(c.shape);
    SharedTileLayout tile =
        chooseConversionTile(accumulator, c.stores.toLinearLayout(c.shape), /*elemBytes=*/2);
    std::optional<LdmatrixPlan> plan = planStmatrix(accumulator, tile, 2);
    ASSERT_TRUE(plan) << c.mma.str() << " into " << tile.str();
    EXPECT_FALSE(plan->transposed);
    EXPECT_EQ(plan->numMatrices, 4);
    // stmatrix reads each lane's words from the fragment places ldmatrix fills: the
    // simulated ldmatrix of the plan is where every register lands.
    expectDelivers(*plan, accumulator, tile);
    expectConflictFreeRows(*plan, accumulator.getInDimSize(kWarpDim), 2);
  }
}

TEST(StmatrixTest, OnlyWherePlainStoresMoveLess) {
  LinearLayout accumulator = MmaEncoding(3, {4, 1}, {16, 64}).toLinearLayout({64, 64});
  LinearLayout rows = BlockedEncoding({1, 8}, {4, 8}, {4, 1}, {1, 0}).toLinearLayout({64, 64});
  // f32 accumulators: stmatrix moves 16-bit elements only.
  EXPECT_FALSE(planStmatrix(accumulator, chooseConversionTile(accumulator, rows, 4), 4));
  // A source already storing 16 bytes per lane (8 f16 in a row) gains nothing.
  EXPECT_FALSE(planStmatrix(rows, chooseConversionTile(rows, accumulator, 2), 2));
}

} // namespace
} // namespace tessera
