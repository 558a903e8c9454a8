// LinearLayout: a map, linear over GF(2), from named hardware index dims to tensor coordinates.
//
// Every register and shared-memory layout in Tessera is one of these (docs/architecture.md).
// Named encodings (blocked.h, slice.h) build them per tensor shape; conversion planning
// (conversion.h) and code generation use only LinearLayouts. Pure integer code, no LLVM.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

/// Standard input dim names of register layouts, in the order encodings list them.
inline const char *const kRegisterDim = "register";
inline const char *const kLaneDim = "lane";
inline const char *const kWarpDim = "warp";
inline const char *const kBlockDim = "block";
/// Input dim of shared-memory layouts (element offset within a buffer).
inline const char *const kOffsetDim = "offset";
/// Output dim name of tensor axis `axis`: "dim0", "dim1", ...
std::string tensorDimName(int axis);

/// L maps a tuple of input indices (one per input dim) to a tuple of output indices. It is
/// stored as one basis vector per input bit: bases[inDim][i] = L(inDim = 2^i, others 0), each
/// vector holding one int32 per output dim. Other inputs XOR the bases of their set bits.
///
/// Dims keep the order in which they were created; the first input (output) dim is the least
/// significant when a layout is flattened to a single bit vector. All sizes are powers of two.
/// Operations that are handed malformed arguments throw std::invalid_argument.
///
/// Example: 4 lanes x 2 warps over a [2, 4] tensor, lanes along dim1 (row-major):
///   LinearLayout({{"lane", {{0, 1}, {0, 2}}}, {"warp", {{1, 0}}}}, {"dim0", "dim1"})
///   apply({{"lane", 3}, {"warp", 1}}) == {{"dim0", 1}, {"dim1", 3}}
class LinearLayout {
public:
  using BasisVector = std::vector<int32_t>;
  /// (inDim, its basis vectors), in input dim order.
  using Bases = std::vector<std::pair<std::string, std::vector<BasisVector>>>;
  /// (dim name, size) or (dim name, value) pairs.
  using DimSizes = std::vector<std::pair<std::string, int32_t>>;
  using DimValues = std::vector<std::pair<std::string, int32_t>>;

  /// The empty layout: no dims; the identity of operator*.
  LinearLayout() = default;
  static LinearLayout empty() { return LinearLayout(); }

  /// Infers each output size as the next power of two above its largest basis value and
  /// requires the layout to be surjective.
  LinearLayout(Bases bases, const std::vector<std::string> &outDimNames);
  /// Explicit output sizes; the layout may be non-surjective unless requireSurjective.
  LinearLayout(Bases bases, DimSizes outDims, bool requireSurjective);

  /// L(x) = x for x in [0, size).
  static LinearLayout identity1D(int32_t size, const std::string &inDim, const std::string &outDim);
  /// L(x) = stride * x for x in [0, size); the output size is size * stride.
  static LinearLayout strided1D(int32_t size, int32_t stride, const std::string &inDim,
                                const std::string &outDim);
  /// L(x) = 0 for x in [0, size): every input broadcasts the same element.
  static LinearLayout zeros1D(int32_t size, const std::string &inDim, const std::string &outDim,
                              int32_t outDimSize = 1);

  // ---- Dims and sizes ----------------------------------------------------------------------
  const Bases &getBases() const { return bases; }
  const DimSizes &getOutDims() const { return outDims; }
  std::vector<std::string> getInDimNames() const;
  std::vector<std::string> getOutDimNames() const;
  int getNumInDims() const { return static_cast<int>(bases.size()); }
  int getNumOutDims() const { return static_cast<int>(outDims.size()); }
  bool hasInDim(const std::string &inDim) const;
  bool hasOutDim(const std::string &outDim) const;
  int getOutDimIndex(const std::string &outDim) const; // throws if absent

  int getInDimSizeLog2(const std::string &inDim) const; // throws if absent
  int32_t getInDimSize(const std::string &inDim) const { return 1 << getInDimSizeLog2(inDim); }
  int getOutDimSizeLog2(const std::string &outDim) const; // throws if absent
  int32_t getOutDimSize(const std::string &outDim) const { return 1 << getOutDimSizeLog2(outDim); }
  int getTotalInDimSizeLog2() const;
  int64_t getTotalInDimSize() const { return int64_t(1) << getTotalInDimSizeLog2(); }
  int getTotalOutDimSizeLog2() const;
  int64_t getTotalOutDimSize() const { return int64_t(1) << getTotalOutDimSizeLog2(); }

  /// L(inDim = 2^pos, others 0), one value per output dim.
  const BasisVector &getBasis(const std::string &inDim, int pos) const;
  int32_t getBasis(const std::string &inDim, int pos, const std::string &outDim) const;

  // ---- Properties --------------------------------------------------------------------------
  /// Rank of the GF(2) matrix: how many independent output bits the layout reaches.
  int getRank() const;
  /// Every output value is produced by some input (no tensor element is missing).
  bool isSurjective() const { return getRank() == getTotalOutDimSizeLog2(); }
  /// No two inputs give the same output (no broadcast / duplicated elements).
  bool isInjective() const { return getRank() == getTotalInDimSizeLog2(); }
  bool isInvertible() const {
    return isSurjective() && getTotalInDimSizeLog2() == getTotalOutDimSizeLog2();
  }
  /// Per input dim, a mask of the input bits that can change without changing the output,
  /// given all earlier bits (in flattened order). Zero bases are always free; codegen uses the
  /// masks to skip redundant stores from broadcast threads.
  DimValues getFreeVariableMasks() const;

  /// The vectorization width: how many consecutive values of `inDim` map to consecutive
  /// values of `outDim` (all other output dims fixed), for every value of the other inputs.
  /// Formally the largest V with L(a*V + v, rest) = L(a*V, rest) + v along outDim, v < V.
  int32_t getNumConsecutiveInOut(const std::string &inDim, const std::string &outDim) const;
  /// Same, for the first input dim ("register" in register layouts) and the output dim that
  /// its first basis vector moves along (the fastest-varying dim). 1 when there is none.
  int32_t getNumConsecutiveInOut() const;

  // ---- Evaluation --------------------------------------------------------------------------
  /// L(ins). Input dims may be listed in any order; absent ones are 0. Returns every output
  /// dim in order. Throws on unknown dims or out-of-range values.
  DimValues apply(const DimValues &ins) const;

  // ---- Algebra -----------------------------------------------------------------------------
  /// Direct product: `inner` acts on the low bits of each shared dim, `outer` on the high
  /// bits. On disjoint dims it is the block-diagonal combination, e.g.
  /// identity1D(4, "i1", "o1") * identity1D(8, "i2", "o2") maps (i1, i2) -> (i1, i2); on a
  /// shared dim, identity1D(4, "i", "o") * identity1D(2, "i", "o") == identity1D(8, "i", "o").
  /// Dims present in both must appear in the same relative order.
  friend LinearLayout operator*(const LinearLayout &inner, const LinearLayout &outer);
  LinearLayout &operator*=(const LinearLayout &outer) { return *this = *this * outer; }

  /// outer(this(x)). This layout's output dims must be outer's input dims (any order) with
  /// sizes no larger than outer's input sizes.
  LinearLayout compose(const LinearLayout &outer) const;
  /// C with outer(C(x)) == this(x) for all x, i.e. outer^-1 ∘ this. C's input dims are this
  /// layout's, its output dims are outer's input dims. `outer` may be non-injective (e.g. a
  /// broadcast destination layout); then C picks, for each basis, the smallest outer input
  /// in flattened order, except that an input bit whose basis is zero in both layouts maps
  /// to itself (broadcast threads stay put). Throws if this layout reaches values outside
  /// outer's image.
  /// For a layout conversion, dst.invertAndCompose(src) maps each destination hardware index
  /// to a source hardware index holding the same element.
  LinearLayout invertAndCompose(const LinearLayout &outer) const;
  /// Same, but nullopt instead of an exception when no such C exists.
  std::optional<LinearLayout> tryInvertAndCompose(const LinearLayout &outer) const;
  /// L^-1 for a bijective layout (throws otherwise): input and output dims swap roles.
  LinearLayout invert() const;
  /// A right inverse of a surjective layout: this(pseudoinvert()(y)) == y, choosing the
  /// smallest input for each output.
  LinearLayout pseudoinvert() const;

  /// Keeps only the named input and output dims (in this layout's order); dropped input dims
  /// are set to 0 and dropped output dims are ignored. Output sizes are unchanged.
  LinearLayout sublayout(const std::vector<std::string> &inDimNames,
                         const std::vector<std::string> &outDimNames) const;
  /// True if the named inputs never change the named outputs.
  bool sublayoutIsZero(const std::vector<std::string> &inDimNames,
                       const std::vector<std::string> &outDimNames) const;
  /// True if, for a layout whose input and output dims share names (such as a conversion map
  /// from hardware indices to hardware indices), each named dim maps identically onto itself
  /// and does not mix with the other dims. A dim missing on one side counts as size 1.
  bool isTrivialOver(const std::vector<std::string> &dimNames) const;
  /// If isTrivialOver(dimNames), the layout with those dims removed from both sides; else
  /// nullopt. Conversion planning uses it to drop the hardware levels that do not move.
  std::optional<LinearLayout> quotient(const std::vector<std::string> &dimNames) const;
  /// Drops the all-zero basis vectors of `inDim` (e.g. the duplicated registers of a
  /// broadcast), shrinking that input dim.
  LinearLayout removeZeroBasesAlongDim(const std::string &inDim) const;
  /// Reorders dims; the argument must be a permutation of the current names.
  LinearLayout transposeIns(const std::vector<std::string> &newInDimOrder) const;
  LinearLayout transposeOuts(const std::vector<std::string> &newOutDimOrder) const;

  /// Readable one-line form, e.g.
  /// "{register: [[0, 1]], lane: [[1, 0], [0, 2]]} -> {dim0: 2, dim1: 4}".
  std::string str() const;

  /// Same dims in the same order with the same bases and output sizes.
  friend bool operator==(const LinearLayout &lhs, const LinearLayout &rhs);
  friend bool operator!=(const LinearLayout &lhs, const LinearLayout &rhs) { return !(lhs == rhs); }

private:
  /// Flattened view: output dims packed into one bit vector, first dim in the low bits.
  std::vector<int> outDimBitOffsets() const;
  uint64_t flattenOutValue(const BasisVector &value) const;
  BasisVector unflattenOutValue(uint64_t value) const;
  /// One packed output value per input bit, in flattened input order.
  std::vector<uint64_t> flatColumns() const;
  uint64_t applyFlat(uint64_t flatInput) const;
  /// Inverse of the flattened input order: splits a packed input bit vector per input dim.
  BasisVector unflattenInValue(uint64_t value) const;
  const std::vector<BasisVector> &basesOf(const std::string &inDim) const;
  void checkInvariants(bool requireSurjective) const;

  Bases bases;
  DimSizes outDims;
};

std::ostream &operator<<(std::ostream &os, const LinearLayout &layout);

} // namespace tessera
