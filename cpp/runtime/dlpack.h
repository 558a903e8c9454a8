// The parts of the DLPack ABI Tessera reads (DLPack 0.8 tensors, 1.x versioned tensors and the
// 1.x C exchange table), declared here because dlpack.h is not a build dependency. Layouts follow
// github.com/dmlc/dlpack include/dlpack/dlpack.h; only the consumer side is declared.
#pragma once

#include <cstdint>

namespace tessera::runtime::dlpack {

enum DeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3, // pinned host memory (cudaMallocHost): reachable from the GPU
  kDLCUDAManaged = 13,
};

enum TypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLBfloat = 4,
  kDLBool = 6,
  kDLFloat8_e4m3fn = 10,
  kDLFloat8_e5m2 = 12,
};

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides; // in elements; may be null for a compact row-major tensor (before 1.0)
  uint64_t byte_offset;
};

/// Capsule name "dltensor" (renamed "used_dltensor" when a consumer takes ownership).
struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(DLManagedTensor *self);
};

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

/// Capsule name "dltensor_versioned". Fields after `flags` may move when `version.major` changes.
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
};

constexpr uint32_t kSupportedMajorVersion = 1;

/// The C exchange table a type publishes as `type(x).__dlpack_c_exchange_api__` (a capsule named
/// "dlpack_exchange_api"; drafts: `__c_dlpack_exchange_api__`, an int holding the address).
/// Tessera uses dltensor_from_py_object_no_sync, which fills a DLTensor on the caller's stack
/// without allocating (the fastest way to read a tensor's address and dtype), and
/// current_work_stream (the framework's current stream, e.g. torch's, in one C call).
struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  DLPackExchangeAPIHeader *prev_api;
};

struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  void *managed_tensor_allocator;
  void *managed_tensor_from_py_object_no_sync;
  void *managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensor *out); // 0, or -1 + Python error
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
};

} // namespace tessera::runtime::dlpack
