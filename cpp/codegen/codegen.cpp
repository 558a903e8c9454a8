// generate(): the codegen stage as one function of named steps.
//
// tile IR (with layouts) --lower--> LLVM IR --verify--> O3 --> NVPTX --> PTX text.
// A module that has not been through allocate_shared and membar (no shared_size on its func:
// IR written by hand, tests) gets them on a copy first: lowering reads their offsets.
#include "codegen/codegen.h"
#include "codegen/symbol_names.h"

#include "transforms/passes.h"

#include "codegen/libdevice.h"
#include "codegen/lower_to_llvm.h"
#include "codegen/nvptx_target.h"
#include "ir/diagnostics.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <chrono>

namespace tessera::codegen {

namespace {

std::string printModule(const llvm::Module &module) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  module.print(stream, nullptr);
  return text;
}

void verifyModule(const llvm::Module &module, const char *stage) {
  std::string message;
  llvm::raw_string_ostream stream(message);
  if (llvm::verifyModule(module, &stream))
    throw ir::CompileError(std::string("codegen: internal error: invalid LLVM IR ") + stage + ": " +
                           message);
}

int numWarpsOf(const ir::Module &module, const CodegenOptions &options) {
  auto it = module.attributes().find("num_warps");
  if (it == module.attributes().end())
    return options.numWarps;
  const int64_t *value = std::get_if<int64_t>(&it->second);
  if (!value || *value <= 0 || (*value & (*value - 1)) != 0 || *value > 32)
    throw ir::CompileError("codegen: module attribute num_warps must be a power of two <= 32");
  return static_cast<int>(*value);
}

/// Records the wall time since the previous step under `name` (CodegenResult::stepSeconds).
class StepClock {
public:
  explicit StepClock(CodegenResult &result) : result_(result), last_(now()) {}
  void step(const char *name) {
    auto current = now();
    result_.stepSeconds.emplace_back(name, std::chrono::duration<double>(current - last_).count());
    last_ = current;
  }

private:
  static std::chrono::steady_clock::time_point now() { return std::chrono::steady_clock::now(); }
  CodegenResult &result_;
  std::chrono::steady_clock::time_point last_;
};

// Kernels with a dot keep two of Triton's choices off (measured, docs/perf/triton_parity.md):
// the SLP vectorizer (f16x2 packing of elementwise code) reorders their register-heavy code
// into spills (attention's dK/dV at D = 128 fp16 on sm_90a: 16 bytes), and fp32 `/` as
// div.full made a flash attention forward 1.28x slower than div.rn.
bool hasDot(const ir::Operation &func) {
  bool found = false;
  const_cast<ir::Operation &>(func).walk(
      [&](ir::Operation *op) { found = found || op->code() == ir::OpCode::Dot; });
  return found;
}

} // namespace

CodegenResult generate(const ir::Module &module, const CodegenOptions &options) {
  std::vector<ir::Operation *> functions = module.functions();
  if (functions.size() != 1)
    throw ir::CompileError("codegen: expected exactly one func in the module, found " +
                           std::to_string(functions.size()));
  std::unique_ptr<ir::Module> allocated;
  if (!functions.front()->hasAttr("shared_size")) {
    allocated = module.clone();
    transforms::allocateShared(*allocated);
    transforms::insertBarriers(*allocated);
    transforms::placeWgmmaWaits(*allocated);
    transforms::pingpongWarpgroups(*allocated);
    functions = allocated->functions();
  }
  const ir::Operation &func = *functions.front();
  CodegenResult result;
  StepClock clock(result);
  result.numWarps = numWarpsOf(allocated ? *allocated : module, options);
  result.kernelName = ptxSymbolName(func.stringAttr("sym_name"));

  std::unique_ptr<llvm::TargetMachine> machine = createTargetMachine(options);
  llvm::LLVMContext context;
  llvm::Module llvmModule("tessera." + result.kernelName, context);
  configureModule(llvmModule, *machine);

  KernelLowering lowering(llvmModule, result.numWarps);
  // The module's `wgmma_pipeline` with `wgmma_overlap` (knobs; overlap on if absent): groups in
  // flight across back edges, so a wait ties only the results still read.
  const ir::Module &lowered = allocated ? *allocated : module;
  lowering.setPipelineWgmma(lowered.intAttrOr("wgmma_overlap", 1) != 0 &&
                            lowered.intAttrOr("wgmma_pipeline", 0) != 0);
  lowering.setConvergentWaits(lowered.intAttrOr("tma_convergent_waits", 0) != 0);
  lowering.setSmVersion(smVersion(options.arch));
  const bool tensorCores = hasDot(func);
  lowering.setFastDivision(!tensorCores);
  lowering.lowerFunction(func);
  result.producerWarps = lowering.producerWarps();
  int maxnreg = options.maxnreg;
  if (result.producerWarps > 0) {
    // setmaxnreg needs the kernel's register count fixed at launch (PTX ISA): what every
    // thread of the block can have at once, in multiples of 8, within the option's cap.
    int threads = (result.numWarps + result.producerWarps) * 32;
    int fits = std::min(255, 65536 / threads) / 8 * 8;
    maxnreg = maxnreg > 0 ? std::min(maxnreg, fits) : fits;
  }
  if (maxnreg > 0) // NVPTX prints it as the kernel's .maxnreg directive
    if (llvm::Function *kernel = llvmModule.getFunction(result.kernelName))
      kernel->addFnAttr("nvvm.maxnreg", std::to_string(maxnreg));
  result.sharedBytes = lowering.sharedBytes();
  clock.step("lower");
  if (options.keepUnoptimizedIR)
    result.unoptimizedLLVMIR = printModule(llvmModule);
  verifyModule(llvmModule, "after lowering");
  clock.step("print unoptimized + verify");
  linkExternLibraries(llvmModule);
  linkLibdevice(llvmModule, options.libdevicePath);
  clock.step("link");

  // The module's `carried_addresses` (knobs.carried_addresses): each copy's address carried
  // across iterations, advanced in place after the copies, in a backend without loop strength
  // reduction (nvptx_target.h).
  const bool carriedAddresses = lowered.intAttrOr("carried_addresses", 0) != 0;
  optimizeModule(llvmModule, *machine, options.optLevel, !tensorCores, carriedAddresses);
  clock.step("optimize");
  verifyModule(llvmModule, "after optimization");
  if (options.keepLLVMIR)
    result.llvmIR = printModule(llvmModule);
  clock.step("verify + print");
  result.ptx = emitPTX(llvmModule, *machine, !carriedAddresses);
  clock.step("emit PTX");
  return result;
}

std::string llvmVersion() { return TESSERA_LLVM_VERSION; }

} // namespace tessera::codegen
