// LinearLayout construction, accessors, evaluation, products and reshuffling of dims.
//
// The GF(2) algebra (rank, compose, invert, sublayouts and quotients) lives in
// linear_layout_algebra.cpp. See linear_layout.h for the semantics of each operation.
#include "layout/linear_layout.h"
#include "layout/integer_utils.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace tessera {

namespace {

using layout_util::isPowerOfTwo;

int log2Exact(int64_t value, const char *what) {
  if (!isPowerOfTwo(value))
    throw std::invalid_argument(std::string("LinearLayout: ") + what +
                                " must be a power of two, got " + std::to_string(value));
  return __builtin_ctzll(static_cast<uint64_t>(value));
}

/// The smallest power of two above `value` (an output size that fits it).
int32_t nextPowerOfTwo(int32_t value) {
  int64_t result = 1;
  while (result <= value)
    result <<= 1;
  if (result > (int64_t(1) << 30))
    throw std::invalid_argument("LinearLayout: basis value " + std::to_string(value) +
                                " needs an output dim larger than 2^30");
  return static_cast<int32_t>(result);
}

template <typename Pairs> int findName(const Pairs &pairs, const std::string &name) {
  for (size_t i = 0; i < pairs.size(); ++i)
    if (pairs[i].first == name)
      return static_cast<int>(i);
  return -1;
}

bool contains(const std::vector<std::string> &names, const std::string &name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

/// The shortest list containing both `first` and `second` as subsequences, preferring
/// `first`'s dims when either could come next. Used to merge the dims of a product.
std::vector<std::string> mergeDimOrders(const std::vector<std::string> &first,
                                        const std::vector<std::string> &second) {
  std::vector<std::string> merged;
  size_t i = 0, j = 0;
  while (i < first.size() && j < second.size()) {
    if (first[i] == second[j]) {
      merged.push_back(first[i++]);
      ++j;
    } else if (!contains(second, first[i])) {
      merged.push_back(first[i++]);
    } else if (!contains(first, second[j])) {
      merged.push_back(second[j++]);
    } else {
      throw std::invalid_argument("LinearLayout product: dims '" + first[i] + "' and '" +
                                  second[j] + "' appear in different orders");
    }
  }
  merged.insert(merged.end(), first.begin() + i, first.end());
  merged.insert(merged.end(), second.begin() + j, second.end());
  return merged;
}

} // namespace

std::string tensorDimName(int axis) { return "dim" + std::to_string(axis); }

LinearLayout::LinearLayout(Bases basesIn, const std::vector<std::string> &outDimNames)
    : bases(std::move(basesIn)) {
  for (size_t d = 0; d < outDimNames.size(); ++d) {
    int32_t largest = 0;
    for (const auto &[inDim, vectors] : bases)
      for (const BasisVector &vector : vectors)
        if (d < vector.size())
          largest = std::max(largest, vector[d]);
    outDims.emplace_back(outDimNames[d], nextPowerOfTwo(largest));
  }
  checkInvariants(/*requireSurjective=*/true);
}

LinearLayout::LinearLayout(Bases basesIn, DimSizes outDimsIn, bool requireSurjective)
    : bases(std::move(basesIn)), outDims(std::move(outDimsIn)) {
  checkInvariants(requireSurjective);
}

void LinearLayout::checkInvariants(bool requireSurjective) const {
  auto fail = [&](const std::string &message) {
    throw std::invalid_argument("LinearLayout: " + message);
  };
  std::vector<std::string> seen;
  for (const auto &[name, size] : outDims) {
    if (contains(seen, name))
      fail("duplicate output dim '" + name + "'");
    seen.push_back(name);
    log2Exact(size, "output dim size");
  }
  seen.clear();
  int totalInBits = 0;
  for (const auto &[inDim, vectors] : bases) {
    if (contains(seen, inDim))
      fail("duplicate input dim '" + inDim + "'");
    seen.push_back(inDim);
    totalInBits += static_cast<int>(vectors.size());
    for (const BasisVector &vector : vectors) {
      if (vector.size() != outDims.size())
        fail("a basis vector of '" + inDim + "' has " + std::to_string(vector.size()) +
             " values for " + std::to_string(outDims.size()) + " output dims");
      for (size_t d = 0; d < vector.size(); ++d)
        if (vector[d] < 0 || vector[d] >= outDims[d].second)
          fail("basis value " + std::to_string(vector[d]) + " of '" + inDim +
               "' is outside output dim '" + outDims[d].first + "' of size " +
               std::to_string(outDims[d].second));
    }
  }
  // The algebra packs inputs and outputs into 64-bit words.
  if (totalInBits > 63 || getTotalOutDimSizeLog2() > 63)
    fail("more than 63 input or output bits");
  if (requireSurjective && !isSurjective())
    fail("layout is not surjective: " + str());
}

LinearLayout LinearLayout::strided1D(int32_t size, int32_t stride, const std::string &inDim,
                                     const std::string &outDim) {
  int sizeLog2 = log2Exact(size, "size");
  log2Exact(stride, "stride");
  std::vector<BasisVector> vectors;
  for (int i = 0; i < sizeLog2; ++i)
    vectors.push_back({stride << i});
  return LinearLayout({{inDim, vectors}}, {{outDim, size * stride}}, /*requireSurjective=*/false);
}

LinearLayout LinearLayout::identity1D(int32_t size, const std::string &inDim,
                                      const std::string &outDim) {
  return strided1D(size, 1, inDim, outDim);
}

LinearLayout LinearLayout::zeros1D(int32_t size, const std::string &inDim,
                                   const std::string &outDim, int32_t outDimSize) {
  int sizeLog2 = log2Exact(size, "size");
  std::vector<BasisVector> vectors(sizeLog2, BasisVector{0});
  return LinearLayout({{inDim, vectors}}, {{outDim, outDimSize}}, /*requireSurjective=*/false);
}

std::vector<std::string> LinearLayout::getInDimNames() const {
  std::vector<std::string> names;
  for (const auto &entry : bases)
    names.push_back(entry.first);
  return names;
}

std::vector<std::string> LinearLayout::getOutDimNames() const {
  std::vector<std::string> names;
  for (const auto &entry : outDims)
    names.push_back(entry.first);
  return names;
}

bool LinearLayout::hasInDim(const std::string &inDim) const { return findName(bases, inDim) >= 0; }
bool LinearLayout::hasOutDim(const std::string &outDim) const {
  return findName(outDims, outDim) >= 0;
}

int LinearLayout::getOutDimIndex(const std::string &outDim) const {
  int index = findName(outDims, outDim);
  if (index < 0)
    throw std::invalid_argument("LinearLayout: no output dim '" + outDim + "' in " + str());
  return index;
}

const std::vector<LinearLayout::BasisVector> &
LinearLayout::basesOf(const std::string &inDim) const {
  int index = findName(bases, inDim);
  if (index < 0)
    throw std::invalid_argument("LinearLayout: no input dim '" + inDim + "' in " + str());
  return bases[index].second;
}

int LinearLayout::getInDimSizeLog2(const std::string &inDim) const {
  return static_cast<int>(basesOf(inDim).size());
}

int LinearLayout::getOutDimSizeLog2(const std::string &outDim) const {
  return __builtin_ctz(static_cast<uint32_t>(outDims[getOutDimIndex(outDim)].second));
}

int LinearLayout::getTotalInDimSizeLog2() const {
  int total = 0;
  for (const auto &entry : bases)
    total += static_cast<int>(entry.second.size());
  return total;
}

int LinearLayout::getTotalOutDimSizeLog2() const {
  int total = 0;
  for (const auto &entry : outDims)
    total += __builtin_ctz(static_cast<uint32_t>(entry.second));
  return total;
}

const LinearLayout::BasisVector &LinearLayout::getBasis(const std::string &inDim, int pos) const {
  const auto &vectors = basesOf(inDim);
  if (pos < 0 || pos >= static_cast<int>(vectors.size()))
    throw std::invalid_argument("LinearLayout: input dim '" + inDim + "' has no basis " +
                                std::to_string(pos));
  return vectors[pos];
}

int32_t LinearLayout::getBasis(const std::string &inDim, int pos, const std::string &outDim) const {
  return getBasis(inDim, pos)[getOutDimIndex(outDim)];
}

std::vector<int> LinearLayout::outDimBitOffsets() const {
  std::vector<int> offsets;
  int offset = 0;
  for (const auto &entry : outDims) {
    offsets.push_back(offset);
    offset += __builtin_ctz(static_cast<uint32_t>(entry.second));
  }
  return offsets;
}

uint64_t LinearLayout::flattenOutValue(const BasisVector &value) const {
  std::vector<int> offsets = outDimBitOffsets();
  uint64_t flat = 0;
  for (size_t d = 0; d < value.size(); ++d)
    flat |= static_cast<uint64_t>(value[d]) << offsets[d];
  return flat;
}

LinearLayout::BasisVector LinearLayout::unflattenOutValue(uint64_t value) const {
  BasisVector result;
  for (const auto &entry : outDims) {
    result.push_back(static_cast<int32_t>(value & static_cast<uint64_t>(entry.second - 1)));
    value >>= __builtin_ctz(static_cast<uint32_t>(entry.second));
  }
  return result;
}

LinearLayout::BasisVector LinearLayout::unflattenInValue(uint64_t value) const {
  BasisVector result;
  for (const auto &entry : bases) {
    int bits = static_cast<int>(entry.second.size());
    result.push_back(static_cast<int32_t>(value & ((uint64_t(1) << bits) - 1)));
    value >>= bits;
  }
  return result;
}

std::vector<uint64_t> LinearLayout::flatColumns() const {
  std::vector<uint64_t> columns;
  for (const auto &entry : bases)
    for (const BasisVector &vector : entry.second)
      columns.push_back(flattenOutValue(vector));
  return columns;
}

uint64_t LinearLayout::applyFlat(uint64_t flatInput) const {
  std::vector<uint64_t> columns = flatColumns();
  uint64_t result = 0;
  for (size_t bit = 0; bit < columns.size(); ++bit)
    if ((flatInput >> bit) & 1)
      result ^= columns[bit];
  return result;
}

LinearLayout::DimValues LinearLayout::apply(const DimValues &ins) const {
  BasisVector out(outDims.size(), 0);
  for (const auto &[inDim, value] : ins) {
    const auto &vectors = basesOf(inDim);
    if (value < 0 || (value >> vectors.size()) != 0)
      throw std::invalid_argument("LinearLayout::apply: " + inDim + " = " + std::to_string(value) +
                                  " is out of range");
    for (size_t bit = 0; bit < vectors.size(); ++bit)
      if ((value >> bit) & 1)
        for (size_t d = 0; d < out.size(); ++d)
          out[d] ^= vectors[bit][d];
  }
  DimValues result;
  for (size_t d = 0; d < outDims.size(); ++d)
    result.emplace_back(outDims[d].first, out[d]);
  return result;
}

LinearLayout operator*(const LinearLayout &inner, const LinearLayout &outer) {
  std::vector<std::string> inNames = mergeDimOrders(inner.getInDimNames(), outer.getInDimNames());
  std::vector<std::string> outNames =
      mergeDimOrders(inner.getOutDimNames(), outer.getOutDimNames());

  // Sizes multiply on shared output dims; outer's values move above inner's bits.
  LinearLayout::DimSizes outDims;
  std::vector<int> innerShift;
  for (const std::string &name : outNames) {
    int32_t innerSize = inner.hasOutDim(name) ? inner.getOutDimSize(name) : 1;
    int32_t outerSize = outer.hasOutDim(name) ? outer.getOutDimSize(name) : 1;
    outDims.emplace_back(name, innerSize * outerSize);
    innerShift.push_back(__builtin_ctz(static_cast<uint32_t>(innerSize)));
  }

  auto remap = [&](const LinearLayout &layout, const LinearLayout::BasisVector &vector,
                   bool shift) {
    LinearLayout::BasisVector result(outNames.size(), 0);
    for (size_t d = 0; d < outNames.size(); ++d) {
      if (!layout.hasOutDim(outNames[d]))
        continue;
      int32_t value = vector[layout.getOutDimIndex(outNames[d])];
      result[d] = shift ? value << innerShift[d] : value;
    }
    return result;
  };

  LinearLayout::Bases bases;
  for (const std::string &name : inNames) {
    std::vector<LinearLayout::BasisVector> vectors;
    if (inner.hasInDim(name))
      for (const auto &vector : inner.basesOf(name))
        vectors.push_back(remap(inner, vector, /*shift=*/false));
    if (outer.hasInDim(name))
      for (const auto &vector : outer.basesOf(name))
        vectors.push_back(remap(outer, vector, /*shift=*/true));
    bases.emplace_back(name, std::move(vectors));
  }
  return LinearLayout(std::move(bases), std::move(outDims), /*requireSurjective=*/false);
}

LinearLayout LinearLayout::transposeIns(const std::vector<std::string> &newInDimOrder) const {
  std::vector<std::string> sortedNew = newInDimOrder, sortedOld = getInDimNames();
  std::sort(sortedNew.begin(), sortedNew.end());
  std::sort(sortedOld.begin(), sortedOld.end());
  if (sortedNew != sortedOld)
    throw std::invalid_argument("LinearLayout::transposeIns: not a permutation of the input dims");
  Bases newBases;
  for (const std::string &name : newInDimOrder)
    newBases.emplace_back(name, basesOf(name));
  return LinearLayout(std::move(newBases), outDims, /*requireSurjective=*/false);
}

LinearLayout LinearLayout::transposeOuts(const std::vector<std::string> &newOutDimOrder) const {
  std::vector<std::string> sortedNew = newOutDimOrder, sortedOld = getOutDimNames();
  std::sort(sortedNew.begin(), sortedNew.end());
  std::sort(sortedOld.begin(), sortedOld.end());
  if (sortedNew != sortedOld)
    throw std::invalid_argument(
        "LinearLayout::transposeOuts: not a permutation of the output dims");
  std::vector<int> permutation;
  DimSizes newOutDims;
  for (const std::string &name : newOutDimOrder) {
    permutation.push_back(getOutDimIndex(name));
    newOutDims.push_back(outDims[permutation.back()]);
  }
  Bases newBases;
  for (const auto &[inDim, vectors] : bases) {
    std::vector<BasisVector> newVectors;
    for (const BasisVector &vector : vectors) {
      BasisVector permuted;
      for (int d : permutation)
        permuted.push_back(vector[d]);
      newVectors.push_back(std::move(permuted));
    }
    newBases.emplace_back(inDim, std::move(newVectors));
  }
  return LinearLayout(std::move(newBases), std::move(newOutDims), /*requireSurjective=*/false);
}

std::string LinearLayout::str() const {
  std::ostringstream os;
  os << "{";
  for (size_t i = 0; i < bases.size(); ++i) {
    os << (i ? ", " : "") << bases[i].first << ": [";
    for (size_t j = 0; j < bases[i].second.size(); ++j) {
      os << (j ? ", " : "") << "[";
      for (size_t d = 0; d < bases[i].second[j].size(); ++d)
        os << (d ? ", " : "") << bases[i].second[j][d];
      os << "]";
    }
    os << "]";
  }
  os << "} -> {";
  for (size_t d = 0; d < outDims.size(); ++d)
    os << (d ? ", " : "") << outDims[d].first << ": " << outDims[d].second;
  os << "}";
  return os.str();
}

bool operator==(const LinearLayout &lhs, const LinearLayout &rhs) {
  return lhs.bases == rhs.bases && lhs.outDims == rhs.outDims;
}

std::ostream &operator<<(std::ostream &os, const LinearLayout &layout) {
  return os << layout.str();
}

} // namespace tessera
