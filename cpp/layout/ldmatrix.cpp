// ldmatrix plans: the row-address layout of each candidate form, checked by executing it.
//
// Plan: for a candidate (matrices per instruction, transposed or not),
//  1. map each address-input bit (instruction, lane, warp) to the register-layout input whose
//     element the row address must point at: non-transposed, lane l = 8j + r addresses row r
//     of matrix j, whose first element thread 4r holds in word j; transposed, row r of matrix
//     j is the r%2'th element of word j of thread r/2 (the matrix is stored transposed);
//  2. push those inputs through the register layout and the tile's offsets (both linear);
//  3. simulate the instructions (simulateLdmatrix) and accept the plan only if every register
//     receives the element the register layout assigns it, from 16-byte-aligned rows.
#include "layout/ldmatrix.h"

#include <algorithm>

namespace tessera {

namespace {

int inputSize(const LinearLayout &layout, const char *dim) {
  return layout.hasInDim(dim) ? layout.getInDimSize(dim) : 1;
}

/// The element offset in `tile` of every hardware index, [(warp * 32 + lane) * numRegisters +
/// reg] (SharedAccessTable order): one table per layout and tile, shared by every candidate
/// plan, instead of evaluating the layout and the tile per element and per candidate.
std::vector<int64_t> elementOffsets(const LinearLayout &layout, const SharedTileLayout &tile) {
  std::vector<std::string> outDims;
  for (int axis = 0; axis < static_cast<int>(tile.shape.size()); ++axis)
    outDims.push_back(tensorDimName(axis));
  bool sameTensor = layout.getOutDimNames() == outDims;
  for (int axis = 0; sameTensor && axis < static_cast<int>(tile.shape.size()); ++axis)
    sameTensor = layout.getOutDimSize(outDims[axis]) == tile.shape[axis];
  if (sameTensor)
    return computeSharedOffsets(layout, tile).offsets;
  // A layout of another extent than the tile (not made by codegen): element by element.
  int numRegisters = inputSize(layout, kRegisterDim), numWarps = inputSize(layout, kWarpDim);
  std::vector<int64_t> offsets;
  for (int warp = 0; warp < numWarps; ++warp)
    for (int lane = 0; lane < 32; ++lane)
      for (int reg = 0; reg < numRegisters; ++reg) {
        LinearLayout::DimValues coords =
            layout.apply({{kRegisterDim, reg}, {kLaneDim, lane}, {kWarpDim, warp}});
        std::vector<int64_t> tileCoords;
        for (const std::string &dim : outDims)
          tileCoords.push_back(coords[layout.getOutDimIndex(dim)].second);
        offsets.push_back(tile.offsetOf(tileCoords));
      }
  return offsets;
}

/// The row address plan.addresses gives every (instruction, lane, warp), indexed
/// [(warp * 32 + lane) * numInstructions + instruction]. The layout is linear: each index's
/// row is that of the index with its lowest set bit cleared, XORed with that bit's.
std::vector<int64_t> rowAddresses(const LdmatrixPlan &plan, int numInstructions, int numWarps) {
  auto log2 = [](int size) { return __builtin_ctz(static_cast<unsigned>(size)); };
  int instructionBits = log2(numInstructions), laneBits = 5;
  std::vector<int64_t> rows(int64_t(numWarps) * 32 * numInstructions, 0);
  for (int64_t index = 1; index < static_cast<int64_t>(rows.size()); ++index) {
    int64_t low = index & -index;
    if (index != low) {
      rows[index] = rows[index & (index - 1)] ^ rows[low];
      continue;
    }
    int bit = __builtin_ctzll(static_cast<uint64_t>(low));
    int instruction = bit < instructionBits ? 1 << bit : 0;
    int lane = bit >= instructionBits && bit < instructionBits + laneBits
                   ? 1 << (bit - instructionBits)
                   : 0;
    int warp = bit >= instructionBits + laneBits ? 1 << (bit - instructionBits - laneBits) : 0;
    rows[index] =
        plan.addresses.apply({{kRegisterDim, instruction}, {kLaneDim, lane}, {kWarpDim, warp}})[0]
            .second;
  }
  return rows;
}

/// Plan step 1 and 2 for one candidate.
LdmatrixPlan buildPlan(const LinearLayout &layout, const SharedTileLayout &tile,
                       const std::vector<int64_t> &offsets, int numMatrices, bool transposed,
                       int elementsPerWord) {
  LdmatrixPlan plan;
  plan.transposed = transposed;
  plan.numMatrices = numMatrices;
  plan.elementsPerWord = elementsPerWord;
  plan.registersPerInstruction = numMatrices * elementsPerWord;
  int numRegisters = inputSize(layout, kRegisterDim);
  int numInstructions = numRegisters / plan.registersPerInstruction;
  auto offsetOf = [&](int reg, int lane, int warp) -> LinearLayout::BasisVector {
    return {static_cast<int32_t>(offsets[(int64_t(warp) * 32 + lane) * numRegisters + reg])};
  };
  std::vector<LinearLayout::BasisVector> instructionBases, laneBases, warpBases;
  for (int bit = 0; (1 << bit) < numInstructions; ++bit)
    instructionBases.push_back(offsetOf(plan.registersPerInstruction << bit, 0, 0));
  for (int bit = 0; bit < 5; ++bit) {
    int reg = 0, lane = 0;
    if (bit >= 3) { // the matrix index j: word j of the result
      int matrix = 1 << (bit - 3);
      reg = matrix < numMatrices ? matrix * elementsPerWord : 0;
    } else if (!transposed) {
      lane = 4 << bit; // row r: thread 4r holds its first element
    } else if (bit == 0) {
      reg = 1; // row r of a transposed matrix: element r % 2 of a word ...
    } else {
      lane = 1 << (bit - 1); // ... of thread r / 2
    }
    laneBases.push_back(reg || lane ? offsetOf(reg, lane, 0) : LinearLayout::BasisVector{0});
  }
  for (int bit = 0; (1 << bit) < inputSize(layout, kWarpDim); ++bit)
    warpBases.push_back(offsetOf(0, 0, 1 << bit));
  plan.addresses = LinearLayout({{kRegisterDim, instructionBases},
                                 {kLaneDim, laneBases},
                                 {kWarpDim, warpBases},
                                 {kBlockDim, {}}},
                                {{kOffsetDim, static_cast<int32_t>(tile.allocationSize())}},
                                /*requireSurjective=*/false);
  return plan;
}

/// Plan step 3.
bool isValid(const LdmatrixPlan &plan, const LinearLayout &layout,
             const std::vector<int64_t> &offsets, int elemBytes) {
  int numRegisters = inputSize(layout, kRegisterDim), numWarps = inputSize(layout, kWarpDim);
  int rowElements = 16 / elemBytes;
  int numInstructions = numRegisters / plan.registersPerInstruction;
  std::vector<int64_t> rows = rowAddresses(plan, numInstructions, numWarps);
  for (int instruction = 0; instruction < numInstructions; ++instruction)
    for (int warp = 0; warp < numWarps; ++warp)
      for (int lane = 0; lane < 8 * plan.numMatrices; ++lane)
        if (rows[(int64_t(warp) * 32 + lane) * numInstructions + instruction] % rowElements != 0)
          return false;
  return simulateLdmatrix(plan, numRegisters, numWarps) == offsets;
}

} // namespace

std::vector<int64_t> simulateLdmatrix(const LdmatrixPlan &plan, int numRegisters, int numWarps) {
  int numInstructions = numRegisters / plan.registersPerInstruction;
  std::vector<int64_t> rows = rowAddresses(plan, numInstructions, numWarps);
  std::vector<int64_t> delivered(int64_t(numWarps) * 32 * numRegisters);
  for (int warp = 0; warp < numWarps; ++warp)
    for (int thread = 0; thread < 32; ++thread)
      for (int reg = 0; reg < numRegisters; ++reg) {
        int instruction = reg / plan.registersPerInstruction;
        int word = reg % plan.registersPerInstruction / plan.elementsPerWord;
        int half = reg % plan.elementsPerWord; // which element of the 32-bit word
        // The lane whose address gives this word's row, and the element's place in that row.
        int rowLane, column;
        if (!plan.transposed) {
          rowLane = 8 * word + thread / 4;
          column = (thread % 4) * plan.elementsPerWord + half;
        } else {
          rowLane = 8 * word + 2 * (thread % 4) + half;
          column = thread / 4;
        }
        int64_t row = rows[(int64_t(warp) * 32 + rowLane) * numInstructions + instruction];
        delivered[(int64_t(warp) * 32 + thread) * numRegisters + reg] = row + column;
      }
  return delivered;
}

std::optional<LdmatrixPlan> planLdmatrix(const LinearLayout &registerLayout,
                                         const SharedTileLayout &tile, int elemBytes) {
  if ((elemBytes != 2 && elemBytes != 4) || !tile.isLinear() ||
      inputSize(registerLayout, kLaneDim) != 32)
    return std::nullopt;
  int elementsPerWord = 4 / elemBytes;
  int numRegisters = inputSize(registerLayout, kRegisterDim);
  std::vector<int64_t> offsets = elementOffsets(registerLayout, tile);
  for (int numMatrices : {4, 2, 1})
    for (bool transposed : {false, true}) {
      if (transposed && elemBytes != 2)
        continue; // .trans moves 16-bit elements only
      if (numRegisters % (numMatrices * elementsPerWord) != 0)
        continue;
      LdmatrixPlan plan =
          buildPlan(registerLayout, tile, offsets, numMatrices, transposed, elementsPerWord);
      if (isValid(plan, registerLayout, offsets, elemBytes))
        return plan;
    }
  return std::nullopt;
}

std::optional<LdmatrixPlan> planStmatrix(const LinearLayout &registerLayout,
                                         const SharedTileLayout &tile, int elemBytes) {
  if (elemBytes != 2 || !tile.isLinear())
    return std::nullopt;
  int rowElements = 16 / elemBytes;
  // The plain stores' width, as codegen's storeToSharedTile takes it: registers at
  // consecutive offsets of the tile.
  int plainWidth = std::min(
      sharedOffsetLayout(registerLayout, tile).getNumConsecutiveInOut(kRegisterDim, kOffsetDim),
      rowElements);
  if (plainWidth >= rowElements)
    return std::nullopt;
  std::optional<LdmatrixPlan> plan = planLdmatrix(registerLayout, tile, elemBytes);
  if (!plan)
    return std::nullopt;
  // Compare the shared-memory cycles of warp 0: stmatrix rows (one 16-byte access per lane,
  // served per quarter warp = one matrix) against the plain stores.
  int numWarps = inputSize(registerLayout, kWarpDim);
  BankConflictOptions rows{elemBytes, rowElements, 0};
  BankConflictOptions plain{elemBytes, plainWidth, 0};
  SharedAccessCost matrixCost =
      measureSharedAccesses(ldmatrixRowAccesses(*plan, numWarps, elemBytes), rows);
  SharedAccessCost plainCost =
      measureSharedAccesses(computeSharedOffsets(registerLayout, tile), plain);
  if (matrixCost.wavefronts > plainCost.wavefronts)
    return std::nullopt;
  return plan;
}

SharedAccessTable ldmatrixRowAccesses(const LdmatrixPlan &plan, int numWarps, int elemBytes) {
  int rowElements = 16 / elemBytes;
  int numInstructions =
      plan.addresses.hasInDim(kRegisterDim) ? plan.addresses.getInDimSize(kRegisterDim) : 1;
  SharedAccessTable table;
  table.numRegisters = numInstructions * rowElements;
  table.numLanes = 32;
  table.numWarps = numWarps;
  std::vector<int64_t> rows = rowAddresses(plan, numInstructions, numWarps);
  for (int warp = 0; warp < numWarps; ++warp)
    for (int lane = 0; lane < 32; ++lane)
      for (int instruction = 0; instruction < numInstructions; ++instruction) {
        // Lanes past the last matrix give no address; they repeat the first matrix's rows.
        int addressLane = lane % (8 * plan.numMatrices);
        int64_t row = rows[(int64_t(warp) * 32 + addressLane) * numInstructions + instruction];
        for (int element = 0; element < rowElements; ++element)
          table.offsets.push_back(row + element);
      }
  return table;
}

} // namespace tessera
