// Lowering of `scan` (codegen stage): the inclusive scan of each tensor along one axis with
// the op's combiner region, in the operands' layout (the result keeps it). For a [1024] f32
// tile (sizePerThread 4, 32 lanes, 4 warps, 2 registers of repeat) each thread scans its runs
// of 4 registers, 5 steps of shfl.sync.idx bring the lanes in, and shared memory the warps
// and the repeat.
//
// Plan, on the axis coordinate c (c' = c, or c XOR (extent - 1) for reverse=true):
// 1. Which hardware bit carries each bit of c (analyzeAxisBits).
// 2. In-thread: while the lowest bits of c are register bits, each run of registers that
//    differ only in them is scanned in order: x[i] = combine(x[i-1], x[i]).
// 3. Each further bit j, low to high (Sklansky's scan: after step j every element holds the
//    scan of its aligned block of 2^(j+1)): an element whose bit j of c' is 1 combines the
//    total of the lower half of its block, held by the element with c' bit j = 0 and all
//    lower bits 1 (the partner), into its own value. Where the partner is:
//    - another register of this thread: read it;
//    - another lane of this warp (no warp bit at or below j): shfl.sync.idx from the
//      partner's lane, of the partner's register;
//    - another warp: each partner stores its value to shared scratch at (its coordinates
//      off the axis, c' >> (j+1)) (the others to a spare slot: no branches); barrier;
//      elements with c' bit j = 1 load theirs. The scratch is the op's scratch_offset, sized
//      for the first such step; a later step first waits (barrier) for the loads of the one
//      before, and membar orders the first against earlier users.
#include "codegen/lower_reduction.h"

#include "analysis/shared_footprint.h"
#include "ir/diagnostics.h"

#include <map>

namespace tessera::codegen {

namespace {

using Kind = AxisBits::Kind;

struct ScanState {
  KernelLowering &lowering;
  const ir::Operation &op;
  const LinearLayout &layout;
  const AxisBits &bits;
  int axis;
  bool reverse;
  std::vector<Elements> values; // per register, one element per operand

  int hardwareBit(int reg, int coordinateBit) const {
    return (reg >> bits.providers[coordinateBit].bit) & 1;
  }

  // Plan step 2: returns how many low coordinate bits are done.
  int scanInThread() {
    int done = 0;
    int32_t runMask = 0;
    while (done < bits.sizeLog2 && bits.providers[done].kind == Kind::Register)
      runMask |= 1 << bits.providers[done++].bit;
    if (done == 0)
      return 0;
    int runLength = 1 << done;
    for (int reg = 0; reg < static_cast<int>(values.size()); ++reg) {
      if (reg & runMask)
        continue; // not the first register of its run
      int previous = -1;
      for (int position = 0; position < runLength; ++position) { // position: c' of the run
        int c = reverse ? position ^ (runLength - 1) : position;
        int member = reg;
        for (int j = 0; j < done; ++j)
          member |= ((c >> j) & 1) << bits.providers[j].bit;
        if (previous >= 0)
          values[member] = emitCombine(lowering, op, values[previous], values[member]);
        previous = member;
      }
    }
    return done;
  }

  /// The register of the partner of `reg` at step j (plan step 3): its register bits that
  /// carry coordinate bits <= j set to the partner's, the rest kept.
  int partnerRegister(int reg, int j) const {
    int partner = reg;
    for (int i = 0; i <= j; ++i) {
      if (bits.providers[i].kind != Kind::Register)
        continue;
      int cPrimeBit = i < j ? 1 : 0;
      int bit = bits.providers[i].bit;
      partner = (partner & ~(1 << bit)) | ((cPrimeBit ^ int(reverse)) << bit);
    }
    return partner;
  }

  /// False when element `reg` of every thread has bit j of c' clear.
  bool maySetBit(int reg, int j) const {
    return bits.providers[j].kind != Kind::Register || (hardwareBit(reg, j) ^ int(reverse));
  }

  /// i1: this thread's element `reg` has bit j of c' set (null when known at compile time:
  /// then `known` says the value).
  llvm::Value *emitBitSet(int reg, int j, bool &known) {
    const AxisBits::Provider &provider = bits.providers[j];
    if (provider.kind == Kind::Register) {
      known = maySetBit(reg, j);
      return nullptr;
    }
    llvm::IRBuilder<> &b = lowering.builder();
    llvm::Value *id = provider.kind == Kind::Lane ? lowering.laneId() : lowering.warpId();
    llvm::Value *bit = b.CreateAnd(b.CreateLShr(id, provider.bit), 1);
    return b.CreateICmpNE(bit, lowering.i32(reverse ? 1 : 0));
  }

  /// values[reg] = combine(partner, values[reg]) where bit j of c' is set.
  void combineWhereSet(int reg, int j, const Elements &partner) {
    bool known = false;
    llvm::Value *set = emitBitSet(reg, j, known);
    if (!set && !known)
      return;
    Elements combined = emitCombine(lowering, op, partner, values[reg]);
    if (set)
      for (size_t k = 0; k < combined.size(); ++k)
        combined[k] = lowering.builder().CreateSelect(set, combined[k], values[reg][k]);
    values[reg] = combined;
  }

  void stepInRegisters(int j) {
    for (int reg = 0; reg < static_cast<int>(values.size()); ++reg) {
      int partner = partnerRegister(reg, j);
      if (partner != reg)
        combineWhereSet(reg, j, values[partner]);
    }
  }

  void stepAcrossLanes(int j) {
    llvm::IRBuilder<> &b = lowering.builder();
    int32_t keep = ~0, set = 0;
    for (int i = 0; i <= j; ++i) {
      if (bits.providers[i].kind != Kind::Lane)
        continue;
      int bit = bits.providers[i].bit;
      keep &= ~(1 << bit);
      set |= ((i < j ? 1 : 0) ^ int(reverse)) << bit;
    }
    llvm::Value *sourceLane = b.CreateOr(b.CreateAnd(lowering.laneId(), keep), set);
    // Shuffle first, update after: every lane must send its value from before this step.
    std::map<int, Elements> shuffled;
    for (int reg = 0; reg < static_cast<int>(values.size()); ++reg) {
      int partner = partnerRegister(reg, j);
      if (!maySetBit(reg, j) || shuffled.count(partner))
        continue;
      Elements moved;
      for (llvm::Value *element : values[partner])
        moved.push_back(emitShuffleIndex(lowering, element, sourceLane));
      shuffled.emplace(partner, moved);
    }
    for (int reg = 0; reg < static_cast<int>(values.size()); ++reg) {
      auto it = shuffled.find(partnerRegister(reg, j));
      if (it != shuffled.end())
        combineWhereSet(reg, j, it->second);
    }
  }

  void stepAcrossWarps(int j) {
    llvm::IRBuilder<> &b = lowering.builder();
    std::vector<int64_t> shape = op.operand(0)->type().shape();
    int64_t extent = shape[axis];
    int64_t blocksPerRow = extent >> (j + 1);
    // One slot per block of 2^(j+1) along the axis, plus a last one that elements which are
    // no partner write to instead (a select, not a branch per register).
    int64_t slots = (op.operand(0)->type().numElements() >> (j + 1)) + 1;
    int64_t totalBytes = 0;
    std::vector<int64_t> sections = analysis::scratchSections(op, slots, totalBytes);
    llvm::Value *base = lowering.sharedScratch(op, totalBytes);
    if (indices.empty())
      indices = lowering.emitIndices(layout);
    int32_t duplicates = KernelLowering::duplicateRegisterMask(layout);
    int numRegs = static_cast<int>(values.size());
    int32_t low = (1 << j) - 1, lowAndJ = (2 << j) - 1;
    auto slotOf = [&](int reg) {
      llvm::Value *c = indices[reg][bits.outDim];
      llvm::Value *cPrime = reverse ? b.CreateXor(c, lowering.i32(extent - 1)) : c;
      llvm::Value *other = emitLinearIndex(lowering, layout, indices[reg], shape, axis);
      llvm::Value *slot =
          b.CreateAdd(b.CreateMul(other, lowering.i32(blocksPerRow)), b.CreateLShr(cPrime, j + 1));
      llvm::Value *isPartner = b.CreateICmpEQ(b.CreateAnd(cPrime, lowAndJ), lowering.i32(low));
      return std::make_pair(slot, isPartner);
    };
    auto address = [&](unsigned operand, llvm::Value *index) {
      int bytes = lowering.memoryBytes(op.operand(operand)->type(), op);
      llvm::Value *offset =
          b.CreateAdd(lowering.i32(sections[operand]), b.CreateMul(index, lowering.i32(bytes)));
      return b.CreateGEP(b.getInt8Ty(), base, offset);
    };
    if (usedScratch)
      lowering.emitBarrier(); // the previous step's loads are done
    usedScratch = true;
    for (int reg = 0; reg < numRegs; ++reg) {
      if (reg & duplicates)
        continue;
      auto [slot, isPartner] = slotOf(reg);
      llvm::Value *index = b.CreateSelect(isPartner, slot, lowering.i32(slots - 1));
      for (unsigned k = 0; k < op.numOperands(); ++k) {
        llvm::Type *memoryType = lowering.memoryType(op.operand(k)->type(), op);
        b.CreateStore(lowering.toMemory(values[reg][k], memoryType), address(k, index));
      }
    }
    lowering.emitBarrier(); // every partner's value lands before any thread loads
    for (int reg = 0; reg < numRegs; ++reg) {
      if (!maySetBit(reg, j))
        continue;
      llvm::Value *slot = slotOf(reg).first;
      Elements partner;
      for (unsigned k = 0; k < op.numOperands(); ++k) {
        const ir::Type &type = op.operand(k)->type();
        llvm::Value *value = b.CreateLoad(lowering.memoryType(type, op), address(k, slot));
        partner.push_back(lowering.fromMemory(value, lowering.registerType(type, op)));
      }
      combineWhereSet(reg, j, partner);
    }
  }

  // Plan step 3.
  void scanAcrossHardware(int firstBit) {
    for (int j = firstBit; j < bits.sizeLog2; ++j) {
      bool lanes = false, warps = false;
      for (int i = 0; i <= j; ++i) {
        lanes |= bits.providers[i].kind == Kind::Lane;
        warps |= bits.providers[i].kind == Kind::Warp;
      }
      if (warps)
        stepAcrossWarps(j);
      else if (lanes)
        stepAcrossLanes(j);
      else
        stepInRegisters(j);
    }
  }

  std::vector<std::vector<llvm::Value *>> indices; // per register, coordinates (shared steps)
  bool usedScratch = false;                        // a step across warps has used the scratch
};

} // namespace

void lowerScanOp(KernelLowering &lowering, const ir::Operation &op) {
  int axis = static_cast<int>(op.intAttr("axis"));
  bool reverse = op.hasAttr("reverse") && op.intAttr("reverse") != 0;
  const LinearLayout &layout = lowering.layoutOf(op.operand(0)->type(), op);
  for (const ir::Value *operand : op.operands())
    if (lowering.layoutOf(operand->type(), op) != layout)
      ir::emitError(op, "codegen: scan operands must share one layout");
  AxisBits bits = analyzeAxisBits(layout, axis, op);
  ScanState state{lowering, op, layout, bits, axis, reverse, {}, {}, false};
  int numRegs = lowering.numRegisters(op.operand(0)->type(), op);
  state.values.resize(numRegs);
  for (const ir::Value *operand : op.operands()) {
    const Registers &registers = lowering.registersOf(operand);
    for (int reg = 0; reg < numRegs; ++reg)
      state.values[reg].push_back(registers[reg]);
  }
  int done = state.scanInThread();
  state.scanAcrossHardware(done);
  for (unsigned k = 0; k < op.numOperands(); ++k) {
    Registers result;
    for (int reg = 0; reg < numRegs; ++reg)
      result.push_back(state.values[reg][k]);
    lowering.setRegisters(op.result(k), std::move(result));
  }
}

} // namespace tessera::codegen
