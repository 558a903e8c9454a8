// AxisInfo analysis (as Triton's): per value and tensor dim, how long the runs of consecutive
// values are (contiguity), what power of two divides the first value of each run
// (divisibility; bytes for pointers) and how long the runs of equal values are (constancy).
// Seeded from the func's `divisibility` attribute; read by coalesce (how wide a thread's
// accesses may be) and by codegen (which vector instruction an access may use).
#pragma once

#include "ir/ir.h"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera::analysis {

/// The largest divisibility tracked (what 0 and other huge powers of two collapse to).
constexpr int64_t kMaxDivisibility = int64_t(1) << 31;

/// Facts about one value. Along each dim d the tensor splits into aligned runs (starting at
/// indices that are multiples of the run length); all entries are powers of two. A scalar has
/// one entry per field, as a tensor of shape [1].
struct AxisInfo {
  /// Runs of this many values that step by +1 (pointers: by one element).
  std::vector<int64_t> contiguity;
  /// The first value of each contiguity run is a multiple of this (pointers: in bytes). With
  /// contiguity 1 it holds for every value.
  std::vector<int64_t> divisibility;
  /// Runs of this many equal values.
  std::vector<int64_t> constancy;
  /// The value, when it is a known integer constant (scalar or splat).
  std::optional<int64_t> constantValue;

  /// Nothing known: every entry 1.
  static AxisInfo unknown(int rank);
  int rank() const { return static_cast<int>(contiguity.size()); }
  /// Divisibility of the first value of every run of `runLength` along `dim` (a power of two
  /// no larger than the tensor's extent): shorter runs than the contiguity also start inside
  /// a contiguity run, where only the offset's alignment is known.
  int64_t divisibilityAt(int dim, int64_t runLength) const;
  bool operator==(const AxisInfo &other) const;
  bool operator!=(const AxisInfo &other) const { return !(*this == other); }
  /// E.g. "contiguity = [1024], divisibility = [16], constancy = [1]".
  std::string str() const;
};

/// What holds for both: the meet used where control flow merges (loop-carried values, if).
AxisInfo join(const AxisInfo &a, const AxisInfo &b);

class AxisInfoAnalysis {
public:
  /// Analyses a `func` op: its body, nested regions included; loops iterate to a fixpoint.
  explicit AxisInfoAnalysis(ir::Operation *func);

  /// The facts about `value` (an argument, block argument or op result of the func). Values
  /// the analysis never saw (created after it ran) get AxisInfo::unknown.
  const AxisInfo &get(ir::Value *value) const;

  /// Along `dim`: how many consecutive elements of a tensor of pointers form aligned runs, so
  /// that a thread may access that many as one vector: min(contiguity, divisibility in bytes /
  /// element bytes). 1 for scalars.
  int64_t pointerAlignment(ir::Value *pointers, int dim) const;
  /// Along `dim`: the mask's constancy (a vector access needs one predicate). 1 for scalars.
  int64_t maskAlignment(ir::Value *mask, int dim) const;

private:
  void visitBlock(ir::Block &block);
  void visitOp(ir::Operation &op);
  void visitFor(ir::Operation &op);
  void visitWhile(ir::Operation &op);
  void visitIf(ir::Operation &op);
  void set(ir::Value *value, AxisInfo info) { infos_[value] = std::move(info); }
  std::vector<AxisInfo> infosOf(const std::vector<ir::Value *> &values, size_t first) const;

  std::unordered_map<const ir::Value *, AxisInfo> infos_;
};

/// Tensor dims from most to least contiguous (ties: later dims first, i.e. row-major), the
/// order coalesce gives a load's or store's layout.
std::vector<int> orderByContiguity(const AxisInfo &info);

/// The vector width (elements) of a load or store whose operands carry layouts: what the
/// layout keeps consecutive in one thread's registers, capped by the pointer alignment, the
/// mask's constancy (along the same dim) and 16 bytes. 1 for scalar accesses.
int accessVectorWidth(const AxisInfoAnalysis &analysis, const ir::Operation &memoryOp);

namespace detail {
// Shared by the analysis (axis_info.cpp) and its per-op rules (axis_info_rules.cpp).

/// The largest power of two dividing `value`, capped at kMaxDivisibility (0 -> the cap).
int64_t highestPowerOfTwoDivisor(int64_t value);
/// A tensor's shape; [1] for a scalar.
std::vector<int64_t> shapeOf(const ir::Value *value);
/// Bytes of the element a pointer (or tensor of pointers) points to; at least 1.
int64_t pointeeBytes(const ir::Type &pointerType);
/// The facts about the single result of `op` (no regions) from those about its operands.
AxisInfo transfer(const ir::Operation &op, const std::vector<const AxisInfo *> &operands);
using AxisInfoFn = AxisInfo (*)(const ir::Operation &op,
                                const std::vector<const AxisInfo *> &operands);
/// The transfer rule of one op and its name (axis_info_rules.cpp's table, one per op).
struct AxisInfoRule {
  const char *name;
  AxisInfoFn transfer;
};
const AxisInfoRule &axisInfoRule(ir::OpCode code);
} // namespace detail

} // namespace tessera::analysis
