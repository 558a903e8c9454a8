// CUtensorMap encoding through the driver (see tensor_map.h).
#include "runtime/tensor_map.h"

#include "runtime/cuda_driver.h"

#include <stdexcept>
#include <string>

namespace tessera::runtime {

void checkTensorMapArguments(const TensorMapArguments &a) {
  size_t rank = a.globalDim.size();
  if (rank < 1 || rank > 5)
    throw std::invalid_argument("tensor map: rank must be 1 to 5, got " + std::to_string(rank));
  if (a.globalStrides.size() != rank - 1)
    throw std::invalid_argument("tensor map: expected " + std::to_string(rank - 1) +
                                " global strides, got " + std::to_string(a.globalStrides.size()));
  if (a.boxDim.size() != rank || a.elementStrides.size() != rank)
    throw std::invalid_argument("tensor map: box dims and element strides need one entry per dim");
  if (a.globalAddress % 16)
    throw std::invalid_argument("tensor map: the global address must be 16-byte aligned");
  for (uint64_t stride : a.globalStrides)
    if (stride % 16)
      throw std::invalid_argument("tensor map: global strides must be multiples of 16 bytes");
  for (uint32_t box : a.boxDim)
    if (box == 0 || box > 256)
      throw std::invalid_argument("tensor map: box dims must be in [1, 256]");
}

TensorMapBytes encodeTensorMap(const TensorMapArguments &a) {
  checkTensorMapArguments(a);
  const DriverApi &api = driver();
  if (api.cuTensorMapEncodeTiled == nullptr)
    throw CudaError("cuTensorMapEncodeTiled", -1,
                    "this CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12 or newer)");
  alignas(64) TensorMapBytes bytes{};
  CUresult result = api.cuTensorMapEncodeTiled(
      bytes.data(), a.dataType, static_cast<unsigned>(a.globalDim.size()),
      reinterpret_cast<void *>(a.globalAddress),
      reinterpret_cast<const unsigned long long *>(a.globalDim.data()),
      reinterpret_cast<const unsigned long long *>(a.globalStrides.data()), a.boxDim.data(),
      a.elementStrides.data(), a.interleave, a.swizzle, a.l2Promotion, a.oobFill);
  if (result != kCudaSuccess)
    throwCudaError(result, "cuTensorMapEncodeTiled", "");
  return bytes;
}

} // namespace tessera::runtime
