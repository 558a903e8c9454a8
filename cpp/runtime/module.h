// Loaded GPU code: a Module is a cubin (or PTX, assembled by the driver's JIT linker) loaded on
// one device; a Function is one kernel in it, with the resources the assembler gave it.
// Sits between the cubin cache (python/tessera/runtime/kernel_cache.py) and launch.h.
#pragma once

#include "runtime/cuda_driver.h"

#include <memory>
#include <string>

namespace tessera::runtime {

/// Resources of one kernel as the driver reports them (cuFuncGetAttribute).
struct FunctionAttributes {
  int numRegs = 0;
  int localBytes = 0;  // local memory per thread (spills, stack)
  int sharedBytes = 0; // static shared memory
  int maxThreadsPerBlock = 0;
};

/// Result of assembling PTX with the driver's JIT linker.
struct JitResult {
  std::string cubin;
  std::string infoLog; // the JIT's report (registers, spills) when it gives one
};

/// Assembles PTX text into a cubin for `device` through cuLinkCreate/cuLinkAddData/cuLinkComplete:
/// the fallback when ptxas is not installed. Throws CudaError with the JIT's error log.
JitResult jitPtxToCubin(const std::string &ptx, int device);

class Function;

class Module : public std::enable_shared_from_this<Module> {
public:
  /// Loads `image` on `device`: a cubin or fatbin (ELF / fatbin magic), else PTX text, which is
  /// first assembled with jitPtxToCubin. Uses the device's current context, or its primary one.
  static std::shared_ptr<Module> load(const std::string &image, int device);
  ~Module();
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  /// The kernel `name` (its mangled PTX name). Throws CudaError when the module has none.
  std::shared_ptr<Function> function(const std::string &name);

  int device() const { return device_; }
  CUcontext context() const { return context_; }

private:
  Module(CUmodule module, CUcontext context, int device)
      : module_(module), context_(context), device_(device) {}
  CUmodule module_;
  CUcontext context_;
  int device_;
};

/// One kernel; keeps its Module loaded while alive.
class Function {
public:
  Function(CUfunction handle, std::shared_ptr<Module> module, std::string name);

  CUfunction handle() const { return handle_; }
  const std::string &name() const { return name_; }
  const Module &module() const { return *module_; }
  const FunctionAttributes &attributes() const { return attributes_; }

  /// Lets launches ask for `bytes` of dynamic shared memory: beyond the default 48 KiB the
  /// kernel must opt in (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES). Throws when static
  /// plus dynamic shared memory exceeds what the device allows per block.
  void reserveDynamicSharedMemory(int bytes);

private:
  CUfunction handle_;
  std::shared_ptr<Module> module_;
  std::string name_;
  FunctionAttributes attributes_;
  int dynamicSharedLimit_ = 48 * 1024;
};

} // namespace tessera::runtime
