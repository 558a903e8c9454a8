// Tests for scheduleMma (cpp/layout/mma_schedule.h): every warp executes the schedule on a
// simulated tensor core that follows the PTX ISA's fragment tables (it gathers the 16 x K x 8
// tiles from the lanes' registers as the tables place them, multiplies, and scatters the
// accumulator back), starting from the registers the dot-operand layouts fill; each thread's
// accumulator registers must end up holding exactly its elements of A @ B + C.
#include "layout/dot_operand.h"
#include "layout/mma.h"
#include "layout/mma_schedule.h"

#include <gtest/gtest.h>

#include <random>

namespace tessera {
namespace {

using Matrix = std::vector<std::vector<int64_t>>;

struct Fragment {
  int row, col;
};

// The PTX ISA tables (m16n8k32 s8 for kWidth 4, m16n8k16 for kWidth 2, m16n8k8 tf32 for
// kWidth 1), per lane and element.
Fragment fragmentA(int kWidth, int lane, int i) {
  int group = lane >> 2, thread = lane % 4;
  if (kWidth == 4)
    return {group + ((i % 8) < 4 ? 0 : 8), thread * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
  if (kWidth == 2)
    return {group + ((i < 2 || (i >= 4 && i < 6)) ? 0 : 8), thread * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
  return {group + (i % 2 ? 8 : 0), thread + (i >= 2 ? 4 : 0)};
}
Fragment fragmentB(int kWidth, int lane, int i) {
  int group = lane >> 2, thread = lane % 4;
  if (kWidth == 4)
    return {thread * 4 + (i & 3) + (i >= 4 ? 16 : 0), group};
  if (kWidth == 2)
    return {thread * 2 + (i & 1) + (i >= 2 ? 8 : 0), group};
  return {thread + 4 * i, group};
}
Fragment fragmentC(int lane, int i) {
  return {(lane >> 2) + (i >= 2 ? 8 : 0), (lane % 4) * 2 + (i & 1)};
}

std::pair<int, int> coordsOf(const LinearLayout &layout, int reg, int lane, int warp) {
  auto out = layout.apply({{kRegisterDim, reg}, {kLaneDim, lane}, {kWarpDim, warp}});
  return {out[0].second, out[1].second};
}

Matrix randomMatrix(int rows, int cols, std::mt19937 &rng) {
  std::uniform_int_distribution<int> value(-9, 9);
  Matrix matrix(rows, std::vector<int64_t>(cols));
  for (auto &row : matrix)
    for (auto &entry : row)
      entry = value(rng);
  return matrix;
}

void expectScheduleComputesProduct(int m, int n, int k, std::vector<int> warps, int kWidth) {
  SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k) +
               " warps=[" + std::to_string(warps[0]) + ", " + std::to_string(warps[1]) +
               "] kWidth=" + std::to_string(kWidth));
  auto mma = std::make_shared<const MmaEncoding>(2, warps);
  LinearLayout la = DotOperandEncoding(0, mma, kWidth).toLinearLayout({m, k});
  LinearLayout lb = DotOperandEncoding(1, mma, kWidth).toLinearLayout({k, n});
  LinearLayout lc = mma->toLinearLayout({m, n});
  MmaSchedule schedule = scheduleMma(la, lb, lc, warps, kWidth);
  int instrK = 8 * kWidth;
  std::mt19937 rng(m * 131 + n * 17 + k + kWidth);
  Matrix a = randomMatrix(m, k, rng), b = randomMatrix(k, n, rng), c = randomMatrix(m, n, rng);
  int numWarps = warps[0] * warps[1];
  for (int warp = 0; warp < numWarps; ++warp) {
    // Registers as the layouts fill them.
    std::vector<std::vector<int64_t>> ra(32), rb(32), rc(32);
    for (int lane = 0; lane < 32; ++lane) {
      for (int r = 0; r < la.getInDimSize(kRegisterDim); ++r) {
        auto [row, col] = coordsOf(la, r, lane, warp);
        ra[lane].push_back(a[row][col]);
      }
      for (int r = 0; r < lb.getInDimSize(kRegisterDim); ++r) {
        auto [row, col] = coordsOf(lb, r, lane, warp);
        rb[lane].push_back(b[row][col]);
      }
      for (int r = 0; r < lc.getInDimSize(kRegisterDim); ++r) {
        auto [row, col] = coordsOf(lc, r, lane, warp);
        rc[lane].push_back(c[row][col]);
      }
    }
    for (const MmaStep &step : schedule.steps) {
      // The tensor core gathers the tiles from the lanes as the tables say ...
      Matrix ta(16, std::vector<int64_t>(instrK)), tb(instrK, std::vector<int64_t>(8)),
          tc(16, std::vector<int64_t>(8));
      for (int lane = 0; lane < 32; ++lane) {
        for (size_t i = 0; i < step.a.size(); ++i) {
          Fragment f = fragmentA(kWidth, lane, static_cast<int>(i));
          ta[f.row][f.col] = ra[lane][step.a[i]];
        }
        for (size_t i = 0; i < step.b.size(); ++i) {
          Fragment f = fragmentB(kWidth, lane, static_cast<int>(i));
          tb[f.row][f.col] = rb[lane][step.b[i]];
        }
        for (size_t i = 0; i < 4; ++i) {
          Fragment f = fragmentC(lane, static_cast<int>(i));
          tc[f.row][f.col] = rc[lane][step.c[i]];
        }
      }
      // ... multiplies, and scatters D back the same way.
      for (int row = 0; row < 16; ++row)
        for (int col = 0; col < 8; ++col)
          for (int kk = 0; kk < instrK; ++kk)
            tc[row][col] += ta[row][kk] * tb[kk][col];
      for (int lane = 0; lane < 32; ++lane)
        for (size_t i = 0; i < 4; ++i) {
          Fragment f = fragmentC(lane, static_cast<int>(i));
          rc[lane][step.c[i]] = tc[f.row][f.col];
        }
    }
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < lc.getInDimSize(kRegisterDim); ++r) {
        auto [row, col] = coordsOf(lc, r, lane, warp);
        int64_t expected = c[row][col];
        for (int kk = 0; kk < k; ++kk)
          expected += a[row][kk] * b[kk][col];
        ASSERT_EQ(rc[lane][schedule.resultSources[r]], expected)
            << "warp " << warp << " lane " << lane << " register " << r << " (" << row << ", "
            << col << ")";
      }
  }
}

TEST(MmaScheduleTest, F16TilesOfEveryWarpShape) {
  expectScheduleComputesProduct(64, 64, 32, {2, 2}, 2);
  expectScheduleComputesProduct(128, 64, 64, {4, 1}, 2);
  expectScheduleComputesProduct(64, 128, 16, {1, 4}, 2);
  expectScheduleComputesProduct(128, 128, 32, {2, 4}, 2);
}

TEST(MmaScheduleTest, Tf32Tiles) {
  expectScheduleComputesProduct(64, 64, 32, {2, 2}, 1);
  expectScheduleComputesProduct(32, 16, 16, {2, 1}, 1);
}

TEST(MmaScheduleTest, Int8Tiles) {
  expectScheduleComputesProduct(64, 64, 64, {2, 2}, 4);
  expectScheduleComputesProduct(32, 32, 32, {2, 2}, 4);
  expectScheduleComputesProduct(128, 64, 128, {4, 1}, 4);
}

TEST(MmaScheduleTest, TilesSmallerThanTheWarpsBroadcast) {
  // 16 x 16 with 4 x 2 warps: several warps hold (and compute) the same elements.
  expectScheduleComputesProduct(16, 16, 16, {4, 2}, 2);
  expectScheduleComputesProduct(16, 32, 32, {1, 8}, 2);
}

} // namespace
} // namespace tessera
