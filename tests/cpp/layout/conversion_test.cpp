// Tests for conversion planning (cpp/layout/conversion.h): the plan kind for chosen layout
// pairs, and a simulated CTA that executes random plans (register moves, shuffles, or a round
// trip through the chosen shared tile) and checks every destination register.
#include "layout/conversion.h"
#include "layout/slice.h"
#include "layout_test_utils.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace tessera {
namespace {

using layout_test::Rng;

LinearLayout blocked(std::vector<int> sizePerThread, std::vector<int> threadsPerWarp,
                     std::vector<int> warpsPerCTA, std::vector<int> order,
                     const std::vector<int64_t> &shape) {
  return BlockedEncoding(sizePerThread, threadsPerWarp, warpsPerCTA, order).toLinearLayout(shape);
}

TEST(ConversionTest, IdenticalLayoutsAreFree) {
  LinearLayout layout = defaultBlocked({64, 64}, 4)->toLinearLayout({64, 64});
  ConversionPlan plan = planConversion(layout, layout);
  EXPECT_EQ(plan.kind, ConversionKind::None);
  EXPECT_EQ(plan.map, LinearLayout::empty());
  ASSERT_EQ(plan.registerSources.size(), 32u); // 4096 elements over 128 threads
  for (int32_t reg = 0; reg < 32; ++reg)
    EXPECT_EQ(plan.registerSources[reg], reg);
  EXPECT_FALSE(plan.sharedTile.has_value());
}

TEST(ConversionTest, SameBroadcastSliceIsFree) {
  auto parent = defaultBlocked({64, 64}, 4);
  LinearLayout slice = SliceEncoding(1, parent).toLinearLayout({64});
  EXPECT_EQ(planConversion(slice, slice).kind, ConversionKind::None);
}

TEST(ConversionTest, RegisterOrderOnlyIsAPermutation) {
  // Same threads and warps; the 2x2 registers are listed dim1-first vs dim0-first.
  LinearLayout src = blocked({2, 2}, {1, 32}, {4, 1}, {1, 0}, {8, 64});
  LinearLayout dst = blocked({2, 2}, {1, 32}, {4, 1}, {0, 1}, {8, 64});
  ConversionPlan plan = planConversion(src, dst);
  EXPECT_EQ(plan.kind, ConversionKind::RegisterPermutation);
  EXPECT_EQ(plan.registerSources, (std::vector<int32_t>{0, 2, 1, 3}));
  EXPECT_EQ(plan.map, LinearLayout({{"register", {{2}, {1}}}}, {{"register", 4}}, false));
}

TEST(ConversionTest, LanesMovingWithinAWarpNeedShuffles) {
  LinearLayout src = blocked({1, 1}, {4, 8}, {1, 1}, {1, 0}, {8, 32});
  LinearLayout dst = blocked({1, 1}, {8, 4}, {1, 1}, {1, 0}, {8, 32});
  EXPECT_EQ(planConversion(src, dst).kind, ConversionKind::WarpShuffle);
  // Broadcast warps on both sides stay put; only lanes and registers move.
  LinearLayout oneRegister = blocked({1}, {32}, {2}, {0}, {32});
  LinearLayout twoRegisters = blocked({2}, {32}, {2}, {0}, {32});
  EXPECT_EQ(planConversion(oneRegister, twoRegisters).kind, ConversionKind::WarpShuffle);
}

/// Shared-memory cycles (or bank conflicts) of storing `src` and loading `dst` through `tile`,
/// warp 0, with the widest accesses the tile allows.
int simulateRoundTrip(const LinearLayout &src, const LinearLayout &dst,
                      const SharedTileLayout &tile, bool countWavefronts) {
  BankConflictOptions store{4, sharedAccessVectorWidth(src, tile, 4), 0};
  BankConflictOptions load{4, sharedAccessVectorWidth(dst, tile, 4), 0};
  SharedAccessTable stores = computeSharedOffsets(src, tile);
  SharedAccessTable loads = computeSharedOffsets(dst, tile);
  SharedAccessCost storeCost = measureSharedAccesses(stores, store);
  SharedAccessCost loadCost = measureSharedAccesses(loads, load);
  return countWavefronts ? storeCost.wavefronts + loadCost.wavefronts
                         : storeCost.conflicts + loadCost.conflicts;
}

TEST(ConversionTest, WarpsMovingNeedSharedMemory) {
  // A 32 x 32 transpose of thread ownership: warps own rows, then columns.
  LinearLayout rows = blocked({1, 1}, {1, 32}, {4, 1}, {1, 0}, {32, 32});
  LinearLayout columns = blocked({1, 1}, {32, 1}, {1, 4}, {0, 1}, {32, 32});
  ConversionPlan plan = planConversion(rows, columns);
  EXPECT_EQ(plan.kind, ConversionKind::SharedMemory);
  ASSERT_TRUE(plan.sharedTile.has_value());
  SharedTileLayout plain = SharedTileLayout::rowMajor({32, 32});
  EXPECT_EQ(simulateRoundTrip(rows, columns, plain, false), 8 * 31); // 32-way column loads
  EXPECT_EQ(simulateRoundTrip(rows, columns, *plan.sharedTile, false), 0) << plan.sharedTile->str();
}

TEST(ConversionTest, SharedTileKeepsVectorizedStores) {
  // Default [64, 64] f32 (16-byte vectors along dim1) to a column-major blocked layout.
  LinearLayout rows = defaultBlocked({64, 64}, 4)->toLinearLayout({64, 64});
  LinearLayout columns = blocked({4, 1}, {16, 2}, {1, 4}, {0, 1}, {64, 64});
  ConversionPlan plan = planConversion(rows, columns);
  ASSERT_EQ(plan.kind, ConversionKind::SharedMemory);
  const SharedTileLayout &tile = *plan.sharedTile;
  EXPECT_EQ(tile.order, (std::vector<int>{1, 0})); // rows' registers run along dim1
  EXPECT_EQ(sharedAccessVectorWidth(rows, tile, 4), 4);
  // An XOR swizzle of 64-element rows cannot spread 16 same-column lanes over 32 banks, but
  // the chosen one cuts the plain tile's 16-way load conflicts to 2-way.
  SharedTileLayout plain = SharedTileLayout::rowMajor({64, 64});
  EXPECT_EQ(simulateRoundTrip(rows, columns, plain, true), 8 * 4 + 32 * 16);
  EXPECT_EQ(simulateRoundTrip(rows, columns, tile, true), 8 * 4 + 32 * 2) << tile.str();
}

TEST(ConversionTest, RejectsDifferentTensors) {
  LinearLayout a = defaultBlocked({64}, 4)->toLinearLayout({64});
  LinearLayout b = defaultBlocked({128}, 4)->toLinearLayout({128});
  EXPECT_THROW(planConversion(a, b), std::invalid_argument);
}

using Element = std::vector<int32_t>;

Element elementAt(const LinearLayout &layout, int reg, int lane, int warp) {
  Element coords;
  for (const auto &entry : layout.apply({{"register", reg}, {"lane", lane}, {"warp", warp}}))
    coords.push_back(entry.second);
  return coords;
}

/// Runs the plan on a simulated CTA and returns how many destination registers got the
/// wrong element.
int executePlan(const ConversionPlan &plan, const LinearLayout &src, const LinearLayout &dst) {
  int wrong = 0;
  int numWarps = dst.getInDimSize("warp"), numLanes = dst.getInDimSize("lane");
  int numDstRegisters = dst.getInDimSize("register");
  // Shared memory path: every thread stores all its registers, then loads its new ones.
  std::map<int64_t, Element> shared;
  if (plan.kind == ConversionKind::SharedMemory) {
    SharedAccessTable stores = computeSharedOffsets(src, *plan.sharedTile);
    for (int warp = 0; warp < numWarps; ++warp)
      for (int lane = 0; lane < numLanes; ++lane)
        for (int reg = 0; reg < stores.numRegisters; ++reg) {
          Element value = elementAt(src, reg, lane, warp);
          auto [slot, inserted] = shared.emplace(stores.offset(reg, lane, warp), value);
          wrong += !inserted && slot->second != value; // two elements in one slot
        }
  }
  SharedAccessTable loads = plan.kind == ConversionKind::SharedMemory
                                ? computeSharedOffsets(dst, *plan.sharedTile)
                                : SharedAccessTable{};
  for (int warp = 0; warp < numWarps; ++warp)
    for (int lane = 0; lane < numLanes; ++lane)
      for (int reg = 0; reg < numDstRegisters; ++reg) {
        Element got;
        switch (plan.kind) {
        case ConversionKind::None:
        case ConversionKind::RegisterPermutation:
          got = elementAt(src, plan.registerSources[reg], lane, warp);
          break;
        case ConversionKind::WarpShuffle: {
          // Shuffles stay in the warp: the map names a source register and lane only.
          LinearLayout::DimValues ins = {{"register", reg}, {"lane", lane}};
          if (plan.map.hasInDim("warp")) // the source lane may depend on the warp
            ins.emplace_back("warp", warp);
          std::map<std::string, int32_t> source;
          for (const auto &entry : plan.map.apply(ins))
            source[entry.first] = entry.second;
          got = elementAt(src, source["register"], source["lane"], warp);
          break;
        }
        case ConversionKind::SharedMemory:
          got = shared[loads.offset(reg, lane, warp)];
          break;
        }
        wrong += got != elementAt(dst, reg, lane, warp);
      }
  return wrong;
}

/// The cheapest kind that could work, judged from where the data is: None if every
/// destination register already holds its element; RegisterPermutation if one static table
/// (dst register -> src register, the same in every thread) works; WarpShuffle if each
/// element is somewhere in the destination's warp; else SharedMemory.
ConversionKind cheapestPossibleKind(const LinearLayout &src, const LinearLayout &dst) {
  int numWarps = dst.getInDimSize("warp"), numLanes = dst.getInDimSize("lane");
  int numSrcRegisters = src.getInDimSize("register"),
      numDstRegisters = dst.getInDimSize("register");
  bool identical = numSrcRegisters == numDstRegisters, tableExists = true, inWarp = true;
  std::map<int, std::set<Element>> byWarp;
  for (int warp = 0; warp < numWarps; ++warp)
    for (int lane = 0; lane < numLanes; ++lane)
      for (int reg = 0; reg < numSrcRegisters; ++reg)
        byWarp[warp].insert(elementAt(src, reg, lane, warp));
  for (int reg = 0; reg < numDstRegisters; ++reg) {
    std::set<int> candidates; // src registers that work for this dst register in every thread
    for (int source = 0; source < numSrcRegisters; ++source)
      candidates.insert(source);
    for (int warp = 0; warp < numWarps; ++warp)
      for (int lane = 0; lane < numLanes; ++lane) {
        Element element = elementAt(dst, reg, lane, warp);
        identical &= reg < numSrcRegisters && elementAt(src, reg, lane, warp) == element;
        inWarp &= byWarp[warp].count(element) > 0;
        for (auto it = candidates.begin(); it != candidates.end();)
          it = elementAt(src, *it, lane, warp) == element ? std::next(it) : candidates.erase(it);
      }
    tableExists &= !candidates.empty();
  }
  if (identical)
    return ConversionKind::None;
  if (tableExists)
    return ConversionKind::RegisterPermutation;
  return inWarp ? ConversionKind::WarpShuffle : ConversionKind::SharedMemory;
}

/// A random register layout: blocked, or a slice of a blocked layout one rank up.
LinearLayout randomRegisterLayout(Rng &rng, const std::vector<int64_t> &shape, int numWarps) {
  int rank = static_cast<int>(shape.size());
  if (rng() % 4 != 0)
    return layout_test::randomBlocked(rng, rank, numWarps)->toLinearLayout(shape);
  return SliceEncoding(rng() % (rank + 1), layout_test::randomBlocked(rng, rank + 1, numWarps))
      .toLinearLayout(shape);
}

TEST(ConversionTest, SimulatedPlansDeliverEveryElement) {
  Rng rng(42);
  std::map<ConversionKind, int> seen;
  for (int trial = 0; trial < 300; ++trial) {
    int rank = 1 + rng() % 2;
    int numWarps = layout_test::randomPowerOfTwo(rng, 2);
    std::vector<int64_t> shape = layout_test::randomShape(rng, rank, rank == 1 ? 9 : 5);
    LinearLayout src = randomRegisterLayout(rng, shape, numWarps);
    // Often reuse src's threads so that the cheap kinds show up too.
    LinearLayout dst = rng() % 3 == 0 ? src : randomRegisterLayout(rng, shape, numWarps);
    if (rng() % 4 == 0) { // same threads, register bases listed in reverse
      LinearLayout::Bases bases = src.getBases();
      std::reverse(bases[0].second.begin(), bases[0].second.end());
      dst = LinearLayout(bases, src.getOutDims(), /*requireSurjective=*/true);
    }
    ConversionPlan plan = planConversion(src, dst, 1 << (rng() % 3));
    ++seen[plan.kind];
    EXPECT_EQ(plan.kind, cheapestPossibleKind(src, dst)) << "src " << src << "\ndst " << dst;
    EXPECT_EQ(executePlan(plan, src, dst), 0)
        << conversionKindName(plan.kind) << "\nsrc " << src << "\ndst " << dst;
  }
  // The random pairs exercise every kind of plan.
  EXPECT_GT(seen[ConversionKind::None], 0);
  EXPECT_GT(seen[ConversionKind::RegisterPermutation], 0);
  EXPECT_GT(seen[ConversionKind::WarpShuffle], 0);
  EXPECT_GT(seen[ConversionKind::SharedMemory], 0);
}

} // namespace
} // namespace tessera
