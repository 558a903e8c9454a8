// Links libdevice into a lowered kernel module (see libdevice.h); part of codegen, run between
// lowering and the O3 pipeline. NVVMReflect (in the NVPTX pipeline) then resolves libdevice's
// __nvvm_reflect queries: __CUDA_ARCH from the target, __CUDA_FTZ = 0 (denormals are kept).
#include "codegen/libdevice.h"

#include "ir/diagnostics.h"

#include <llvm/IRReader/IRReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/SourceMgr.h>

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
  linkBitcode(module, file,
              needed + " needs libdevice (set TESSERA_LIBDEVICE, or tessera-opt's --libdevice=, to "
                       "the path of libdevice.10.bc; it comes with the CUDA toolkit in "
                       "nvvm/libdevice/ and with NVIDIA's wheels: `pip install nvidia-nvvm` for "
                       "CUDA 13, `pip install nvidia-cuda-nvcc-cu12` for CUDA 12)");
  for (llvm::Function &function : module)
    if (function.isDeclaration() && isLibdeviceName(function))
      throw ir::CompileError("codegen: libdevice at '" + file + "' has no function " +
                             function.getName().str());
}

} // namespace tessera::codegen
