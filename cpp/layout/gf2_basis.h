// Incremental row reduction over GF(2) for the linear-layout algebra (internal header).
//
// LinearLayout flattens each layout into bit columns packed in uint64_t and uses this basis to
// compute ranks, solve L(y) = b (invertAndCompose) and pick canonical solutions. Not part of
// the public layout API.
#pragma once

#include <array>
#include <cstdint>

namespace tessera {
namespace gf2 {

inline int highestBit(uint64_t value) { return 63 - __builtin_clzll(value); }

/// A set of linearly independent bit vectors kept in echelon form: each stored vector has a
/// distinct highest set bit (its pivot). Each vector also carries a `combination` tag saying
/// which original columns XOR together to build it, so reductions can be traced back.
class XorBasis {
public:
  struct Reduction {
    uint64_t remainder = 0;   // what is left after clearing every pivot bit
    uint64_t combination = 0; // XOR of the tags of the vectors that were used
  };

  /// Clears pivot bits from the highest down. Because pivots are distinct highest bits, the
  /// remainder is the smallest value in the coset `value + span`, and it is 0 iff value is in
  /// the span.
  Reduction reduce(uint64_t value) const {
    Reduction result{value, 0};
    while (result.remainder & pivotMask) {
      // Clearing the highest reducible bit can only set lower bits, so this terminates.
      uint64_t reducible = result.remainder & pivotMask;
      int bit = highestBit(reducible);
      result.remainder ^= vectors[bit];
      result.combination ^= tags[bit];
    }
    return result;
  }

  /// Adds `value` (built from the original columns in `combination`). Returns 0 if the value
  /// was independent; otherwise returns the nonzero combination of original columns that XORs
  /// to zero, i.e. a kernel vector.
  uint64_t insert(uint64_t value, uint64_t combination) {
    Reduction reduced = reduce(value);
    if (reduced.remainder == 0)
      return combination ^ reduced.combination;
    int bit = highestBit(reduced.remainder);
    vectors[bit] = reduced.remainder;
    tags[bit] = combination ^ reduced.combination;
    pivotMask |= uint64_t(1) << bit;
    return 0;
  }

  int rank() const { return __builtin_popcountll(pivotMask); }

private:
  std::array<uint64_t, 64> vectors{};
  std::array<uint64_t, 64> tags{};
  uint64_t pivotMask = 0;
};

} // namespace gf2
} // namespace tessera
