// Loads cubins on a device, assembles PTX with the driver's JIT linker when ptxas is absent, and
// reads and raises per-kernel limits (registers, local and shared memory).
#include "runtime/module.h"

#include <cstring>
#include <vector>

namespace tessera::runtime {
namespace {

bool isBinaryImage(const std::string &image) {
  static const char elfMagic[4] = {0x7f, 'E', 'L', 'F'};
  static const unsigned char fatbinMagic[4] = {0x50, 0xed, 0x55, 0xba}; // 0xba55ed50, LE
  return image.size() >= 4 && (std::memcmp(image.data(), elfMagic, 4) == 0 ||
                               std::memcmp(image.data(), fatbinMagic, 4) == 0);
}

std::string describeDevice(int device) {
  try {
    DeviceInfo info = deviceInfo(device);
    return "device " + std::to_string(device) + " (" + info.name + ", sm_" +
           std::to_string(info.computeCapabilityMajor) +
           std::to_string(info.computeCapabilityMinor) + ")";
  } catch (const CudaError &) {
    return "device " + std::to_string(device);
  }
}

// Destroys a link state (and the cubin it owns) on every path out of jitPtxToCubin.
struct LinkStateGuard {
  CUlinkState state = nullptr;
  ~LinkStateGuard() {
    if (state != nullptr)
      driver().cuLinkDestroy(state);
  }
};

} // namespace

JitResult jitPtxToCubin(const std::string &ptx, int device) {
  const DriverApi &api = driver();
  ScopedDeviceContext scope(device); // the JIT targets the current context's device
  std::vector<char> infoLog(1 << 16, '\0');
  std::vector<char> errorLog(1 << 16, '\0');
  CUjit_option options[] = {kJitInfoLogBuffer, kJitInfoLogBufferSizeBytes, kJitErrorLogBuffer,
                            kJitErrorLogBufferSizeBytes, kJitLogVerbose};
  void *values[] = {infoLog.data(), reinterpret_cast<void *>(infoLog.size() - 1), errorLog.data(),
                    reinterpret_cast<void *>(errorLog.size() - 1), reinterpret_cast<void *>(1)};
  LinkStateGuard link;
  checkCuda(api.cuLinkCreate(5, options, values, &link.state), "cuLinkCreate");
  // The PTX must be NUL-terminated; std::string::c_str() is.
  CUresult result = api.cuLinkAddData(link.state, kJitInputPtx, const_cast<char *>(ptx.c_str()),
                                      ptx.size() + 1, "kernel.ptx", 0, nullptr, nullptr);
  void *cubin = nullptr;
  size_t cubinSize = 0;
  if (result == kCudaSuccess)
    result = api.cuLinkComplete(link.state, &cubin, &cubinSize);
  if (result != kCudaSuccess)
    throwCudaError(result, "cuLinkAddData (PTX JIT)",
                   " on " + describeDevice(device) + ":\n" + errorLog.data());
  JitResult jit;
  jit.cubin.assign(static_cast<const char *>(cubin), cubinSize); // owned by the link state
  jit.infoLog = infoLog.data();
  return jit;
}

std::shared_ptr<Module> Module::load(const std::string &image, int device) {
  const DriverApi &api = driver();
  ScopedDeviceContext scope(device);
  std::string assembled;
  const void *data = image.data();
  if (!isBinaryImage(image)) {
    assembled = jitPtxToCubin(image, device).cubin;
    data = assembled.data();
  }
  CUmodule module = nullptr;
  CUresult result = api.cuModuleLoadData(&module, data);
  if (result != kCudaSuccess)
    throwCudaError(result, "cuModuleLoadData", " on " + describeDevice(device));
  return std::shared_ptr<Module>(new Module(module, scope.context(), device));
}

Module::~Module() {
  // Best effort: at interpreter exit the driver may already be shut down, which is harmless.
  const DriverApi &api = driver();
  CUcontext current = nullptr;
  api.cuCtxGetCurrent(&current);
  if (current != context_)
    api.cuCtxSetCurrent(context_);
  api.cuModuleUnload(module_);
  if (current != context_ && current != nullptr)
    api.cuCtxSetCurrent(current);
}

std::shared_ptr<Function> Module::function(const std::string &name) {
  CUfunction handle = nullptr;
  CUresult result = driver().cuModuleGetFunction(&handle, module_, name.c_str());
  if (result != kCudaSuccess)
    throwCudaError(result, "cuModuleGetFunction", ": no kernel named '" + name + "'");
  return std::make_shared<Function>(handle, shared_from_this(), name);
}

Function::Function(CUfunction handle, std::shared_ptr<Module> module, std::string name)
    : handle_(handle), module_(std::move(module)), name_(std::move(name)) {
  const DriverApi &api = driver();
  auto attribute = [&](FunctionAttribute which) {
    int value = 0;
    checkCuda(api.cuFuncGetAttribute(&value, which, handle_), "cuFuncGetAttribute");
    return value;
  };
  attributes_.numRegs = attribute(kFuncNumRegs);
  attributes_.localBytes = attribute(kFuncLocalSizeBytes);
  attributes_.sharedBytes = attribute(kFuncSharedSizeBytes);
  attributes_.maxThreadsPerBlock = attribute(kFuncMaxThreadsPerBlock);
}

void Function::reserveDynamicSharedMemory(int bytes) {
  if (bytes <= dynamicSharedLimit_)
    return;
  int device = module_->device();
  int optin = deviceInfo(device).maxSharedMemoryPerBlockOptin;
  if (attributes_.sharedBytes + bytes > optin)
    throw CudaError(
        "cuFuncSetAttribute", -1,
        "kernel '" + name_ + "' needs " + std::to_string(attributes_.sharedBytes + bytes) +
            " bytes of shared memory (" + std::to_string(attributes_.sharedBytes) + " static + " +
            std::to_string(bytes) + " dynamic) but " + describeDevice(device) + " allows at most " +
            std::to_string(optin) + " per block");
  checkCuda(driver().cuFuncSetAttribute(handle_, kFuncMaxDynamicSharedSizeBytes, bytes),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  dynamicSharedLimit_ = bytes;
}

} // namespace tessera::runtime
