// The mma schedule of a dot: which registers of A, B and the accumulator each mma.sync
// instruction of a thread reads and writes, found from the three linear layouts.
//
// Codegen (lower_matrix.cpp) walks the steps and packs the listed registers into the
// instruction's 32-bit words; the CPU tests execute the steps on a simulated warp with the
// PTX ISA's fragment tables and check that they compute the whole product exactly once.
#pragma once

#include "layout/linear_layout.h"

#include <vector>

namespace tessera {

/// One mma.sync of every thread: the registers (indices into each value's registers, the same
/// for every lane and warp) holding fragment elements a0.., b0.., c0..c3 in PTX order.
struct MmaStep {
  std::vector<int> a, b, c;
  /// Tile origin of lane 0 of warp 0: (m, n, k) of element a0 / b0 / c0.
  int m = 0, n = 0, k = 0;
};

struct MmaSchedule {
  /// k steps outermost, then m tiles, then n tiles (a tile's steps chain on its accumulator).
  std::vector<MmaStep> steps;
  /// For every accumulator register, the register that the steps write with its element
  /// (itself, or a smaller register holding the same element: a broadcast duplicate).
  std::vector<int> resultSources;
};

/// The schedule for accumulator layout `c` ([M, N], an #mma layout of `warpsPerCTA`) and
/// operand layouts `a` ([M, K]) and `b` ([K, N]) whose instructions span `instrK` along K
/// with `kWidth` elements per 32-bit word. Throws std::invalid_argument when some fragment
/// element is held by no register.
MmaSchedule scheduleMma(const LinearLayout &a, const LinearLayout &b, const LinearLayout &c,
                        const std::vector<int> &warpsPerCTA, int kWidth);

} // namespace tessera
