// Helpers for the layout property tests: seeded random layouts and encodings, and exhaustive
// comparison of two layouts as functions.
#pragma once

#include "layout/blocked.h"
#include "layout/linear_layout.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace tessera {
namespace layout_test {

using Rng = std::mt19937;

inline int log2Of(int64_t value) { return __builtin_ctzll(static_cast<uint64_t>(value)); }

/// Splits packed values (first dim in the low bits) into one basis vector per column.
inline LinearLayout layoutFromColumns(const std::vector<uint64_t> &columns,
                                      const LinearLayout::DimSizes &ins,
                                      const LinearLayout::DimSizes &outs) {
  LinearLayout::Bases bases;
  size_t next = 0;
  for (const auto &[name, size] : ins) {
    std::vector<LinearLayout::BasisVector> vectors;
    for (int bit = 0; bit < log2Of(size); ++bit) {
      uint64_t packed = columns[next++];
      LinearLayout::BasisVector vector;
      for (const auto &out : outs) {
        vector.push_back(static_cast<int32_t>(packed & (out.second - 1)));
        packed >>= log2Of(out.second);
      }
      vectors.push_back(vector);
    }
    bases.emplace_back(name, vectors);
  }
  return LinearLayout(bases, outs, /*requireSurjective=*/false);
}

inline int totalBits(const LinearLayout::DimSizes &dims) {
  int bits = 0;
  for (const auto &dim : dims)
    bits += log2Of(dim.second);
  return bits;
}

/// Any linear map, usually neither injective nor surjective.
inline LinearLayout randomLayout(Rng &rng, const LinearLayout::DimSizes &ins,
                                 const LinearLayout::DimSizes &outs) {
  uint64_t mask = (uint64_t(1) << totalBits(outs)) - 1;
  std::vector<uint64_t> columns;
  for (int i = 0; i < totalBits(ins); ++i)
    columns.push_back(((uint64_t(rng()) << 32) | rng()) & mask);
  return layoutFromColumns(columns, ins, outs);
}

/// A bijection: a permutation of unit columns mixed by random column XORs (which keep the
/// matrix invertible). ins and outs must have the same total size.
inline LinearLayout randomInvertibleLayout(Rng &rng, const LinearLayout::DimSizes &ins,
                                           const LinearLayout::DimSizes &outs) {
  int bits = totalBits(outs);
  std::vector<uint64_t> columns;
  for (int i = 0; i < bits; ++i)
    columns.push_back(uint64_t(1) << i);
  std::shuffle(columns.begin(), columns.end(), rng);
  for (int step = 0; step < 3 * bits && bits > 1; ++step) {
    int target = rng() % bits, source = rng() % bits;
    if (target != source)
      columns[target] ^= columns[source];
  }
  return layoutFromColumns(columns, ins, outs);
}

/// Surjective, with the extra input bits (if any) as random combinations, including zeros.
inline LinearLayout randomSurjectiveLayout(Rng &rng, const LinearLayout::DimSizes &ins,
                                           const LinearLayout::DimSizes &outs) {
  int outBits = totalBits(outs), inBits = totalBits(ins);
  std::vector<uint64_t> columns;
  for (int i = 0; i < outBits; ++i)
    columns.push_back(uint64_t(1) << i);
  for (int i = outBits; i < inBits; ++i)
    columns.push_back(rng() % 3 == 0 ? 0 : (uint64_t(rng()) & ((uint64_t(1) << outBits) - 1)));
  std::shuffle(columns.begin(), columns.end(), rng);
  for (int step = 0; step < 2 * outBits; ++step) {
    int target = rng() % inBits, source = rng() % inBits;
    if (target != source)
      columns[target] ^= columns[source];
  }
  return layoutFromColumns(columns, ins, outs);
}

/// Every input tuple of a layout (first dim fastest).
inline std::vector<LinearLayout::DimValues> allInputs(const LinearLayout &layout) {
  std::vector<LinearLayout::DimValues> result;
  for (int64_t flat = 0; flat < layout.getTotalInDimSize(); ++flat) {
    LinearLayout::DimValues values;
    int64_t rest = flat;
    for (const std::string &name : layout.getInDimNames()) {
      values.emplace_back(name, static_cast<int32_t>(rest % layout.getInDimSize(name)));
      rest /= layout.getInDimSize(name);
    }
    result.push_back(values);
  }
  return result;
}

/// Output values keyed by dim name, so layouts with differently ordered dims compare.
inline std::map<std::string, int32_t> asMap(const LinearLayout::DimValues &values) {
  return std::map<std::string, int32_t>(values.begin(), values.end());
}

/// True if both layouts give the same outputs (by name) for every input of `a`.
inline bool sameFunction(const LinearLayout &a, const LinearLayout &b) {
  for (const auto &input : allInputs(a))
    if (asMap(a.apply(input)) != asMap(b.apply(input)))
      return false;
  return true;
}

inline int randomPowerOfTwo(Rng &rng, int maxLog2) { return 1 << (rng() % (maxLog2 + 1)); }

/// A random valid blocked encoding of `rank` with `numWarps` warps of `warpSize` lanes.
inline std::shared_ptr<const BlockedEncoding> randomBlocked(Rng &rng, int rank, int numWarps,
                                                            int warpSize = 32) {
  auto split = [&](int total) {
    std::vector<int> parts(rank, 1);
    for (int remaining = total; remaining > 1; remaining /= 2)
      parts[rng() % rank] *= 2;
    return parts;
  };
  std::vector<int> sizePerThread(rank);
  for (int &size : sizePerThread)
    size = randomPowerOfTwo(rng, 2);
  std::vector<int> order(rank);
  for (int i = 0; i < rank; ++i)
    order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  return std::make_shared<const BlockedEncoding>(sizePerThread, split(warpSize), split(numWarps),
                                                 order);
}

inline std::vector<int64_t> randomShape(Rng &rng, int rank, int maxLog2PerDim) {
  std::vector<int64_t> shape(rank);
  for (int64_t &extent : shape)
    extent = randomPowerOfTwo(rng, maxLog2PerDim);
  return shape;
}

} // namespace layout_test
} // namespace tessera
