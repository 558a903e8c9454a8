// sink_increments: moves each increment of a loop-carried pointer to the end of its block. A
// pass over LLVM IR, run after O3 with the module's `carried_addresses` (nvptx_target.cpp);
// alone: `tessera-opt k.ll --sink_increments` (tests/lit/codegen/sink_increments.ll).
//
// Why: without loop strength reduction (carried_addresses), each register of a pipelined
// copy's pointer tile is a header phi whose back-edge value is a GEP of the phi itself
// (`a_ptrs += BLOCK_K * stride_ak`). The pipeliner computes the next step's addresses before
// the step's copies, which still read the phi: both addresses are then live together, and the
// backend adds into a fresh register and moves it back at the back edge (a `mov.b64` per copy,
// and IMAD.MOVs next to the copies in SASS). Past the phi's other uses, the increment reads
// the phi's last use and the backend adds in place (`add.s64 %rd, %rd, 128`), as Triton's PTX
// does. Only an increment nothing but the phi uses moves, within its block (its operands stay
// defined before it), to right after the phi's last use there.
#include "codegen/nvptx_target.h"

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/Instructions.h>

namespace tessera::codegen {

void sinkPointerIncrements(llvm::Function &function) {
  for (llvm::BasicBlock &header : function)
    for (llvm::PHINode &phi : header.phis()) {
      if (!phi.getType()->isPointerTy())
        continue;
      for (unsigned i = 0; i < phi.getNumIncomingValues(); ++i) {
        auto *increment = llvm::dyn_cast<llvm::GetElementPtrInst>(phi.getIncomingValue(i));
        llvm::BasicBlock *latch = phi.getIncomingBlock(i);
        if (!increment || increment->getPointerOperand() != &phi || !increment->hasOneUse() ||
            increment->getParent() != latch)
          continue;
        // Right after the phi's last use in the block (the step's last copy), if after it.
        llvm::Instruction *last = increment;
        for (llvm::User *user : phi.users()) {
          auto *inst = llvm::dyn_cast<llvm::Instruction>(user);
          if (inst && inst->getParent() == latch && !llvm::isa<llvm::PHINode>(inst) &&
              last->comesBefore(inst))
            last = inst;
        }
        if (last != increment)
          increment->moveAfter(last);
      }
    }
}

} // namespace tessera::codegen
