// SliceEncoding: a parent layout with one tensor dim removed, as Triton's #ttg.slice.
//
// The result of reducing a tensor along `dim` (and the operand of expand_dims) keeps the
// parent's threads: the threads that used to split `dim` now hold the same elements
// (broadcast). Passes create slices; codegen sees only toLinearLayout().
#pragma once

#include "layout/encoding.h"
#include "layout/linear_layout.h"

namespace tessera {

class SliceEncoding : public Encoding {
public:
  /// `dim` is a dim of the parent (0 <= dim < parent->rank()). Throws std::invalid_argument.
  SliceEncoding(int dim, EncodingPtr parent);

  int getDim() const { return dim; }
  const EncodingPtr &getParent() const { return parent; }

  std::string str() const override;
  bool equals(const Encoding &other) const override;
  int rank() const override { return parent->rank() - 1; }
  /// The parent's layout for `shape` with extent 1 inserted at `dim`, with that output dim
  /// dropped (later dims renumbered). Register bases that become zero are removed (a thread
  /// keeps one copy of each element); lane and warp bases stay as broadcast.
  LinearLayout toLinearLayout(const std::vector<int64_t> &shape) const override;

private:
  int dim;
  EncodingPtr parent;
};

} // namespace tessera
