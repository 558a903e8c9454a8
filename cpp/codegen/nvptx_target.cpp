// The NVPTX target machine, the LLVM optimization pipeline and PTX emission.
//
// Last step of codegen: the lowered module is optimized with the default O3 pipeline
// (PassBuilder) and printed as PTX by the NVPTX backend. Shared and local pointers are 32 bits
// (nvptx-short-ptr), as in Triton, which saves registers in address arithmetic. Predicates
// live across a loop are then recomputed past it (sink_predicates.cpp). With the module's
// `carried_addresses`, the backend runs without loop strength reduction (emitPTX), after the
// increments of loop-carried pointers moved past their copies (sink_increments.cpp).
#include "codegen/nvptx_target.h"

#include "ir/diagnostics.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Triple.h>

#include <mutex>

extern "C" void LLVMInitializeNVPTXTargetInfo();
extern "C" void LLVMInitializeNVPTXTarget();
extern "C" void LLVMInitializeNVPTXTargetMC();
extern "C" void LLVMInitializeNVPTXAsmPrinter();

namespace tessera::codegen {

namespace {

const char *const kTriple = "nvptx64-nvidia-cuda";

/// LLVM's default reaction to a fatal error is to print it and exit the process, which would
/// kill a notebook's kernel. Ours throws instead: the compile fails with LLVM's message and
/// the process lives on (the half-built LLVM module is dropped; its context may leak).
[[noreturn]] void throwOnFatalError(void *, const char *reason, bool) {
  throw ir::CompileError(std::string("codegen: LLVM reported a fatal error: ") + reason);
}

/// Registers the NVPTX target and sets the backend's command-line knobs, once per process.
/// The knobs are process-global in LLVM; our LLVM is private to libtessera_core (its symbols
/// are hidden), so this does not affect another LLVM loaded in the same process.
void initializeNVPTXOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::install_fatal_error_handler(throwOnFatalError);
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    const char *argv[] = {"tessera", "-nvptx-short-ptr"};
    if (!llvm::cl::ParseCommandLineOptions(2, argv, "", &llvm::errs()))
      throw ir::CompileError("codegen: LLVM rejected the option -nvptx-short-ptr");
  });
}

} // namespace

/// "sm_80" -> 80, "sm_90a" -> 90; -1 when malformed.
int smVersion(const std::string &arch) {
  if (arch.rfind("sm_", 0) != 0 || arch.size() < 5)
    return -1;
  size_t digits = 3;
  while (digits < arch.size() && std::isdigit(static_cast<unsigned char>(arch[digits])))
    ++digits;
  std::string suffix = arch.substr(digits);
  if (digits == 3 || !(suffix.empty() || suffix == "a" || suffix == "f"))
    return -1;
  return std::stoi(arch.substr(3, digits - 3));
}

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const CodegenOptions &options) {
  initializeNVPTXOnce();
  if (smVersion(options.arch) < 80)
    throw ir::CompileError("codegen: unsupported arch '" + options.arch +
                           "' (expected sm_80 or newer, e.g. sm_80, sm_90a)");
  if (options.optLevel < 0 || options.optLevel > 3)
    throw ir::CompileError("codegen: optLevel must be 0..3");
  llvm::Triple triple(kTriple);
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    throw ir::CompileError("codegen: no NVPTX target in this LLVM: " + error);
  // Asked of a subtarget for a known CPU: creating one for an unknown CPU prints a warning.
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(triple, "sm_80", kPtxFeatures));
  if (!subtarget || !subtarget->isCPUStringValid(options.arch))
    throw ir::CompileError("codegen: LLVM " + llvmVersion() + " does not know arch '" +
                           options.arch + "'");
  llvm::TargetOptions targetOptions;
  targetOptions.AllowFPOpFusion =
      options.enableFpFusion ? llvm::FPOpFusion::Fast : llvm::FPOpFusion::Strict;
  llvm::CodeGenOptLevel level =
      llvm::CodeGenOpt::getLevel(options.optLevel).value_or(llvm::CodeGenOptLevel::Aggressive);
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, options.arch, kPtxFeatures, targetOptions, std::nullopt, std::nullopt, level));
}

void configureModule(llvm::Module &module, llvm::TargetMachine &machine) {
  module.setTargetTriple(machine.getTargetTriple());
  module.setDataLayout(machine.createDataLayout());
}

void optimizeModule(llvm::Module &module, llvm::TargetMachine &machine, int optLevel,
                    bool vectorizeSLP, bool sinkIncrements) {
  static const llvm::OptimizationLevel levels[] = {
      llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1, llvm::OptimizationLevel::O2,
      llvm::OptimizationLevel::O3};
  llvm::LoopAnalysisManager loopAnalyses;
  llvm::FunctionAnalysisManager functionAnalyses;
  llvm::CGSCCAnalysisManager cgsccAnalyses;
  llvm::ModuleAnalysisManager moduleAnalyses;
  // The SLP vectorizer packs neighbouring f16/bf16 operations into f16x2 / bf16x2
  // instructions (and pairs of fp32->f16 conversions into one cvt.rn.f16x2.f32), as Triton
  // runs it; LLVM's default pipeline tuning leaves it off. The caller decides (codegen.cpp).
  llvm::PipelineTuningOptions tuning;
  tuning.SLPVectorization = vectorizeSLP && optLevel >= 2;
  llvm::PassBuilder passBuilder(&machine, tuning);
  passBuilder.registerModuleAnalyses(moduleAnalyses);
  passBuilder.registerCGSCCAnalyses(cgsccAnalyses);
  passBuilder.registerFunctionAnalyses(functionAnalyses);
  passBuilder.registerLoopAnalyses(loopAnalyses);
  passBuilder.crossRegisterProxies(loopAnalyses, functionAnalyses, cgsccAnalyses, moduleAnalyses);
  llvm::OptimizationLevel level = levels[std::clamp(optLevel, 0, 3)];
  llvm::ModulePassManager passes = optLevel == 0 ? passBuilder.buildO0DefaultPipeline(level)
                                                 : passBuilder.buildPerModuleDefaultPipeline(level);
  passes.run(module, moduleAnalyses);
  if (optLevel > 0)
    for (llvm::Function &function : module) {
      sinkPredicatesPastLoops(function);
      if (sinkIncrements)
        sinkPointerIncrements(function);
    }
}

namespace {

/// Adds the backend's passes to `passes`, with or without loop strength reduction. LLVM offers
/// no per-pipeline switch for it: TargetPassConfig reads the process-global -disable-lsr while
/// it builds the pipeline (not while it runs), so the option is set and reset around the
/// build, under a lock that every build takes (codegen runs in several threads at once).
bool addBackendPasses(llvm::legacy::PassManager &passes, llvm::raw_pwrite_stream &stream,
                      llvm::TargetMachine &machine, bool strengthReduce) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  static auto *disableLSR = [] {
    llvm::cl::Option *option = llvm::cl::getRegisteredOptions().lookup("disable-lsr");
    if (!option)
      throw ir::CompileError("codegen: this LLVM has no -disable-lsr option");
    return static_cast<llvm::cl::opt<bool> *>(option);
  }();
  disableLSR->setValue(!strengthReduce);
  bool failed =
      machine.addPassesToEmitFile(passes, stream, nullptr, llvm::CodeGenFileType::AssemblyFile);
  disableLSR->setValue(false);
  return failed;
}

} // namespace

std::string emitPTX(llvm::Module &module, llvm::TargetMachine &machine, bool strengthReduce) {
  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream stream(ptx);
  llvm::legacy::PassManager passes;
  if (addBackendPasses(passes, stream, machine, strengthReduce))
    throw ir::CompileError("codegen: the NVPTX target cannot emit assembly");
  passes.run(module);
  return std::string(ptx.str());
}

} // namespace tessera::codegen
