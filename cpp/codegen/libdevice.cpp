// Links libdevice into a lowered kernel module (see libdevice.h); part of codegen, run between
// lowering and the O3 pipeline. NVVMReflect (in the NVPTX pipeline) then resolves libdevice's
// __nvvm_reflect queries: __CUDA_ARCH from the target, __CUDA_FTZ = 0 (denormals are kept).
// Its plain additions and multiplications become explicitly rounded ones, never fused into
// fma (keepRoundingAsWritten says why).
#include "codegen/libdevice.h"

#include "ir/diagnostics.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/SourceMgr.h>

#include <set>
#include <vector>

namespace tessera::codegen {

namespace {

bool isLibdeviceName(const llvm::Function &function) {
  return function.getName().starts_with("__nv_");
}

std::string firstCalledName(const llvm::Module &module) {
  for (const llvm::Function &function : module)
    if (function.isDeclaration() && isLibdeviceName(function))
      return function.getName().str();
  return "";
}

/// Links the functions `module` needs from the bitcode at `file` (lazily: only the bodies that
/// get linked are read) and makes everything but kernels internal, so that O3 inlines them
/// and drops the rest.
void linkBitcode(llvm::Module &module, const std::string &file, const std::string &needer) {
  llvm::SMDiagnostic diagnostic;
  std::unique_ptr<llvm::Module> library =
      llvm::getLazyIRFileModule(file, diagnostic, module.getContext());
  if (!library)
    throw ir::CompileError("codegen: " + needer + ", which could not be read from '" + file +
                           "': " + diagnostic.getMessage().str());
  // libdevice says nvptx64-nvidia-gpulibs; take the kernel's triple and layout to link quietly.
  library->setTargetTriple(module.getTargetTriple());
  library->setDataLayout(module.getDataLayout());
  if (llvm::Linker::linkModules(module, std::move(library), llvm::Linker::LinkOnlyNeeded))
    throw ir::CompileError("codegen: linking '" + file + "' failed");
  for (llvm::Function &function : module)
    if (!function.isDeclaration() && function.getCallingConv() != llvm::CallingConv::PTX_Kernel)
      function.setLinkage(llvm::GlobalValue::InternalLinkage);
  for (llvm::GlobalVariable &global : module.globals()) // e.g. sin's reduction tables
    if (!global.isDeclaration())
      global.setLinkage(llvm::GlobalValue::InternalLinkage);
}

/// Rewrites each plain fadd/fsub/fmul of `function` (f32, f64) as the explicitly rounded
/// nvvm.add.rn / nvvm.mul.rn intrinsic (a - b as a + -b, which is exact). libdevice's
/// compensated steps (double-float logs, error terms) must round as written; with
/// enable_fp_fusion the target fuses every plain multiply-add of the module (FPOpFusion::Fast)
/// and prints the rest without .rn, which ptxas may fuse in turn. Fused, powf's
/// `m1 - 2*m1*rcp` cost its log2 most of its extra precision: 24 to 73 ulp where
/// |y * log2 x| nears 128, against CUDA's documented 8 (tests/gpu/test_libdevice.py). The
/// intrinsics are what NVVM's own output for libdevice is (add.rn, mul.rn): never fused.
void keepRoundingAsWritten(llvm::Function &function) {
  llvm::Module &module = *function.getParent();
  std::vector<llvm::BinaryOperator *> plain;
  for (llvm::BasicBlock &block : function)
    for (llvm::Instruction &instruction : block)
      if (auto *binary = llvm::dyn_cast<llvm::BinaryOperator>(&instruction))
        if ((binary->getType()->isFloatTy() || binary->getType()->isDoubleTy()) &&
            (binary->getOpcode() == llvm::Instruction::FAdd ||
             binary->getOpcode() == llvm::Instruction::FSub ||
             binary->getOpcode() == llvm::Instruction::FMul))
          plain.push_back(binary);
  for (llvm::BinaryOperator *binary : plain) {
    bool isFloat = binary->getType()->isFloatTy();
    bool isMul = binary->getOpcode() == llvm::Instruction::FMul;
    llvm::Intrinsic::ID id =
        isMul ? (isFloat ? llvm::Intrinsic::nvvm_mul_rn_f : llvm::Intrinsic::nvvm_mul_rn_d)
              : (isFloat ? llvm::Intrinsic::nvvm_add_rn_f : llvm::Intrinsic::nvvm_add_rn_d);
    llvm::IRBuilder<> builder(binary);
    llvm::Value *right = binary->getOperand(1);
    if (binary->getOpcode() == llvm::Instruction::FSub)
      right = builder.CreateFNeg(right);
    llvm::Function *intrinsic = llvm::Intrinsic::getOrInsertDeclaration(&module, id);
    llvm::CallInst *call = builder.CreateCall(intrinsic, {binary->getOperand(0), right});
    call->takeName(binary);
    binary->replaceAllUsesWith(call);
    binary->eraseFromParent();
  }
}

} // namespace

void linkExternLibraries(llvm::Module &module) {
  llvm::NamedMDNode *libs = module.getNamedMetadata("tessera.extern_libs");
  if (!libs)
    return;
  std::vector<std::string> paths;
  for (llvm::MDNode *node : libs->operands())
    paths.push_back(llvm::cast<llvm::MDString>(node->getOperand(0))->getString().str());
  module.eraseNamedMetadata(libs);
  for (const std::string &path : paths)
    linkBitcode(module, path, "an extern_elementwise call needs the library '" + path + "'");
}

void linkLibdevice(llvm::Module &module, const std::string &path) {
  std::string needed = firstCalledName(module);
  if (needed.empty())
    return;
  std::string file = path.empty() ? kDefaultLibdevicePath : path;
  std::set<const llvm::Function *> before;
  for (const llvm::Function &function : module)
    if (!function.isDeclaration())
      before.insert(&function);
  linkBitcode(module, file,
              needed + " needs libdevice (set TESSERA_LIBDEVICE, or tessera-opt's --libdevice=, to "
                       "the path of libdevice.10.bc; it comes with the CUDA toolkit in "
                       "nvvm/libdevice/ and with NVIDIA's wheels: `pip install nvidia-nvvm` for "
                       "CUDA 13, `pip install nvidia-cuda-nvcc-cu12` for CUDA 12)");
  for (llvm::Function &function : module) {
    if (function.isDeclaration() && isLibdeviceName(function))
      throw ir::CompileError("codegen: libdevice at '" + file + "' has no function " +
                             function.getName().str());
    if (!function.isDeclaration() && !before.count(&function)) // linked from libdevice
      keepRoundingAsWritten(function);
  }
}

} // namespace tessera::codegen
