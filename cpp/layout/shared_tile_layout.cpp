// Shared-memory tile offsets (swizzled or padded) and the bank-conflict simulator.
//
// offsetOf is the single source of truth for placement; toLinearLayout derives the linear
// form from it, so the two cannot disagree.
#include "layout/shared_tile_layout.h"
#include "layout/integer_utils.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace tessera {

namespace {

using layout_util::isPowerOfTwo;

constexpr int kNumBanks = 32;
constexpr int kBankBytes = 4;

} // namespace

SharedTileLayout SharedTileLayout::rowMajor(const std::vector<int64_t> &shape) {
  SharedTileLayout tile;
  tile.shape = shape;
  for (int axis = static_cast<int>(shape.size()) - 1; axis >= 0; --axis)
    tile.order.push_back(axis);
  return tile;
}

void SharedTileLayout::verify() const {
  auto fail = [&](const std::string &message) {
    throw std::invalid_argument("SharedTileLayout " + str() + ": " + message);
  };
  if (shape.empty() || order.size() != shape.size())
    fail("order must list every dim");
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int>(i))
      fail("order is not a permutation");
  for (int64_t extent : shape)
    if (!isPowerOfTwo(extent))
      fail("extents must be powers of two");
  if (!isPowerOfTwo(vec) || !isPowerOfTwo(perPhase) || !isPowerOfTwo(maxPhase))
    fail("vec, perPhase and maxPhase must be powers of two");
  if (blockCols < 0 || (blockCols > 0 && !isPowerOfTwo(blockCols)))
    fail("blockCols must be 0 or a power of two");
  if (maxPhase > 1 && int64_t(vec) * maxPhase > storedRowLength())
    fail("vec * maxPhase exceeds the row length");
  if (padElements < 0 || (padElements > 0 && maxPhase > 1))
    fail("padding must be >= 0 and cannot be combined with a swizzle");
  if (padElements > 0 && blockCols > 0)
    fail("padding cannot be combined with column blocks");
}

int64_t SharedTileLayout::storedRowLength() const {
  int64_t rowLength = shape[order[0]];
  return blockCols > 0 && order.size() > 1 ? std::min<int64_t>(blockCols, rowLength) : rowLength;
}

int64_t SharedTileLayout::offsetOf(const std::vector<int64_t> &coords) const {
  if (coords.size() != shape.size())
    throw std::invalid_argument("SharedTileLayout::offsetOf: wrong number of coordinates");
  int64_t rowLength = storedRowLength();
  int64_t column = coords[order[0]] % rowLength;
  int64_t block = coords[order[0]] / rowLength; // 0 unless the rows are cut into blocks
  if (maxPhase > 1 && order.size() > 1) {
    // Swizzle whole vec-element chunks so that vectorized accesses stay contiguous.
    int64_t phase = (coords[order[1]] / perPhase) % maxPhase;
    column = (((column / vec) ^ phase) * vec) + column % vec;
  }
  // Rows of the 2-D tile, then column blocks, then the outer dims (slots) enumerate the
  // stored rows.
  int64_t outer = 0;
  for (size_t i = order.size(); i-- > 2;)
    outer = outer * shape[order[i]] + coords[order[i]];
  int64_t numBlocks = shape[order[0]] / rowLength;
  int64_t row = 0;
  if (order.size() > 1)
    row = (outer * numBlocks + block) * shape[order[1]] + coords[order[1]];
  return row * (rowLength + padElements) + column;
}

int64_t SharedTileLayout::allocationSize() const {
  int64_t rows = 1;
  for (size_t i = 1; i < order.size(); ++i)
    rows *= shape[order[i]];
  return rows * (shape[order[0]] + padElements);
}

LinearLayout SharedTileLayout::toLinearLayout() const {
  verify();
  if (!isLinear())
    throw std::invalid_argument("SharedTileLayout: a padded tile is not a linear layout");
  // Build tensor coords -> offset from the offsets of single-bit coordinates, then invert.
  LinearLayout::Bases bases;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    std::vector<LinearLayout::BasisVector> vectors;
    for (int64_t value = 1; value < shape[axis]; value *= 2) {
      std::vector<int64_t> coords(shape.size(), 0);
      coords[axis] = value;
      vectors.push_back({static_cast<int32_t>(offsetOf(coords))});
    }
    bases.emplace_back(tensorDimName(static_cast<int>(axis)), std::move(vectors));
  }
  LinearLayout toOffset(std::move(bases), {{kOffsetDim, static_cast<int32_t>(allocationSize())}},
                        /*requireSurjective=*/true);
  return toOffset.invert();
}

std::string SharedTileLayout::str() const {
  std::ostringstream os;
  os << "shared<shape = [";
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << "], order = [";
  for (size_t i = 0; i < order.size(); ++i)
    os << (i ? ", " : "") << order[i];
  os << "], vec = " << vec << ", perPhase = " << perPhase << ", maxPhase = " << maxPhase
     << ", pad = " << padElements;
  if (blockCols > 0)
    os << ", blockCols = " << blockCols;
  os << ">";
  return os.str();
}

HeldElements listHeldElements(const LinearLayout &registerLayout) {
  std::vector<std::string> tensorDims;
  for (int axis = 0; axis < registerLayout.getNumOutDims(); ++axis)
    tensorDims.push_back(tensorDimName(axis));
  // Hardware bits in table order (register fastest, then lane, then warp), each with its
  // basis vector in tensor dim order.
  HeldElements held;
  std::vector<std::vector<int64_t>> columns;
  auto addDim = [&](const char *dim, int &size) {
    size = registerLayout.hasInDim(dim) ? registerLayout.getInDimSize(dim) : 1;
    for (int bit = 0; (1 << bit) < size; ++bit) {
      std::vector<int64_t> column;
      for (const std::string &tensorDim : tensorDims)
        column.push_back(registerLayout.getBasis(dim, bit, tensorDim)); // throws if not dimN
      columns.push_back(std::move(column));
    }
  };
  addDim(kRegisterDim, held.numRegisters);
  addDim(kLaneDim, held.numLanes);
  addDim(kWarpDim, held.numWarps);
  for (const std::string &tensorDim : tensorDims)
    held.shape.push_back(registerLayout.getOutDimSize(tensorDim));

  // Each index's coordinates are those of the index with its lowest set bit cleared, XORed
  // with that bit's basis vector (linearity), so nothing is evaluated twice.
  int64_t count = int64_t(held.numRegisters) * held.numLanes * held.numWarps;
  held.coords.assign(count, std::vector<int64_t>(tensorDims.size(), 0));
  for (int64_t index = 1; index < count; ++index) {
    const std::vector<int64_t> &column = columns[__builtin_ctzll(static_cast<uint64_t>(index))];
    const std::vector<int64_t> &previous = held.coords[index & (index - 1)];
    for (size_t axis = 0; axis < column.size(); ++axis)
      held.coords[index][axis] = previous[axis] ^ column[axis];
  }
  return held;
}

SharedAccessTable computeSharedOffsets(const HeldElements &held, const SharedTileLayout &tile) {
  tile.verify();
  if (held.shape != tile.shape)
    throw std::invalid_argument("computeSharedOffsets: the layout's tensor does not match tile " +
                                tile.str());
  SharedAccessTable table;
  table.numRegisters = held.numRegisters;
  table.numLanes = held.numLanes;
  table.numWarps = held.numWarps;
  if (!tile.isLinear()) {
    table.offsets.reserve(held.coords.size());
    for (const std::vector<int64_t> &coords : held.coords)
      table.offsets.push_back(tile.offsetOf(coords));
    return table;
  }
  // An unpadded tile's offset is linear over GF(2) in the coordinates (toLinearLayout), and
  // the coordinates are linear in the index (listHeldElements): each index's offset is that of
  // the index with its lowest set bit cleared, XORed with that bit's. One offsetOf per bit,
  // not per element (the conversion-tile search computes thousands of tables).
  int64_t count = static_cast<int64_t>(held.coords.size());
  table.linear = true;
  table.offsets.assign(count, 0);
  for (int64_t bit = 1; bit < count; bit <<= 1)
    table.offsets[bit] = tile.offsetOf(held.coords[bit]);
  for (int64_t index = 1; index < count; ++index)
    if (index & (index - 1))
      table.offsets[index] = table.offsets[index & (index - 1)] ^ table.offsets[index & -index];
  return table;
}

SharedAccessTable computeSharedOffsets(const LinearLayout &registerLayout,
                                       const SharedTileLayout &tile) {
  return computeSharedOffsets(listHeldElements(registerLayout), tile);
}

LinearLayout sharedOffsetLayout(const LinearLayout &registerLayout, const SharedTileLayout &tile) {
  return registerLayout.invertAndCompose(tile.toLinearLayout());
}

namespace {

struct AccessCost {
  int wavefronts = 0; // shared-memory cycles the access takes
  int phases = 0;     // cycles it would take without conflicts
};

/// Lanes served together: wide accesses are split into phases of lanes that together move at
/// most 128 bytes. Throws for options the model does not cover.
int lanesPerPhaseOf(const SharedAccessTable &table, const BankConflictOptions &options) {
  int bytesPerLane = options.elemBytes * options.vectorWidth;
  if (!isPowerOfTwo(options.elemBytes) || !isPowerOfTwo(options.vectorWidth) || bytesPerLane > 16 ||
      table.numRegisters % options.vectorWidth != 0)
    throw std::invalid_argument("countBankConflicts: accesses must be 1 to 16 bytes per lane and "
                                "vectorWidth must divide the register count");
  if (options.warp < 0 || options.warp >= table.numWarps)
    throw std::invalid_argument("countBankConflicts: no warp " + std::to_string(options.warp));
  return bytesPerLane <= kBankBytes ? kNumBanks : kNumBanks * kBankBytes / bytesPerLane;
}

/// One AccessCost per access of one warp (see countBankConflicts for the model).
std::vector<AccessCost> simulateWarp(const SharedAccessTable &table,
                                     const BankConflictOptions &options) {
  int lanesPerPhase = lanesPerPhaseOf(table, options);
  std::vector<AccessCost> costs;
  std::vector<int64_t> words; // reused: the distinct 4-byte words of one phase
  for (int first = 0; first < table.numRegisters; first += options.vectorWidth) {
    AccessCost cost;
    for (int phaseStart = 0; phaseStart < table.numLanes; phaseStart += lanesPerPhase) {
      words.clear();
      int phaseEnd = std::min(table.numLanes, phaseStart + lanesPerPhase);
      for (int lane = phaseStart; lane < phaseEnd; ++lane)
        for (int reg = first; reg < first + options.vectorWidth; ++reg) {
          int64_t byte = table.offset(reg, lane, options.warp) * options.elemBytes;
          int64_t lastWord = (byte + options.elemBytes - 1) / kBankBytes;
          for (int64_t word = byte / kBankBytes; word <= lastWord; ++word)
            words.push_back(word);
        }
      // A bank serves one distinct word per wavefront; equal words are broadcast.
      std::sort(words.begin(), words.end());
      words.erase(std::unique(words.begin(), words.end()), words.end());
      int wordsPerBank[kNumBanks] = {};
      int worst = 0;
      for (int64_t word : words)
        worst = std::max(worst, ++wordsPerBank[word % kNumBanks]);
      cost.wavefronts += worst;
      ++cost.phases;
    }
    costs.push_back(cost);
  }
  return costs;
}

} // namespace

std::vector<int> countBankConflicts(const SharedAccessTable &table,
                                    const BankConflictOptions &options) {
  std::vector<int> conflicts;
  for (const AccessCost &cost : simulateWarp(table, options))
    conflicts.push_back(cost.wavefronts - cost.phases);
  return conflicts;
}

int totalBankConflicts(const SharedAccessTable &table, const BankConflictOptions &options) {
  return measureSharedAccesses(table, options).conflicts;
}

namespace {

/// Rank over GF(2) of bit vectors.
int rankOf(std::vector<uint64_t> vectors) {
  int rank = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    if (vectors[i] == 0)
      continue;
    ++rank;
    uint64_t pivot = vectors[i] & -vectors[i]; // its lowest set bit
    for (size_t j = i + 1; j < vectors.size(); ++j)
      if (vectors[j] & pivot)
        vectors[j] ^= vectors[i];
  }
  return rank;
}

/// measureSharedAccesses of a linear table. One phase of one access reads the indices
/// first ^ r (r < vectorWidth) of lanes phaseStart ^ l (l < the phase's lanes): a coset of the
/// subspace those low register and lane bits span. Its 4-byte words (offset * elemBytes / 4,
/// plus the further words of an 8- or 16-byte element) are then a coset of a subspace W, and
/// the banks (a word's low 5 bits) a coset of W's projection P(W). Every bank it reaches holds
/// |W ∩ ker P| = 2^(dim W - dim P(W)) of its distinct words: the wavefronts of every phase of
/// every access, whatever the coset.
SharedAccessCost measureLinearAccesses(const SharedAccessTable &table,
                                       const BankConflictOptions &options, int lanesPerPhase) {
  auto wordOf = [&](int64_t offset) {
    return static_cast<uint64_t>(offset * options.elemBytes) / kBankBytes;
  };
  std::vector<uint64_t> words;
  for (int reg = 1; reg < options.vectorWidth; reg <<= 1)
    words.push_back(wordOf(table.offset(reg, 0, 0)));
  int phaseLanes = std::min(table.numLanes, lanesPerPhase);
  for (int lane = 1; lane < phaseLanes; lane <<= 1)
    words.push_back(wordOf(table.offset(0, lane, 0)));
  for (int word = 1; word < options.elemBytes / kBankBytes; word <<= 1)
    words.push_back(static_cast<uint64_t>(word));
  std::vector<uint64_t> banks;
  for (uint64_t word : words)
    banks.push_back(word % kNumBanks);
  int perPhase = 1 << (rankOf(words) - rankOf(banks));
  int phases = (table.numRegisters / options.vectorWidth) *
               ((table.numLanes + lanesPerPhase - 1) / lanesPerPhase);
  return {phases * perPhase, phases * (perPhase - 1)};
}

} // namespace

SharedAccessCost measureSharedAccesses(const SharedAccessTable &table,
                                       const BankConflictOptions &options) {
  if (table.linear)
    return measureLinearAccesses(table, options, lanesPerPhaseOf(table, options));
  SharedAccessCost total;
  for (const AccessCost &cost : simulateWarp(table, options)) {
    total.wavefronts += cost.wavefronts;
    total.conflicts += cost.wavefronts - cost.phases;
  }
  return total;
}

} // namespace tessera
