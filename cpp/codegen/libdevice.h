// libdevice: NVIDIA's bitcode library of math functions (__nv_expf, __nv_erff, ...), shipped
// with CUDA as nvvm/libdevice/libdevice.10.bc. lower_math.cpp emits calls of its functions;
// generate() (codegen.cpp) links the ones used into the module before the O3 pipeline.
#pragma once

#include <llvm/IR/Module.h>

#include <string>

namespace tessera::codegen {

/// Where libdevice is looked for when CodegenOptions::libdevicePath is empty (the Python
/// driver resolves TESSERA_LIBDEVICE and CUDA_HOME and passes the path explicitly).
inline const char *const kDefaultLibdevicePath = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";

/// Links the libdevice functions `module` calls (declarations named __nv_*) from the bitcode
/// at `path` (kDefaultLibdevicePath when empty), lazily, and makes them internal so that O3
/// inlines them and drops the rest. Does nothing when no __nv_ function is called; throws
/// CompileError when libdevice is needed but missing, or lacks a called function.
void linkLibdevice(llvm::Module &module, const std::string &path);

/// Links the bitcode libraries that extern_elementwise calls name by lib_path (recorded by
/// lower_math.cpp in the module's "tessera.extern_libs" metadata), as linkLibdevice does;
/// throws CompileError when one cannot be read or linked.
void linkExternLibraries(llvm::Module &module);

} // namespace tessera::codegen
