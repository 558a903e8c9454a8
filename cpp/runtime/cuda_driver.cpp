// Opens libcuda.so.1 with dlopen, resolves the entry points of DriverApi and runs cuInit once.
// A machine without the driver gets a CudaError that says so, never a crash or a link error.
#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>
#include <vector>

namespace tessera::runtime {
namespace {

struct LoadedDriver {
  DriverApi api{};
  bool ok = false;
  CUresult code = -1;
  std::string call = "dlopen";
  std::string error;
};

template <typename Function>
bool resolveSymbol(void *library, const char *symbol, Function &slot, std::string &missing) {
  slot = reinterpret_cast<Function>(dlsym(library, symbol));
  if (slot == nullptr)
    missing += missing.empty() ? symbol : std::string(", ") + symbol;
  return slot != nullptr;
}

// Versioned names follow CUDA 13's cuda.h (`#define cuLinkCreate cuLinkCreate_v2`, ...). Plain
// dlsym of "cuLaunchKernel" gives the legacy-default-stream variant: stream 0 means the legacy
// default stream, as in the frameworks.
std::string resolveAll(void *library, DriverApi &api) {
  std::string missing;
  resolveSymbol(library, "cuInit", api.cuInit, missing);
  resolveSymbol(library, "cuDriverGetVersion", api.cuDriverGetVersion, missing);
  resolveSymbol(library, "cuDeviceGet", api.cuDeviceGet, missing);
  resolveSymbol(library, "cuDeviceGetCount", api.cuDeviceGetCount, missing);
  resolveSymbol(library, "cuDeviceGetAttribute", api.cuDeviceGetAttribute, missing);
  resolveSymbol(library, "cuDeviceGetName", api.cuDeviceGetName, missing);
  resolveSymbol(library, "cuDevicePrimaryCtxRetain", api.cuDevicePrimaryCtxRetain, missing);
  resolveSymbol(library, "cuCtxGetCurrent", api.cuCtxGetCurrent, missing);
  resolveSymbol(library, "cuCtxSetCurrent", api.cuCtxSetCurrent, missing);
  resolveSymbol(library, "cuCtxGetDevice", api.cuCtxGetDevice, missing);
  resolveSymbol(library, "cuCtxSynchronize", api.cuCtxSynchronize, missing);
  resolveSymbol(library, "cuModuleLoadData", api.cuModuleLoadData, missing);
  resolveSymbol(library, "cuModuleLoadDataEx", api.cuModuleLoadDataEx, missing);
  resolveSymbol(library, "cuModuleUnload", api.cuModuleUnload, missing);
  resolveSymbol(library, "cuModuleGetFunction", api.cuModuleGetFunction, missing);
  resolveSymbol(library, "cuFuncGetAttribute", api.cuFuncGetAttribute, missing);
  resolveSymbol(library, "cuFuncSetAttribute", api.cuFuncSetAttribute, missing);
  resolveSymbol(library, "cuLaunchKernel", api.cuLaunchKernel, missing);
  resolveSymbol(library, "cuLinkCreate_v2", api.cuLinkCreate, missing);
  resolveSymbol(library, "cuLinkAddData_v2", api.cuLinkAddData, missing);
  resolveSymbol(library, "cuLinkComplete", api.cuLinkComplete, missing);
  resolveSymbol(library, "cuLinkDestroy", api.cuLinkDestroy, missing);
  resolveSymbol(library, "cuPointerGetAttribute", api.cuPointerGetAttribute, missing);
  resolveSymbol(library, "cuGetErrorName", api.cuGetErrorName, missing);
  // Optional: only the opt-in TMA path needs it, and says so where it is missing.
  api.cuTensorMapEncodeTiled = reinterpret_cast<decltype(api.cuTensorMapEncodeTiled)>(
      dlsym(library, "cuTensorMapEncodeTiled"));
  resolveSymbol(library, "cuGetErrorString", api.cuGetErrorString, missing);
  return missing;
}

LoadedDriver loadDriver() {
  LoadedDriver loaded;
  dlerror();
  // Never dlclose'd: kernels and contexts live until the process ends.
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char *reason = dlerror();
    loaded.error = std::string("CUDA driver not available: ") +
                   (reason ? reason : "dlopen(\"libcuda.so.1\") failed");
    return loaded;
  }
  std::string missing = resolveAll(library, loaded.api);
  if (!missing.empty()) {
    loaded.call = "dlsym";
    loaded.error = "CUDA driver not available: libcuda.so.1 lacks " + missing +
                   " (the driver is too old for Tessera)";
    return loaded;
  }
  CUresult result = loaded.api.cuInit(0);
  if (result != kCudaSuccess) {
    const char *name = nullptr;
    const char *text = nullptr;
    loaded.api.cuGetErrorName(result, &name);
    loaded.api.cuGetErrorString(result, &text);
    loaded.call = "cuInit";
    loaded.code = result;
    loaded.error = std::string("CUDA driver not available: cuInit failed: ") +
                   (name ? name : "CUDA_ERROR_" + std::to_string(result)) + " (" +
                   (text ? text : "unknown error") + ")";
    return loaded;
  }
  loaded.ok = true;
  return loaded;
}

const LoadedDriver &loadedDriver() {
  static const LoadedDriver loaded = loadDriver(); // thread-safe one-time initialization
  return loaded;
}

} // namespace

const DriverApi &driver() {
  const LoadedDriver &loaded = loadedDriver();
  if (!loaded.ok)
    throw CudaError(loaded.call, loaded.code, loaded.error);
  return loaded.api;
}

std::pair<bool, std::string> driverAvailable() {
  try {
    int count = deviceCount();
    if (count == 0)
      return {false, "CUDA driver loaded but no CUDA device is visible"};
    int version = driverVersion(); // 13000 for CUDA 13.0
    return {true, "CUDA driver " + std::to_string(version / 1000) + "." +
                      std::to_string(version % 1000 / 10) + ", " + std::to_string(count) +
                      " device(s)"};
  } catch (const CudaError &error) {
    return {false, error.what()};
  }
}

void throwCudaError(CUresult result, const char *call, const std::string &detail) {
  const DriverApi &api = loadedDriver().api;
  const char *name = nullptr;
  const char *text = nullptr;
  if (api.cuGetErrorName)
    api.cuGetErrorName(result, &name);
  if (api.cuGetErrorString)
    api.cuGetErrorString(result, &text);
  std::string message = std::string(call) +
                        " failed: " + (name ? name : "CUDA error " + std::to_string(result)) +
                        " (" + (text ? text : "unknown error") + ")" + detail;
  throw CudaError(call, result, message);
}

int driverVersion() {
  int version = 0;
  checkCuda(driver().cuDriverGetVersion(&version), "cuDriverGetVersion");
  return version;
}

int deviceCount() {
  int count = 0;
  checkCuda(driver().cuDeviceGetCount(&count), "cuDeviceGetCount");
  return count;
}

static CUdevice deviceHandle(int ordinal) {
  CUdevice device = 0;
  checkCuda(driver().cuDeviceGet(&device, ordinal), "cuDeviceGet");
  return device;
}

DeviceInfo deviceInfo(int ordinal) {
  const DriverApi &api = driver();
  CUdevice device = deviceHandle(ordinal);
  DeviceInfo info;
  char name[256] = {0};
  checkCuda(api.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName");
  info.name = name;
  auto attribute = [&](DeviceAttribute which) {
    int value = 0;
    checkCuda(api.cuDeviceGetAttribute(&value, which, device), "cuDeviceGetAttribute");
    return value;
  };
  info.computeCapabilityMajor = attribute(kAttrComputeCapabilityMajor);
  info.computeCapabilityMinor = attribute(kAttrComputeCapabilityMinor);
  info.multiprocessorCount = attribute(kAttrMultiprocessorCount);
  info.maxThreadsPerBlock = attribute(kAttrMaxThreadsPerBlock);
  info.warpSize = attribute(kAttrWarpSize);
  info.maxSharedMemoryPerBlock = attribute(kAttrMaxSharedMemoryPerBlock);
  info.maxSharedMemoryPerBlockOptin = attribute(kAttrMaxSharedMemoryPerBlockOptin);
  info.maxSharedMemoryPerMultiprocessor = attribute(kAttrMaxSharedMemoryPerMultiprocessor);
  info.maxRegistersPerMultiprocessor = attribute(kAttrMaxRegistersPerMultiprocessor);
  info.l2CacheBytes = attribute(kAttrL2CacheSize);
  info.maxRegistersPerBlock = attribute(kAttrMaxRegistersPerBlock);
  info.clockRateKhz = attribute(kAttrClockRate);
  info.memoryClockRateKhz = attribute(kAttrMemoryClockRate);
  info.memoryBusWidthBits = attribute(kAttrGlobalMemoryBusWidth);
  return info;
}

CUcontext primaryContext(int ordinal) {
  static std::mutex mutex;
  static std::vector<CUcontext> contexts;
  std::lock_guard<std::mutex> lock(mutex);
  if (ordinal >= 0 && static_cast<size_t>(ordinal) < contexts.size() && contexts[ordinal])
    return contexts[ordinal];
  CUdevice device = deviceHandle(ordinal); // validates the ordinal
  CUcontext context = nullptr;
  checkCuda(driver().cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  if (contexts.size() <= static_cast<size_t>(ordinal))
    contexts.resize(ordinal + 1, nullptr);
  contexts[ordinal] = context;
  return context;
}

ScopedDeviceContext::ScopedDeviceContext(int ordinal) {
  const DriverApi &api = driver();
  CUcontext current = nullptr;
  checkCuda(api.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != nullptr) {
    CUdevice currentDevice = -1;
    checkCuda(api.cuCtxGetDevice(&currentDevice), "cuCtxGetDevice");
    if (currentDevice == deviceHandle(ordinal)) {
      context_ = current;
      return;
    }
  }
  context_ = primaryContext(ordinal);
  checkCuda(api.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  restore_ = current;
}

ScopedDeviceContext::~ScopedDeviceContext() {
  if (restore_ != nullptr)
    driver().cuCtxSetCurrent(restore_); // best effort: a destructor must not throw
}

int pointerDevice(CUdeviceptr pointer) {
  int ordinal = -1;
  if (driver().cuPointerGetAttribute(&ordinal, kPointerDeviceOrdinal, pointer) != kCudaSuccess)
    return -1;
  return ordinal;
}

} // namespace tessera::runtime
