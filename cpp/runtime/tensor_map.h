// CUtensorMap encoding for the TMA path (sm_90a, opt-in TESSERA_TMA): the driver's
// cuTensorMapEncodeTiled with its arguments as python/tessera/runtime/tensor_map.py computes
// them (dims innermost first, strides in bytes). The result is 128 opaque bytes the kernel
// takes as a 64-byte-aligned __grid_constant__ parameter.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace tessera::runtime {

using TensorMapBytes = std::array<uint8_t, 128>;

struct TensorMapArguments {
  int dataType = 0;
  uint64_t globalAddress = 0;
  std::vector<uint64_t> globalDim;     // rank entries, innermost first
  std::vector<uint64_t> globalStrides; // rank - 1 entries, bytes
  std::vector<uint32_t> boxDim;        // rank entries
  std::vector<uint32_t> elementStrides;
  int interleave = 0, swizzle = 0, l2Promotion = 0, oobFill = 0;
};

/// Checks the shapes of the arrays (throws std::invalid_argument naming the one that is
/// wrong); runs on the CPU.
void checkTensorMapArguments(const TensorMapArguments &arguments);

/// Encodes the map through the driver (CudaError when it refuses or is missing the call).
TensorMapBytes encodeTensorMap(const TensorMapArguments &arguments);

} // namespace tessera::runtime
