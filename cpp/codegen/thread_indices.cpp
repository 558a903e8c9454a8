// Per-thread context of a kernel: thread, lane and warp ids, the element coordinates each
// register holds (a linear layout applied to the thread's ids), which threads own an element,
// and the shared memory at the offsets allocate_shared gave (the ops' scratch, the local_alloc
// buffers) with the barrier. Used by every lower_*.cpp file.
//
// Coordinates follow Triton's applyLinearLayout: L(register, lane, warp) is the XOR of the
// basis vectors of the set input bits; registers are compile-time constants, so each
// coordinate is (thread part, computed once per layout) XOR (a constant per register).
#include "codegen/lower_to_llvm.h"

#include "analysis/shared_footprint.h"
#include "ir/diagnostics.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <stdexcept>

namespace tessera::codegen {
namespace {

/// XOR over the set bits i of `x` of bases[i][outDim] (an i32 value). Runs of bits that map
/// to consecutive powers of two become one mask-and-shift, so a blocked layout's lane part
/// is typically a single `(lane & m) << s`.
llvm::Value *emitBasisSum(llvm::IRBuilder<> &b, llvm::Value *x,
                          const std::vector<LinearLayout::BasisVector> &bases, int outDim) {
  llvm::Value *sum = nullptr;
  auto accumulate = [&](llvm::Value *term) { sum = sum ? b.CreateXor(sum, term) : term; };
  size_t bit = 0;
  while (bit < bases.size()) {
    uint32_t value = static_cast<uint32_t>(bases[bit][outDim]);
    if (value == 0) {
      ++bit;
      continue;
    }
    if ((value & (value - 1)) != 0) { // not a power of two: (x >> bit & 1) * value
      llvm::Value *set = b.CreateAnd(b.CreateLShr(x, bit), 1);
      accumulate(b.CreateMul(set, b.getInt32(value)));
      ++bit;
      continue;
    }
    int target = __builtin_ctz(value);
    size_t end = bit + 1;
    while (end < bases.size() && target + int(end - bit) < 31 &&
           static_cast<uint32_t>(bases[end][outDim]) == (1u << (target + (end - bit))))
      ++end;
    uint32_t mask = ((1u << (end - bit)) - 1) << bit;
    llvm::Value *field = b.CreateAnd(x, mask);
    if (target > static_cast<int>(bit))
      field = b.CreateShl(field, target - bit);
    else if (target < static_cast<int>(bit))
      field = b.CreateLShr(field, bit - target);
    accumulate(field);
    bit = end;
  }
  return sum ? sum : b.getInt32(0);
}

} // namespace

llvm::Value *KernelLowering::emitThreadPart(const LinearLayout &layout, int outDimIndex) {
  llvm::Value *lanePart = i32(0), *warpPart = i32(0);
  for (const auto &[name, bases] : layout.getBases()) {
    if (name == kLaneDim)
      lanePart = emitBasisSum(builder_, laneId(), bases, outDimIndex);
    else if (name == kWarpDim)
      warpPart = emitBasisSum(builder_, warpId(), bases, outDimIndex);
  }
  return builder_.CreateXor(lanePart, warpPart);
}

std::vector<std::vector<llvm::Value *>> KernelLowering::emitIndices(const LinearLayout &layout) {
  int numOutDims = layout.getNumOutDims();
  std::vector<llvm::Value *> threadPart;
  for (int d = 0; d < numOutDims; ++d)
    threadPart.push_back(emitThreadPart(layout, d));
  int numRegs = layout.hasInDim(kRegisterDim) ? layout.getInDimSize(kRegisterDim) : 1;
  std::vector<std::vector<llvm::Value *>> indices(numRegs);
  for (int reg = 0; reg < numRegs; ++reg) {
    LinearLayout::DimValues registerPart =
        layout.hasInDim(kRegisterDim) ? layout.apply({{kRegisterDim, reg}}) : layout.apply({});
    for (int d = 0; d < numOutDims; ++d)
      indices[reg].push_back(registerPart[d].second == 0
                                 ? threadPart[d]
                                 : builder_.CreateXor(threadPart[d], i32(registerPart[d].second)));
  }
  return indices;
}

int32_t KernelLowering::duplicateRegisterMask(const LinearLayout &layout) {
  for (const auto &[name, mask] : layout.getFreeVariableMasks())
    if (name == kRegisterDim)
      return mask;
  return 0;
}

llvm::Value *KernelLowering::emitOwnerPredicate(const LinearLayout &layout) {
  llvm::Value *predicate = nullptr;
  for (const auto &[name, mask] : layout.getFreeVariableMasks()) {
    if (mask == 0 || (name != kLaneDim && name != kWarpDim))
      continue;
    llvm::Value *id = name == kLaneDim ? laneId() : warpId();
    llvm::Value *owns = builder_.CreateICmpEQ(builder_.CreateAnd(id, mask), i32(0));
    predicate = predicate ? builder_.CreateAnd(predicate, owns) : owns;
  }
  return predicate;
}

// ---- Hardware helpers -----------------------------------------------------------------------

llvm::Value *KernelLowering::callIntrinsic(llvm::Intrinsic::ID id,
                                           llvm::ArrayRef<llvm::Type *> types,
                                           llvm::ArrayRef<llvm::Value *> args) {
  llvm::Function *callee = llvm::Intrinsic::getOrInsertDeclaration(&module_, id, types);
  return builder_.CreateCall(callee, args);
}

void KernelLowering::emitThreadIds() {
  threadId_ = callIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {});
  threadId_->setName("tid");
  elected_ = nullptr;
  issuers_.clear();
}

llvm::IRBuilder<> KernelLowering::builderAfterThreadId() {
  // Right after the thread id in the entry block: what is built there dominates every use.
  auto *tid = llvm::cast<llvm::Instruction>(threadId_);
  if (llvm::Instruction *next = tid->getNextNode())
    return llvm::IRBuilder<>(next);
  return llvm::IRBuilder<>(tid->getParent());
}

llvm::Value *KernelLowering::laneId() {
  if (!laneId_) {
    llvm::IRBuilder<> entry = builderAfterThreadId();
    laneId_ = entry.CreateAnd(threadId_, 31, "lane");
  }
  return laneId_;
}

llvm::Value *KernelLowering::warpId() {
  if (!warpId_) {
    // The warp index is uniform across the warp; a shuffle from lane 0 lets ptxas know it.
    // Created on first use: the shuffle is convergent, so LLVM would not delete an unused one.
    llvm::IRBuilder<> entry = builderAfterThreadId();
    llvm::Function *shuffle =
        llvm::Intrinsic::getOrInsertDeclaration(&module_, llvm::Intrinsic::nvvm_shfl_sync_idx_i32);
    warpId_ = entry.CreateCall(shuffle, {i32(-1), entry.CreateLShr(threadId_, 5), i32(0), i32(31)},
                               "warp");
  }
  return warpId_;
}

llvm::Value *KernelLowering::issuer() {
  int warp = issuerThread_ / 32;
  llvm::Value *&issuer = issuers_[warp];
  if (!issuer) {
    if (!elected_) {
      llvm::IRBuilder<> entry = builderAfterThreadId();
      llvm::Function *elect =
          llvm::Intrinsic::getOrInsertDeclaration(&module_, llvm::Intrinsic::nvvm_elect_sync);
      elected_ = entry.CreateExtractValue(entry.CreateCall(elect, {i32(-1)}), {1}, "elected");
    }
    // Right after the election (it follows the thread id, so this dominates every use too).
    auto *election = llvm::cast<llvm::Instruction>(elected_);
    llvm::IRBuilder<> entry(election->getParent());
    if (llvm::Instruction *next = election->getNextNode())
      entry.SetInsertPoint(next);
    llvm::Value *inWarp = entry.CreateICmpEQ(entry.CreateLShr(threadId_, 5), i32(warp));
    issuer = entry.CreateAnd(inWarp, elected_, "issuer");
  }
  return issuer;
}

llvm::Value *KernelLowering::sharedAt(const ir::Operation &op, int64_t offset, int64_t bytes) {
  if (offset < 0 || offset + bytes > sharedBytes_)
    ir::emitError(op, "codegen: internal error: shared bytes [" + std::to_string(offset) + ", " +
                          std::to_string(offset + bytes) + ") lie outside the func's shared_size " +
                          std::to_string(sharedBytes_));
  if (!sharedMemory_) {
    // `extern __shared__` of size 0: the launcher passes sharedBytes() as dynamic memory.
    auto *type = llvm::ArrayType::get(builder_.getInt8Ty(), 0);
    sharedMemory_ =
        new llvm::GlobalVariable(module_, type, false, llvm::GlobalValue::ExternalLinkage, nullptr,
                                 "global_smem", nullptr, llvm::GlobalValue::NotThreadLocal, 3);
    sharedMemory_->setAlignment(llvm::Align(1024)); // allocation.h: wgmma tiles' alignment
  }
  if (offset == 0)
    return sharedMemory_;
  return builder_.CreateGEP(builder_.getInt8Ty(), sharedMemory_, i32(offset));
}

llvm::Value *KernelLowering::sharedScratch(const ir::Operation &op, int64_t bytes) {
  if (!op.hasAttr("scratch_offset"))
    ir::emitError(op, "codegen: the op needs " + std::to_string(bytes) +
                          " bytes of shared scratch but has no scratch_offset (run "
                          "allocate_shared)");
  // The allocator sized it with the same functions (analysis/shared_footprint.h).
  if (bytes > analysis::scratchBytes(op))
    ir::emitError(op, "codegen: internal error: the op uses " + std::to_string(bytes) +
                          " bytes of scratch, more than the " +
                          std::to_string(analysis::scratchBytes(op)) + " allocated");
  return sharedAt(op, op.intAttr("scratch_offset"), bytes);
}

llvm::Value *KernelLowering::sharedBuffer(const ir::Operation &localAlloc, int64_t bytes) {
  if (!localAlloc.hasAttr("offset"))
    ir::emitError(localAlloc, "codegen: local_alloc has no offset (run allocate_shared)");
  return sharedAt(localAlloc, localAlloc.intAttr("offset"), bytes);
}

void KernelLowering::emitBarrier(bool groupsInFlight) {
  // Past a barrier other warps may write shared memory an in-flight wgmma still reads: the
  // wgmma_waits pass gives an op whose lowering has one `inner_wgmma_wait` (waited for here),
  // and puts a wgmma_wait before a `barrier` op down to what membar let it keep.
  // Membar let that barrier keep the newest `inner_wgmma_wait` groups (nothing written after
  // it before the next barrier may overlap what they read).
  if (!groupsInFlight && innerWgmmaWait_)
    retireWgmma(static_cast<size_t>(*innerWgmmaWait_));
  else if (!groupsInFlight && !pendingWgmma_.empty())
    throw std::logic_error("a barrier inside the op's lowering with wgmma groups in flight "
                           "and no inner_wgmma_wait (run the wgmma_waits pass)"); // lowerOp
  if (consumersOnly_) // the producer warps have left: barrier 1 of the consumer threads
    callIntrinsic(llvm::Intrinsic::nvvm_barrier_cta_sync_aligned_count, {},
                  {i32(1), i32(numWarps_ * 32)});
  else
    callIntrinsic(llvm::Intrinsic::nvvm_barrier_cta_sync_aligned_all, {}, {i32(0)});
}

} // namespace tessera::codegen
