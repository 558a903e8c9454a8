// LinearLayout algebra over GF(2): rank, composition, inversion, sublayouts and quotients,
// vector widths.
//
// Each layout is flattened to one packed output word per input bit (see flatColumns) and
// reduced with gf2::XorBasis. Layout conversion planning (conversion.cpp) is built on
// tryInvertAndCompose from this file.
#include "layout/gf2_basis.h"
#include "layout/linear_layout.h"

#include <algorithm>
#include <stdexcept>

namespace tessera {

namespace {

bool isListed(const std::vector<std::string> &names, const std::string &name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool isZeroVector(const LinearLayout::BasisVector &vector) {
  return std::all_of(vector.begin(), vector.end(), [](int32_t value) { return value == 0; });
}

} // namespace

int LinearLayout::getRank() const {
  gf2::XorBasis basis;
  for (uint64_t column : flatColumns())
    basis.insert(column, 0);
  return basis.rank();
}

LinearLayout::DimValues LinearLayout::getFreeVariableMasks() const {
  gf2::XorBasis basis;
  DimValues masks;
  for (const auto &[inDim, vectors] : bases) {
    int32_t mask = 0;
    for (size_t bit = 0; bit < vectors.size(); ++bit) {
      uint64_t column = flattenOutValue(vectors[bit]);
      if (basis.reduce(column).remainder == 0)
        mask |= int32_t(1) << bit; // dependent on earlier bits: a free variable
      else
        basis.insert(column, 0);
    }
    masks.emplace_back(inDim, mask);
  }
  return masks;
}

int32_t LinearLayout::getNumConsecutiveInOut(const std::string &inDim,
                                             const std::string &outDim) const {
  const auto &vectors = basesOf(inDim);
  int outIndex = getOutDimIndex(outDim);
  // 1. The leading bases of inDim that step outDim by 1, 2, 4, ... and nothing else.
  int consecutiveLog2 = 0;
  for (const BasisVector &vector : vectors) {
    bool isUnitStep = true;
    for (size_t d = 0; d < vector.size(); ++d)
      isUnitStep &= vector[d] == (static_cast<int>(d) == outIndex ? 1 << consecutiveLog2 : 0);
    if (!isUnitStep)
      break;
    ++consecutiveLog2;
  }
  // 2. Every other basis must leave those low bits of outDim alone, otherwise XOR with the
  //    start of a run would scramble it instead of offsetting it.
  int32_t otherBits = 0;
  for (const auto &[name, otherVectors] : bases)
    for (size_t bit = 0; bit < otherVectors.size(); ++bit)
      if (name != inDim || static_cast<int>(bit) >= consecutiveLog2)
        otherBits |= otherVectors[bit][outIndex];
  int limitLog2 = otherBits ? __builtin_ctz(static_cast<uint32_t>(otherBits)) : consecutiveLog2;
  return int32_t(1) << std::min(consecutiveLog2, limitLog2);
}

int32_t LinearLayout::getNumConsecutiveInOut() const {
  if (bases.empty() || bases.front().second.empty())
    return 1;
  const BasisVector &first = bases.front().second.front();
  for (size_t d = 0; d < first.size(); ++d)
    if (first[d] != 0)
      return getNumConsecutiveInOut(bases.front().first, outDims[d].first);
  return 1;
}

LinearLayout LinearLayout::compose(const LinearLayout &outer) const {
  std::vector<std::string> mine = getOutDimNames(), theirs = outer.getInDimNames();
  std::sort(mine.begin(), mine.end());
  std::sort(theirs.begin(), theirs.end());
  if (mine != theirs)
    throw std::invalid_argument("LinearLayout::compose: output dims of " + str() +
                                " differ from input dims of " + outer.str());
  for (const auto &[name, size] : outDims)
    if (size > outer.getInDimSize(name))
      throw std::invalid_argument("LinearLayout::compose: output dim '" + name +
                                  "' is larger than outer's input dim");
  Bases newBases;
  for (const auto &[inDim, vectors] : bases) {
    std::vector<BasisVector> newVectors;
    for (const BasisVector &vector : vectors) {
      DimValues asInput;
      for (size_t d = 0; d < outDims.size(); ++d)
        asInput.emplace_back(outDims[d].first, vector[d]);
      BasisVector image;
      for (const auto &entry : outer.apply(asInput))
        image.push_back(entry.second);
      newVectors.push_back(std::move(image));
    }
    newBases.emplace_back(inDim, std::move(newVectors));
  }
  return LinearLayout(std::move(newBases), outer.outDims, /*requireSurjective=*/false);
}

LinearLayout LinearLayout::invertAndCompose(const LinearLayout &outer) const {
  std::optional<LinearLayout> result = tryInvertAndCompose(outer);
  if (!result)
    throw std::invalid_argument("LinearLayout::invertAndCompose: " + str() +
                                " produces values that " + outer.str() + " never does");
  return *result;
}

std::optional<LinearLayout> LinearLayout::tryInvertAndCompose(const LinearLayout &outer) const {
  std::vector<std::string> mine = getOutDimNames(), theirs = outer.getOutDimNames();
  std::sort(mine.begin(), mine.end());
  std::sort(theirs.begin(), theirs.end());
  if (mine != theirs)
    throw std::invalid_argument("LinearLayout::invertAndCompose: output dims of " + str() +
                                " differ from those of " + outer.str());

  // Plan:
  //  1. Row-reduce outer's columns, remembering which input bits build each pivot vector and
  //     collecting the kernel (input combinations that outer sends to 0).
  //  2. For each basis b of this layout, express b (in outer's output packing) as a
  //     combination y of outer's input bits; fail if b is outside outer's image.
  //  3. Reduce y by the kernel so that it is the smallest input giving b. Both steps are
  //     linear in b, so the per-basis solutions form a linear layout.
  gf2::XorBasis image, kernel;
  std::vector<uint64_t> columns = outer.flatColumns();
  for (size_t bit = 0; bit < columns.size(); ++bit) {
    uint64_t dependency = image.insert(columns[bit], uint64_t(1) << bit);
    if (dependency != 0)
      kernel.insert(dependency, 0);
  }

  // Where both layouts broadcast the same input bit (zero bases in both), keep that bit in
  // place: any solution is valid there, and the identity lets conversion planning see that
  // broadcast threads need not move.
  auto sharedZeroBit = [&](const std::string &inDim, size_t bit) -> std::optional<uint64_t> {
    int offset = 0;
    for (const auto &[outerDim, outerVectors] : outer.bases) {
      if (outerDim == inDim && bit < outerVectors.size() && columns[offset + bit] == 0)
        return uint64_t(1) << (offset + bit);
      offset += static_cast<int>(outerVectors.size());
    }
    return std::nullopt;
  };

  Bases newBases;
  for (const auto &[inDim, vectors] : bases) {
    std::vector<BasisVector> newVectors;
    for (const BasisVector &vector : vectors) {
      std::optional<uint64_t> keep =
          isZeroVector(vector) ? sharedZeroBit(inDim, newVectors.size()) : std::nullopt;
      if (keep) {
        newVectors.push_back(outer.unflattenInValue(*keep));
        continue;
      }
      BasisVector inOuterOrder(outer.outDims.size(), 0);
      for (size_t d = 0; d < outDims.size(); ++d)
        inOuterOrder[outer.getOutDimIndex(outDims[d].first)] = vector[d];
      for (size_t d = 0; d < inOuterOrder.size(); ++d)
        if (inOuterOrder[d] >= outer.outDims[d].second)
          return std::nullopt; // beyond outer's output dims
      gf2::XorBasis::Reduction solved = image.reduce(outer.flattenOutValue(inOuterOrder));
      if (solved.remainder != 0)
        return std::nullopt; // not in outer's image
      uint64_t smallest = kernel.reduce(solved.combination).remainder;
      newVectors.push_back(outer.unflattenInValue(smallest));
    }
    newBases.emplace_back(inDim, std::move(newVectors));
  }
  DimSizes newOutDims;
  for (const auto &entry : outer.bases)
    newOutDims.emplace_back(entry.first, int32_t(1) << entry.second.size());
  return LinearLayout(std::move(newBases), std::move(newOutDims), /*requireSurjective=*/false);
}

LinearLayout LinearLayout::pseudoinvert() const {
  if (!isSurjective())
    throw std::invalid_argument("LinearLayout::pseudoinvert: layout is not surjective: " + str());
  // The identity on the output dims, solved against this layout.
  LinearLayout identity;
  for (const auto &[name, size] : outDims)
    identity *= identity1D(size, name, name);
  return identity.invertAndCompose(*this);
}

LinearLayout LinearLayout::invert() const {
  if (!isInvertible())
    throw std::invalid_argument("LinearLayout::invert: layout is not bijective: " + str());
  return pseudoinvert();
}

LinearLayout LinearLayout::sublayout(const std::vector<std::string> &inDimNames,
                                     const std::vector<std::string> &outDimNames) const {
  std::vector<int> keptOut;
  DimSizes newOutDims;
  for (size_t d = 0; d < outDims.size(); ++d)
    if (isListed(outDimNames, outDims[d].first)) {
      keptOut.push_back(static_cast<int>(d));
      newOutDims.push_back(outDims[d]);
    }
  Bases newBases;
  for (const auto &[inDim, vectors] : bases) {
    if (!isListed(inDimNames, inDim))
      continue;
    std::vector<BasisVector> newVectors;
    for (const BasisVector &vector : vectors) {
      BasisVector kept;
      for (int d : keptOut)
        kept.push_back(vector[d]);
      newVectors.push_back(std::move(kept));
    }
    newBases.emplace_back(inDim, std::move(newVectors));
  }
  return LinearLayout(std::move(newBases), std::move(newOutDims), /*requireSurjective=*/false);
}

bool LinearLayout::sublayoutIsZero(const std::vector<std::string> &inDimNames,
                                   const std::vector<std::string> &outDimNames) const {
  for (const auto &entry : sublayout(inDimNames, outDimNames).bases)
    if (!std::all_of(entry.second.begin(), entry.second.end(), isZeroVector))
      return false;
  return true;
}

LinearLayout LinearLayout::removeZeroBasesAlongDim(const std::string &inDim) const {
  basesOf(inDim); // throws when the dim is absent
  Bases newBases = bases;
  auto &vectors = std::find_if(newBases.begin(), newBases.end(), [&](const auto &entry) {
                    return entry.first == inDim;
                  })->second;
  vectors.erase(std::remove_if(vectors.begin(), vectors.end(), isZeroVector), vectors.end());
  return LinearLayout(std::move(newBases), outDims, /*requireSurjective=*/false);
}

bool LinearLayout::isTrivialOver(const std::vector<std::string> &dimNames) const {
  std::vector<std::string> otherIns, otherOuts;
  for (const auto &entry : bases)
    if (!isListed(dimNames, entry.first))
      otherIns.push_back(entry.first);
  for (const auto &entry : outDims)
    if (!isListed(dimNames, entry.first))
      otherOuts.push_back(entry.first);
  // Block matrix [[A, B], [C, D]] with D the dims themselves: need B = 0, C = 0, D = I.
  if (!sublayoutIsZero(otherIns, dimNames) || !sublayoutIsZero(dimNames, otherOuts))
    return false;
  for (const std::string &dim : dimNames) {
    int inLog2 = hasInDim(dim) ? getInDimSizeLog2(dim) : 0;
    int outLog2 = hasOutDim(dim) ? getOutDimSizeLog2(dim) : 0;
    if (inLog2 != outLog2)
      return false;
    for (int bit = 0; bit < inLog2; ++bit)
      for (const std::string &target : dimNames) {
        if (!hasOutDim(target))
          continue;
        int32_t expected = target == dim ? int32_t(1) << bit : 0;
        if (getBasis(dim, bit, target) != expected)
          return false;
      }
  }
  return true;
}

std::optional<LinearLayout> LinearLayout::quotient(const std::vector<std::string> &dimNames) const {
  if (!isTrivialOver(dimNames))
    return std::nullopt;
  std::vector<std::string> keptIns, keptOuts;
  for (const auto &entry : bases)
    if (!isListed(dimNames, entry.first))
      keptIns.push_back(entry.first);
  for (const auto &entry : outDims)
    if (!isListed(dimNames, entry.first))
      keptOuts.push_back(entry.first);
  return sublayout(keptIns, keptOuts);
}

} // namespace tessera
