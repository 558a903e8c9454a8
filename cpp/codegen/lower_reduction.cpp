// Lowering of `reduce` (codegen stage): combines the elements of each tensor along one axis
// with the op's combiner region, following the operands' linear layout, as Triton's
// ReduceOpToLLVM. For a [4, 256] f32 tile (sizePerThread [1, 4], 32 lanes and 2 warps along
// dim 1) reduced along dim 1, each thread combines its 4 registers of a row, 5 butterfly
// shuffles (offsets 16, 8, 4, 2, 1) combine the lanes, and the 2 warps meet in shared memory.
//
// Plan:
// 1. In-thread: registers holding elements of one output element (equal coordinates off the
//    axis) are combined in register order; registers that only duplicate others are skipped.
// 2. Across lanes: for each lane bit that carries the axis, highest first, a butterfly
//    shuffle (shfl.sync.bfly) and a combine; every lane of the group ends with the result.
// 3. Across warps, when warp bits carry the axis: one lane per (warp slot, output element)
//    stores its partial at scratch[slot][output index] (the op's scratch_offset; membar
//    ordered it after earlier users); barrier; each thread combines the slots of its output
//    elements in slot order.
// 4. Results: the result's layout is the operands' sliced along the axis (the verifier checks
//    it), whose registers are exactly the partials' coordinates; a rank-1 reduce gives a
//    scalar that every thread holds.
#include "codegen/lower_reduction.h"

#include "analysis/shared_footprint.h"
#include "ir/diagnostics.h"

#include <map>

namespace tessera::codegen {

namespace {

/// Coordinates of an element off the reduced axis (register part only).
using Key = std::vector<int32_t>;

/// One partial result per output element this thread holds, in first-register order.
struct Partials {
  std::vector<Key> keys;
  std::vector<Elements> values;
};

// Plan step 1.
Partials reduceInThread(KernelLowering &lowering, const ir::Operation &op,
                        const LinearLayout &layout, int axis) {
  std::vector<const Registers *> inputs;
  for (const ir::Value *operand : op.operands())
    inputs.push_back(&lowering.registersOf(operand));
  Partials partials;
  std::map<Key, size_t> slotOf;
  int32_t duplicates = KernelLowering::duplicateRegisterMask(layout);
  int numRegs = static_cast<int>(inputs.front()->size());
  for (int reg = 0; reg < numRegs; ++reg) {
    if (reg & duplicates)
      continue;
    Key key = registerCoordinates(layout, reg);
    key.erase(key.begin() + axis);
    Elements current;
    for (const Registers *input : inputs)
      current.push_back((*input)[reg]);
    auto it = slotOf.find(key);
    if (it == slotOf.end()) {
      slotOf.emplace(key, partials.keys.size());
      partials.keys.push_back(key);
      partials.values.push_back(current);
    } else {
      partials.values[it->second] = emitCombine(lowering, op, partials.values[it->second], current);
    }
  }
  return partials;
}

// Plan step 2.
void reduceAcrossLanes(KernelLowering &lowering, const ir::Operation &op, const AxisBits &bits,
                       Partials &partials) {
  for (int bit = 4; bit >= 0; --bit) {
    if (!((bits.laneMask >> bit) & 1))
      continue;
    for (Elements &value : partials.values) {
      Elements other;
      for (llvm::Value *element : value)
        other.push_back(emitShuffleXor(lowering, element, 1 << bit));
      value = emitCombine(lowering, op, value, other);
    }
  }
}

/// The warp id's bits in `mask`, packed into the low bits (the warp's slot).
llvm::Value *emitWarpSlot(KernelLowering &lowering, int32_t mask) {
  llvm::IRBuilder<> &b = lowering.builder();
  llvm::Value *slot = lowering.i32(0);
  int packed = 0;
  for (int bit = 0; bit < 31; ++bit) {
    if (!((mask >> bit) & 1))
      continue;
    llvm::Value *set = b.CreateAnd(b.CreateLShr(lowering.warpId(), bit), 1);
    slot = b.CreateOr(slot, b.CreateShl(set, packed++));
  }
  return slot;
}

// Plan step 3.
void reduceAcrossWarps(KernelLowering &lowering, const ir::Operation &op,
                       const LinearLayout &layout, int axis, const AxisBits &bits,
                       Partials &partials) {
  llvm::IRBuilder<> &b = lowering.builder();
  std::vector<int64_t> shape = op.operand(0)->type().shape();
  int rank = static_cast<int>(shape.size());
  int64_t numOutputs = 1;
  for (int d = 0; d < rank; ++d)
    numOutputs *= d == axis ? 1 : shape[d];
  int numSlots = 1 << __builtin_popcount(static_cast<uint32_t>(bits.warpMask));

  // Output index of each partial: its coordinates off the axis, thread part XOR key, row-major.
  std::vector<llvm::Value *> threadPart(rank, nullptr);
  for (int d = 0; d < rank; ++d)
    if (d != axis)
      threadPart[d] = lowering.emitThreadPart(layout, layout.getOutDimIndex(tensorDimName(d)));
  std::vector<llvm::Value *> outputIndex;
  for (const Key &key : partials.keys) {
    llvm::Value *linear = lowering.i32(0);
    for (int d = 0, k = 0; d < rank; ++d) {
      if (d == axis)
        continue;
      llvm::Value *coordinate =
          key[k] ? b.CreateXor(threadPart[d], lowering.i32(key[k])) : threadPart[d];
      linear = b.CreateAdd(b.CreateMul(linear, lowering.i32(shape[d])), coordinate);
      ++k;
    }
    outputIndex.push_back(linear);
  }
  llvm::Value *slot = emitWarpSlot(lowering, bits.warpMask);

  int64_t totalBytes = 0;
  std::vector<int64_t> sections = analysis::scratchSections(op, numSlots * numOutputs, totalBytes);
  llvm::Value *base = lowering.sharedScratch(op, totalBytes);
  auto address = [&](unsigned operand, llvm::Value *index) {
    int bytes = lowering.memoryBytes(op.operand(operand)->type(), op);
    llvm::Value *offset =
        b.CreateAdd(lowering.i32(sections[operand]), b.CreateMul(index, lowering.i32(bytes)));
    return b.CreateGEP(b.getInt8Ty(), base, offset);
  };

  // One writer per slot and output element: lanes that hold the same partial after the
  // shuffles (axis lane bits) or duplicate data (zero lane/warp bases) stay out.
  llvm::Value *owner = nullptr;
  auto requireZero = [&](llvm::Value *id, int32_t mask) {
    if (!mask)
      return;
    llvm::Value *zero = b.CreateICmpEQ(b.CreateAnd(id, mask), lowering.i32(0));
    owner = owner ? b.CreateAnd(owner, zero) : zero;
  };
  requireZero(lowering.laneId(), bits.laneMask | bits.laneBroadcastMask);
  requireZero(lowering.warpId(), bits.warpBroadcastMask);

  emitIf(lowering, owner, [&] {
    for (size_t i = 0; i < partials.keys.size(); ++i) {
      llvm::Value *index = b.CreateAdd(b.CreateMul(slot, lowering.i32(numOutputs)), outputIndex[i]);
      for (unsigned k = 0; k < op.numOperands(); ++k) {
        llvm::Type *memoryType = lowering.memoryType(op.operand(k)->type(), op);
        b.CreateStore(lowering.toMemory(partials.values[i][k], memoryType), address(k, index));
      }
    }
  });
  lowering.emitBarrier(); // internal to the op: every partial lands before any thread reads
  for (size_t i = 0; i < partials.keys.size(); ++i) {
    Elements combined;
    for (int s = 0; s < numSlots; ++s) {
      llvm::Value *index = b.CreateAdd(lowering.i32(s * numOutputs), outputIndex[i]);
      Elements loaded;
      for (unsigned k = 0; k < op.numOperands(); ++k) {
        const ir::Type &type = op.operand(k)->type();
        llvm::Value *value = b.CreateLoad(lowering.memoryType(type, op), address(k, index));
        loaded.push_back(lowering.fromMemory(value, lowering.registerType(type, op)));
      }
      combined = s == 0 ? loaded : emitCombine(lowering, op, combined, loaded);
    }
    partials.values[i] = combined;
  }
}

// Plan step 4.
void placeResults(KernelLowering &lowering, const ir::Operation &op, const Partials &partials) {
  unsigned numOperands = op.numOperands();
  if (!op.result(0)->type().isTensor()) {
    if (partials.keys.size() != 1)
      ir::emitError(op, "codegen: internal error: a scalar reduce left several partials");
    for (unsigned k = 0; k < numOperands; ++k)
      lowering.setRegisters(op.result(k), {partials.values[0][k]});
    return;
  }
  std::map<Key, size_t> slotOf;
  for (size_t i = 0; i < partials.keys.size(); ++i)
    slotOf.emplace(partials.keys[i], i);
  const LinearLayout &resultLayout = lowering.layoutOf(op.result(0)->type(), op);
  int numRegs = lowering.numRegisters(op.result(0)->type(), op);
  std::vector<Registers> results(numOperands);
  for (int reg = 0; reg < numRegs; ++reg) {
    auto it = slotOf.find(registerCoordinates(resultLayout, reg));
    if (it == slotOf.end())
      ir::emitError(op, "codegen: the result layout is not the operand layout sliced along "
                        "the axis: " +
                            op.result(0)->type().str());
    for (unsigned k = 0; k < numOperands; ++k)
      results[k].push_back(partials.values[it->second][k]);
  }
  for (unsigned k = 0; k < numOperands; ++k)
    lowering.setRegisters(op.result(k), std::move(results[k]));
}

} // namespace

void lowerReduceOp(KernelLowering &lowering, const ir::Operation &op) {
  int axis = static_cast<int>(op.intAttr("axis"));
  const ir::Type &type = op.operand(0)->type();
  const LinearLayout &layout = lowering.layoutOf(type, op);
  for (const ir::Value *operand : op.operands())
    if (lowering.layoutOf(operand->type(), op) != layout)
      ir::emitError(op, "codegen: reduce operands must share one layout");
  AxisBits bits = analyzeAxisBits(layout, axis, op);
  Partials partials = reduceInThread(lowering, op, layout, axis);
  reduceAcrossLanes(lowering, op, bits, partials);
  if (bits.warpMask)
    reduceAcrossWarps(lowering, op, layout, axis, bits, partials);
  placeResults(lowering, op, partials);
}

} // namespace tessera::codegen
