// The CUDA driver API, loaded at run time: libcuda.so.1 is opened with dlopen on first use and
// never linked, so Tessera builds and imports on machines with no GPU and no CUDA toolkit.
// Sits under module.h (load cubins) and launch.h (launch kernels); everything that talks to the
// driver goes through driver() and checkCuda().
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace tessera::runtime {

// The driver's types, declared here (with the values of CUDA 13's cuda.h) because cuda.h may be
// absent where Tessera is built. Handles are opaque pointers, as in cuda.h.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUlinkState = struct CUlinkState_st *;
using CUjit_option = int;
using CUjitInputType = int;

constexpr CUresult kCudaSuccess = 0;

// Device attributes (CUdevice_attribute) read by deviceInfo().
enum DeviceAttribute : int {
  kAttrMaxThreadsPerBlock = 1,
  kAttrMaxSharedMemoryPerBlock = 8,
  kAttrWarpSize = 10,
  kAttrMaxRegistersPerBlock = 12,
  kAttrClockRate = 13,
  kAttrMultiprocessorCount = 16,
  kAttrMemoryClockRate = 36,
  kAttrGlobalMemoryBusWidth = 37,
  kAttrL2CacheSize = 38,
  kAttrComputeCapabilityMajor = 75,
  kAttrComputeCapabilityMinor = 76,
  kAttrMaxSharedMemoryPerMultiprocessor = 81,
  kAttrMaxRegistersPerMultiprocessor = 82,
  kAttrMaxSharedMemoryPerBlockOptin = 97,
};

// Function attributes (CUfunction_attribute).
enum FunctionAttribute : int {
  kFuncMaxThreadsPerBlock = 0,
  kFuncSharedSizeBytes = 1,
  kFuncLocalSizeBytes = 3,
  kFuncNumRegs = 4,
  kFuncMaxDynamicSharedSizeBytes = 8,
};

// JIT options (CUjit_option) and linker input types (CUjitInputType).
enum JitOption : int {
  kJitInfoLogBuffer = 3,
  kJitInfoLogBufferSizeBytes = 4,
  kJitErrorLogBuffer = 5,
  kJitErrorLogBufferSizeBytes = 6,
  kJitLogVerbose = 12,
};
constexpr CUjitInputType kJitInputPtx = 1;

// Pointer attributes (CUpointer_attribute).
enum PointerAttribute : int {
  kPointerMemoryType = 2,
  kPointerDeviceOrdinal = 9,
};

/// The table of driver entry points Tessera uses. Where cuda.h renames a function to a versioned
/// symbol (`#define cuLinkCreate cuLinkCreate_v2`), the table holds the versioned one.
struct DriverApi {
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice device);
  CUresult (*cuDeviceGetName)(char *name, int length, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *context, CUdevice device);
  CUresult (*cuCtxGetCurrent)(CUcontext *context);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxGetDevice)(CUdevice *device);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule *module, const void *image);
  CUresult (*cuModuleLoadDataEx)(CUmodule *module, const void *image, unsigned int numOptions,
                                 CUjit_option *options, void **optionValues);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction *function, CUmodule module, const char *name);
  CUresult (*cuFuncGetAttribute)(int *value, int attribute, CUfunction function);
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned int gridX, unsigned int gridY,
                             unsigned int gridZ, unsigned int blockX, unsigned int blockY,
                             unsigned int blockZ, unsigned int sharedBytes, CUstream stream,
                             void **params, void **extra);
  CUresult (*cuLinkCreate)(unsigned int numOptions, CUjit_option *options, void **optionValues,
                           CUlinkState *state);
  CUresult (*cuLinkAddData)(CUlinkState state, CUjitInputType type, void *data, size_t size,
                            const char *name, unsigned int numOptions, CUjit_option *options,
                            void **optionValues);
  CUresult (*cuLinkComplete)(CUlinkState state, void **cubin, size_t *size);
  CUresult (*cuLinkDestroy)(CUlinkState state);
  CUresult (*cuPointerGetAttribute)(void *data, int attribute, CUdeviceptr pointer);
  CUresult (*cuGetErrorName)(CUresult error, const char **name);
  /// Optional (null in drivers before CUDA 12): the TMA path's tensor maps (tensor_map.h).
  CUresult (*cuTensorMapEncodeTiled)(void *tensorMap, int dataType, unsigned rank,
                                     void *globalAddress, const unsigned long long *globalDim,
                                     const unsigned long long *globalStrides,
                                     const unsigned *boxDim, const unsigned *elementStrides,
                                     int interleave, int swizzle, int l2Promotion, int oobFill);
  CUresult (*cuGetErrorString)(CUresult error, const char **text);
};

/// A failed driver call, or no usable driver at all (code() == -1 then).
/// what() reads "cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (device kernel image is
/// invalid)" or "CUDA driver not available: libcuda.so.1: cannot open shared object file ...".
class CudaError : public std::runtime_error {
public:
  CudaError(std::string call, CUresult code, const std::string &message)
      : std::runtime_error(message), call_(std::move(call)), code_(code) {}
  const std::string &call() const { return call_; }
  CUresult code() const { return code_; }

private:
  std::string call_;
  CUresult code_;
};

/// The loaded, initialized driver (cuInit done). Throws CudaError when libcuda cannot be opened,
/// lacks an entry point, or cuInit fails; the failure is remembered and thrown again on each call.
const DriverApi &driver();

/// Whether driver() succeeds and at least one device is visible; else false and why.
std::pair<bool, std::string> driverAvailable();

/// Throws CudaError "<call> failed: <NAME> (<driver's text>)<detail>".
[[noreturn]] void throwCudaError(CUresult result, const char *call, const std::string &detail = "");

/// Throws CudaError naming `call` and the driver's error name and text when result != success.
inline void checkCuda(CUresult result, const char *call) {
  if (result != kCudaSuccess)
    throwCudaError(result, call);
}

/// Driver version as reported by cuDriverGetVersion (e.g. 13000 for CUDA 13.0).
int driverVersion();
int deviceCount();

struct DeviceInfo {
  std::string name;
  int computeCapabilityMajor = 0;
  int computeCapabilityMinor = 0;
  int multiprocessorCount = 0;
  int maxThreadsPerBlock = 0;
  int warpSize = 0;
  int maxSharedMemoryPerBlock = 0;      // without opting in (48 KiB)
  int maxSharedMemoryPerBlockOptin = 0; // with cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)
  int maxSharedMemoryPerMultiprocessor = 0;
  int maxRegistersPerMultiprocessor = 0;
  int l2CacheBytes = 0;
  int maxRegistersPerBlock = 0;
  int clockRateKhz = 0;       // SM clock
  int memoryClockRateKhz = 0; // peak memory clock
  int memoryBusWidthBits = 0;
};
DeviceInfo deviceInfo(int device);

/// The primary context of `device`, retained once per process and never released (as PyTorch).
CUcontext primaryContext(int device);

/// Makes a context of `device` current for the scope: the current one when it already belongs
/// to `device`; else the device's primary context. When no context was current, the primary
/// context stays current afterwards (as PyTorch does); a context of another device is restored.
class ScopedDeviceContext {
public:
  explicit ScopedDeviceContext(int device);
  ~ScopedDeviceContext();
  ScopedDeviceContext(const ScopedDeviceContext &) = delete;
  ScopedDeviceContext &operator=(const ScopedDeviceContext &) = delete;
  CUcontext context() const { return context_; }

private:
  CUcontext context_ = nullptr;
  CUcontext restore_ = nullptr;
};

/// The device ordinal that owns `pointer`, or -1 when the driver does not know it (host memory).
int pointerDevice(CUdeviceptr pointer);

} // namespace tessera::runtime
