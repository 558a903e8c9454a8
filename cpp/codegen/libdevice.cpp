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

} // namespace

void linkLibdevice(llvm::Module &module, const std::string &path) {
  std::string needed = firstCalledName(module);
  if (needed.empty())
    return;
  std::string file = path.empty() ? kDefaultLibdevicePath : path;
  llvm::SMDiagnostic diagnostic;
  // Lazy: only the bodies that get linked are read from the ~500 KB of bitcode.
  std::unique_ptr<llvm::Module> libdevice =
      llvm::getLazyIRFileModule(file, diagnostic, module.getContext());
  if (!libdevice)
    throw ir::CompileError("codegen: " + needed + " needs libdevice, which could not be read "
                           "from '" + file + "': " + diagnostic.getMessage().str() +
                           " (set TESSERA_LIBDEVICE, or tessera-opt's --libdevice=, to the path of "
                           "libdevice.10.bc; it comes with the CUDA toolkit in nvvm/libdevice/ "
                           "and with NVIDIA's wheels: `pip install nvidia-nvvm` for CUDA 13, "
                           "`pip install nvidia-cuda-nvcc-cu12` for CUDA 12)");
  // libdevice says nvptx64-nvidia-gpulibs; take the kernel's triple and layout to link quietly.
  libdevice->setTargetTriple(module.getTargetTriple());
  libdevice->setDataLayout(module.getDataLayout());
  if (llvm::Linker::linkModules(module, std::move(libdevice), llvm::Linker::LinkOnlyNeeded))
    throw ir::CompileError("codegen: linking libdevice from '" + file + "' failed");
  for (llvm::Function &function : module) {
    if (function.isDeclaration()) {
      if (isLibdeviceName(function))
        throw ir::CompileError("codegen: libdevice at '" + file + "' has no function " +
                               function.getName().str());
      continue;
    }
    if (function.getCallingConv() != llvm::CallingConv::PTX_Kernel)
      function.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  for (llvm::GlobalVariable &global : module.globals()) // e.g. sin's reduction tables
    if (!global.isDeclaration())
      global.setLinkage(llvm::GlobalValue::InternalLinkage);
}

} // namespace tessera::codegen
