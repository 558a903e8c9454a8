// warp_specialize -> the role split at kernel entry (sm_90a; transforms/pipeline/
// warp_specialize.h, docs/perf/warp_specialization.md). The block has num_warps consumer warps
// (thread ids 0 .. num_warps * 32 - 1, where every layout lives) and then the producer
// warpgroup. After the mbarriers' init and its CTA-wide bar.sync:
//
//   if (tid >= num_warps * 32) {              // the producer warpgroup
//     setmaxnreg.dec.sync.aligned.u32 40      // its registers go back to the pool
//     if (tid < num_warps * 32 + 32)          // one warp runs the region; its first thread
//       <region>                              // issues the copies and waits for the slots
//     return                                  // (the others have nothing to do)
//   }
//   setmaxnreg.inc.sync.aligned.u32 R         // the consumers take them
//   ... the rest of the kernel: every barrier is `bar.sync 1, num_warps * 32` (emitBarrier)
//
// The producer may leave early: the consumers wait on the full barriers for every copy it
// issued, their barriers name only them, and the kernel is one CTA (no cluster peer signals
// this CTA's barriers).
#include "codegen/lower_to_llvm.h"

#include "ir/diagnostics.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tessera::codegen {

void KernelLowering::lowerWarpSpecialize(const ir::Operation &op) {
  if (consumersOnly_ || !pendingWgmma_.empty())
    ir::emitError(op, "codegen: warp_specialize must come before any other role split or wgmma");
  llvm::Function *function = builder_.GetInsertBlock()->getParent();
  int consumerThreads = numWarps_ * 32;
  auto *producer = llvm::BasicBlock::Create(context(), "producer", function);
  auto *issuing = llvm::BasicBlock::Create(context(), "producer.issue", function);
  auto *done = llvm::BasicBlock::Create(context(), "producer.exit", function);
  auto *consumer = llvm::BasicBlock::Create(context(), "consumer", function);
  builder_.CreateCondBr(builder_.CreateICmpUGE(threadId_, i32(consumerThreads)), producer,
                        consumer);

  builder_.SetInsertPoint(producer);
  callIntrinsic(llvm::Intrinsic::nvvm_setmaxnreg_dec_sync_aligned_u32, {},
                {i32(op.intAttr("producer_registers"))});
  builder_.CreateCondBr(builder_.CreateICmpULT(threadId_, i32(consumerThreads + 32)), issuing,
                        done);
  builder_.SetInsertPoint(issuing);
  issuerThread_ = consumerThreads;
  lowerRegionBody(op.regions()[0]->front(), /*controlFlow=*/false);
  issuerThread_ = 0;
  builder_.CreateBr(done);
  builder_.SetInsertPoint(done);
  builder_.CreateRetVoid();

  builder_.SetInsertPoint(consumer);
  callIntrinsic(llvm::Intrinsic::nvvm_setmaxnreg_inc_sync_aligned_u32, {},
                {i32(op.intAttr("consumer_registers"))});
  consumersOnly_ = true;
}

} // namespace tessera::codegen
