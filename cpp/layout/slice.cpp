// SliceEncoding -> LinearLayout and its text form.
//
// Slicing is computed on the parent's linear layout, so it works for any parent encoding
// (blocked today, mma and friends later) without per-parent code.
#include "layout/slice.h"

#include <algorithm>
#include <stdexcept>

namespace tessera {

SliceEncoding::SliceEncoding(int dimIn, EncodingPtr parentIn)
    : dim(dimIn), parent(std::move(parentIn)) {
  if (!parent)
    throw std::invalid_argument("SliceEncoding: null parent");
  if (dim < 0 || dim >= parent->rank())
    throw std::invalid_argument("SliceEncoding: dim " + std::to_string(dim) +
                                " is not a dim of the rank-" + std::to_string(parent->rank()) +
                                " parent " + parent->str());
}

std::string SliceEncoding::str() const {
  return "#slice<{dim = " + std::to_string(dim) + ", parent = " + parent->str() + "}>";
}

bool SliceEncoding::equals(const Encoding &other) const {
  const auto *slice = dynamic_cast<const SliceEncoding *>(&other);
  return slice && slice->dim == dim && slice->parent->equals(*parent);
}

LinearLayout SliceEncoding::toLinearLayout(const std::vector<int64_t> &shape) const {
  if (static_cast<int>(shape.size()) != rank())
    throw std::invalid_argument("SliceEncoding::toLinearLayout: shape rank " +
                                std::to_string(shape.size()) + " != encoding rank " +
                                std::to_string(rank()));
  std::vector<int64_t> parentShape = shape;
  parentShape.insert(parentShape.begin() + dim, 1);
  // With extent 1 the parent already broadcasts along `dim` (all bases are 0 there), so
  // dropping that output coordinate loses nothing.
  std::vector<std::string> parentDimNames;
  for (int axis = 0; axis < parent->rank(); ++axis)
    parentDimNames.push_back(tensorDimName(axis));
  LinearLayout parentLayout = parent->toLinearLayout(parentShape).transposeOuts(parentDimNames);

  LinearLayout::Bases bases;
  for (const auto &[inDim, vectors] : parentLayout.getBases()) {
    std::vector<LinearLayout::BasisVector> sliced;
    for (LinearLayout::BasisVector vector : vectors) {
      vector.erase(vector.begin() + dim);
      bool isZero = std::all_of(vector.begin(), vector.end(), [](int32_t v) { return v == 0; });
      if (isZero && inDim == kRegisterDim)
        continue; // a duplicate register: keep one copy per thread
      sliced.push_back(std::move(vector));
    }
    bases.emplace_back(inDim, std::move(sliced));
  }
  LinearLayout::DimSizes outDims;
  for (int axis = 0; axis < rank(); ++axis)
    outDims.emplace_back(tensorDimName(axis), static_cast<int32_t>(shape[axis]));
  return LinearLayout(std::move(bases), std::move(outDims), /*requireSurjective=*/true);
}

} // namespace tessera
