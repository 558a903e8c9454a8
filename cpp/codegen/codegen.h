// Code generation, the last compiler stage: tile IR with layouts -> LLVM IR -> O3 -> PTX.
//
// Input: a module whose every tensor type carries an encoding (after the layout passes).
// Output: the PTX of its one kernel plus what the launcher needs (name, threads, shared bytes).
// Lowering lives in lower_*.cpp; the NVPTX target machine and pipeline in nvptx_target.cpp.
#pragma once

#include "ir/ir.h"

#include <string>
#include <utility>
#include <vector>

namespace tessera::codegen {

struct CodegenOptions {
  /// "sm_80", "sm_86", "sm_89", "sm_90" or "sm_90a".
  std::string arch = "sm_90a";
  /// Used when the module has no `num_warps` attribute; the module's attribute wins (its
  /// layouts were built for it).
  int numWarps = 4;
  /// 0..3, for both the LLVM pipeline and the NVPTX backend.
  int optLevel = 3;
  /// Contract a*b+c into fma, as Triton's default enable_fp_fusion=True.
  bool enableFpFusion = true;
  /// Registers per thread the kernel may use (PTX .maxnreg, Triton's `maxnreg`); 0: no cap.
  int maxnreg = 0;
  /// libdevice.10.bc, linked when a math op needs it (libdevice.h); empty: the default path.
  std::string libdevicePath;
  /// Print the LLVM IR as lowered (CodegenResult::unoptimizedLLVMIR): tests run it on the CPU;
  /// the compiler does not keep it, and printing costs a few milliseconds.
  bool keepUnoptimizedIR = true;
  /// Print the optimized LLVM IR (CodegenResult::llvmIR, `asm["llir"]`). A launch keeps only
  /// the cubin: it leaves this off and saves the printing (docs/perf/compile_time.md).
  bool keepLLVMIR = true;
};

struct CodegenResult {
  /// LLVM IR after the optimization pipeline, and as lowered (before it).
  std::string llvmIR;
  std::string unoptimizedLLVMIR;
  std::string ptx;
  std::string kernelName;
  /// Dynamic shared memory the kernel needs at launch, in bytes.
  int sharedBytes = 0;
  /// The kernel's warps (the num_warps every layout covers).
  int numWarps = 4;
  /// Warps a warp_specialize op adds after them (0 without one): launch with
  /// (numWarps + producerWarps) * 32 threads.
  int producerWarps = 0;
  /// Wall seconds of each step, in order ("lower", "link", "optimize", "print", "emit", ...):
  /// where a compile's time goes (docs/perf/compile_time.md).
  std::vector<std::pair<std::string, double>> stepSeconds;
};

/// Generates PTX for the module's single `func`. Throws ir::CompileError naming the op and
/// its location for anything unsupported (a tensor without a layout, an unknown arch, ...).
CodegenResult generate(const ir::Module &module, const CodegenOptions &options = {});

/// The LLVM version Tessera was built against, e.g. "22.1.8".
std::string llvmVersion();

/// Tessera's passes over LLVM IR (generate() runs them in its own pipeline: sink_predicates
/// after O3); by name, for tessera-opt.
struct LLVMPassInfo {
  std::string name;
  std::string description;
};
std::vector<LLVMPassInfo> llvmPasses();

/// Parses LLVM IR text, runs the named passes of llvmPasses() on every function in order and
/// returns the module printed. Throws ir::CompileError for unparsable IR ("file:line:col"),
/// an unknown name, or IR the passes left invalid.
std::string runLLVMPasses(const std::string &llvmIR, const std::vector<std::string> &names,
                          const std::string &fileName = "<stdin>");
/// (op mnemonic, lowering entry point) for every op codegen lowers, from its dispatch table;
/// the op-completeness test compares it with ops.def.
std::vector<std::pair<std::string, std::string>> loweringRules();

} // namespace tessera::codegen
