// DotOperandEncoding -> LinearLayout and its text form.
//
// Built from the same per-level steps as the parent MmaEncoding (layout_detail::
// buildTileLayout), so that the A operand with kWidth 2 and the accumulator share their lane
// and warp bases: that is what lets a dot's result feed the next dot from registers.
#include "layout/dot_operand.h"

#include "layout/blocked.h"

#include <stdexcept>

namespace tessera {

DotOperandEncoding::DotOperandEncoding(int opIdxIn, EncodingPtr parentIn, int kWidthIn)
    : opIdx(opIdxIn), parent(std::move(parentIn)), mma(nullptr), kWidth(kWidthIn) {
  if (opIdx != 0 && opIdx != 1)
    throw std::invalid_argument("DotOperandEncoding: opIdx must be 0 or 1, got " +
                                std::to_string(opIdx));
  mma = dynamic_cast<const MmaEncoding *>(parent.get());
  const auto *blocked = dynamic_cast<const BlockedEncoding *>(parent.get());
  if (!mma && !(blocked && blocked->rank() == 2))
    throw std::invalid_argument("DotOperandEncoding: the parent must be an #mma or a 2-D "
                                "#blocked encoding, got " +
                                (parent ? parent->str() : std::string("null")));
  if (kWidth != 1 && kWidth != 2 && kWidth != 4)
    throw std::invalid_argument("DotOperandEncoding: kWidth must be 1, 2 or 4, got " +
                                std::to_string(kWidth));
}

std::string DotOperandEncoding::str() const {
  return "#dot_op<{opIdx = " + std::to_string(opIdx) + ", parent = " + parent->str() +
         ", kWidth = " + std::to_string(kWidth) + "}>";
}

bool DotOperandEncoding::equals(const Encoding &other) const {
  const auto *operand = dynamic_cast<const DotOperandEncoding *>(&other);
  return operand && operand->opIdx == opIdx && operand->kWidth == kWidth &&
         operand->parent->equals(*parent);
}

LinearLayout DotOperandEncoding::toLinearLayout(const std::vector<int64_t> &shape) const {
  using layout_detail::TileStep;
  if (shape.size() != 2)
    throw std::invalid_argument("DotOperandEncoding::toLinearLayout: expected a 2-D shape");
  if (!mma)
    return toBlockedOperandLayout(shape);
  // The K dim and the other (M for A, N for B) dim of the operand's shape.
  int kDim = opIdx == 0 ? 1 : 0, otherDim = 1 - kDim;
  std::vector<TileStep> registers;
  for (int k = 1; k < kWidth; k *= 2)
    registers.push_back({kDim, k});
  if (opIdx == 0)
    registers.push_back({otherDim, 8});
  registers.push_back({kDim, 4 * kWidth});
  std::vector<TileStep> lanes{
      {kDim, kWidth}, {kDim, 2 * kWidth}, {otherDim, 1}, {otherDim, 2}, {otherDim, 4}};
  // Warps: the parent's bits (N first, then M; M first for wgmma). The warps along the dim
  // the operand lacks hold the same elements: a zero (broadcast) step.
  const std::vector<int> &warpsPerCTA = mma->getWarpsPerCTA();
  // N a warp covers per instruction: 8 (m16n8), or wgmma's N, stepped by registers.
  int warpN = mma->isWgmma() ? mma->getInstrShape()[1] : 8;
  if (opIdx == 1)
    for (int step = 8; step < warpN; step *= 2)
      registers.push_back({otherDim, step});
  std::vector<TileStep> nWarps, mWarps;
  for (int w = 1; w < warpsPerCTA[1]; w *= 2)
    nWarps.push_back(opIdx == 1 ? TileStep{otherDim, warpN * w} : TileStep{kDim, 0});
  for (int w = 1; w < warpsPerCTA[0]; w *= 2)
    mWarps.push_back(opIdx == 0 ? TileStep{otherDim, 16 * w} : TileStep{kDim, 0});
  std::vector<TileStep> warps = mma->isWgmma() ? mWarps : nWarps;
  const std::vector<TileStep> &laterWarps = mma->isWgmma() ? nWarps : mWarps;
  warps.insert(warps.end(), laterWarps.begin(), laterWarps.end());
  std::vector<int64_t> tile(2);
  tile[kDim] = getInstrK();
  tile[otherDim] = opIdx == 0 ? 16 * int64_t(warpsPerCTA[0]) : int64_t(warpN) * warpsPerCTA[1];
  // A repeats along K first (its registers then match the accumulator's, for chained dots);
  // B along N first, so that one ldmatrix.x4 fills the fragments of two n tiles of one k step
  // and a dot can read each k step just before its mma instructions.
  std::vector<int> repeatOrder =
      opIdx == 0 ? std::vector<int>{kDim, otherDim} : std::vector<int>{otherDim, kDim};
  return layout_detail::buildTileLayout(shape, registers, lanes, warps, tile, repeatOrder);
}

} // namespace tessera

namespace tessera {

LinearLayout DotOperandEncoding::toBlockedOperandLayout(const std::vector<int64_t> &shape) const {
  int kDim = opIdx == 0 ? 1 : 0;
  std::vector<int64_t> parentShape = shape;
  parentShape[kDim] = 1; // the accumulator's other dim: broadcast in every hardware level
  LinearLayout parentLayout = parent->toLinearLayout(parentShape)
                                  .transposeOuts({tensorDimName(0), tensorDimName(1)})
                                  .removeZeroBasesAlongDim(kRegisterDim);
  LinearLayout::Bases bases;
  for (const auto &[inDim, vectors] : parentLayout.getBases()) {
    std::vector<LinearLayout::BasisVector> grown;
    if (inDim == kRegisterDim)
      for (int64_t k = 1; k < shape[kDim]; k *= 2) {
        LinearLayout::BasisVector vector(2, 0);
        vector[kDim] = static_cast<int32_t>(k);
        grown.push_back(std::move(vector));
      }
    grown.insert(grown.end(), vectors.begin(), vectors.end());
    bases.emplace_back(inDim, std::move(grown));
  }
  LinearLayout::DimSizes outDims{{tensorDimName(0), static_cast<int32_t>(shape[0])},
                                 {tensorDimName(1), static_cast<int32_t>(shape[1])}};
  return LinearLayout(std::move(bases), std::move(outDims), /*requireSurjective=*/true);
}

} // namespace tessera
