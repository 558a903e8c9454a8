// The NVPTX end of codegen (internal): target machine, optimization pipeline, PTX emission.
//
// generate() (codegen.cpp) lowers the tile IR into an llvm::Module, then calls these in order.
#pragma once

#include "codegen/codegen.h"

#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <memory>
#include <string>

namespace tessera::codegen {

/// nvptx64-nvidia-cuda for options.arch with the PTX ISA version below; 32-bit shared and
/// local pointers (nvptx-short-ptr). Throws CompileError for an arch LLVM or Tessera does not
/// support (Tessera needs sm_80 or newer).
std::unique_ptr<llvm::TargetMachine> createTargetMachine(const CodegenOptions &options);

/// "sm_80" -> 80, "sm_90a" -> 90; -1 when malformed.
int smVersion(const std::string &arch);

/// PTX ISA version of the emitted code: 8.6, accepted by ptxas 12.6+ (CUDA 13's ptxas reads
/// up to 9.0) and by drivers of CUDA 12.6 and newer for JIT.
inline const char *const kPtxFeatures = "+ptx86";

/// Sets the module's triple and data layout for `machine` (call before building IR that
/// depends on type sizes).
void configureModule(llvm::Module &module, llvm::TargetMachine &machine);

/// The default LLVM pipeline at optLevel (O0..O3), in place; above O0, then
/// sinkPredicatesPastLoops on each function, and sinkPointerIncrements with `sinkIncrements`
/// (the module's `carried_addresses`).
void optimizeModule(llvm::Module &module, llvm::TargetMachine &machine, int optLevel,
                    bool vectorizeSLP, bool sinkIncrements = false);

/// Recomputes each i1 compare (and and/or/xor of them) in the blocks that use it past a loop
/// it would otherwise stay live across (sink_predicates.cpp says why).
void sinkPredicatesPastLoops(llvm::Function &function);

/// Moves each increment of a loop-carried pointer (a GEP of a header phi that only the phi
/// uses) past the phi's last use in the increment's block (sink_increments.cpp says why).
void sinkPointerIncrements(llvm::Function &function);

/// Runs the NVPTX backend and returns the PTX text. `strengthReduce` false leaves LLVM's loop
/// strength reduction out of the backend's IR passes (the module's `carried_addresses`): each
/// loop-carried pointer (a pipelined copy's address, one per register of a pointer tile) then
/// stays its own 64-bit value advanced by the step's increment, as in Triton's SASS, instead
/// of one base plus loop-invariant offsets that ptxas recomputes (IMAD.WIDE) at each copy.
std::string emitPTX(llvm::Module &module, llvm::TargetMachine &machine, bool strengthReduce = true);

} // namespace tessera::codegen
