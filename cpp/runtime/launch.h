// Kernel launches without Python: argument kinds, scalar conversion into parameter slots, and
// KernelLauncher, built once per compiled kernel and called on every launch. The Python side
// (cpp/bindings/python_arguments.h, bound in runtime.cpp there) turns Python objects into slots.
//
// The launch path allocates nothing and never synchronizes, so launches can be captured in CUDA
// graphs: parameters live in an ArgumentBuffer on the caller's stack.
#pragma once

#include "runtime/module.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::runtime {

/// How one kernel parameter is passed. Names as in signatures: "ptr", "i1", "i8", "i16", "i32",
/// "i64", "u32", "u64", "fp16", "bf16", "fp32", "fp64".
/// TensorMap: a 128-byte CUtensorMap parameter (TMA, 64-byte aligned); its value is the host
/// address of the encoded bytes, which the launch passes in place of a slot.
enum class ArgKind : uint8_t {
  Pointer,
  I1,
  I8,
  I16,
  I32,
  I64,
  U32,
  U64,
  F16,
  BF16,
  F32,
  F64,
  TensorMap
};

/// Parses a signature name; false when `name` is none of the above.
bool parseArgKind(const std::string &name, ArgKind &kind);
const char *argKindName(ArgKind kind);
/// Size (and alignment) of the parameter in the kernel's parameter buffer.
size_t argKindBytes(ArgKind kind);
inline bool isFloatKind(ArgKind kind) {
  return kind == ArgKind::F16 || kind == ArgKind::BF16 || kind == ArgKind::F32 ||
         kind == ArgKind::F64;
}

/// IEEE binary16 and bfloat16 bits of `value`, rounded to nearest even (overflow gives inf).
uint16_t toHalfBits(double value);
uint16_t toBfloat16Bits(double value);

/// The values an integer kind holds (a pointer: any 64-bit address).
struct IntegerRange {
  int64_t min;
  uint64_t max;
};
inline IntegerRange rangeOf(ArgKind kind) {
  switch (kind) {
  case ArgKind::I1: return {0, 1};
  case ArgKind::I8: return {INT8_MIN, INT8_MAX};
  case ArgKind::I16: return {INT16_MIN, INT16_MAX};
  case ArgKind::I32: return {INT32_MIN, INT32_MAX};
  case ArgKind::I64: return {INT64_MIN, INT64_MAX};
  case ArgKind::U32: return {0, UINT32_MAX};
  case ArgKind::U64:
  case ArgKind::Pointer: return {0, UINT64_MAX};
  default: return {0, 0};
  }
}

/// Store a value of `kind` into an 8-byte slot. The integer forms return false when the value
/// does not fit the kind (e.g. 300 for "i8", -1 for "u32"); nothing is stored then. Inline:
/// every launch stores each scalar argument through them.
inline bool storeUnsigned(ArgKind kind, uint64_t value, uint64_t &slot) {
  if (value > rangeOf(kind).max)
    return false;
  slot = value; // little-endian: the low bytes of the slot are the narrow value
  return true;
}
inline bool storeSigned(ArgKind kind, int64_t value, uint64_t &slot) {
  if (value >= 0)
    return storeUnsigned(kind, static_cast<uint64_t>(value), slot);
  if (value < rangeOf(kind).min)
    return false;
  slot = static_cast<uint64_t>(value); // two's complement: the low bytes hold the narrow value
  return true;
}
void storeFloat(ArgKind kind, double value, uint64_t &slot);
/// The range of `kind` as text, for error messages: "[-128, 127]".
std::string integerRange(ArgKind kind);

/// One 8-byte slot per argument plus the pointer array cuLaunchKernel reads; on the stack for up
/// to kInlineArguments arguments (heap beyond that, which only very wide kernels reach).
class ArgumentBuffer {
public:
  static constexpr size_t kInlineArguments = 64;
  explicit ArgumentBuffer(size_t count) : slots_(inlineSlots_), params_(inlineParams_) {
    if (count > kInlineArguments) {
      heapSlots_.reset(new uint64_t[count]);
      heapParams_.reset(new void *[count]);
      slots_ = heapSlots_.get();
      params_ = heapParams_.get();
    }
    // Narrow kinds are read from the low bytes of their slot (little-endian x86-64 / aarch64).
    for (size_t i = 0; i < count; ++i)
      params_[i] = &slots_[i];
  }
  ArgumentBuffer(const ArgumentBuffer &) = delete;
  ArgumentBuffer &operator=(const ArgumentBuffer &) = delete;

  uint64_t &slot(size_t index) { return slots_[index]; }
  void **params() { return params_; }

private:
  uint64_t inlineSlots_[kInlineArguments];
  void *inlineParams_[kInlineArguments];
  std::unique_ptr<uint64_t[]> heapSlots_;
  std::unique_ptr<void *[]> heapParams_;
  uint64_t *slots_;
  void **params_;
};

struct LaunchGrid {
  unsigned x = 1, y = 1, z = 1;
  bool empty() const { return x == 0 || y == 0 || z == 0; }
};

/// A compiled kernel ready to launch: block = numWarps * 32 threads, `sharedBytes` of dynamic
/// shared memory (opted in at construction when above 48 KiB). `function` may be null for a
/// launcher that only packs arguments (tests, debugging); launching it throws.
class KernelLauncher {
public:
  KernelLauncher(std::vector<ArgKind> signature, std::shared_ptr<Function> function, int numWarps,
                 int sharedBytes);

  const std::vector<ArgKind> &signature() const { return signature_; }
  const std::shared_ptr<Function> &function() const { return function_; }
  int numWarps() const { return numWarps_; }
  int sharedBytes() const { return sharedBytes_; }

  /// Launches on `stream` (0 = the legacy default stream) in the function's context, making it
  /// current for the call when another context is. An empty grid launches nothing.
  void launch(const LaunchGrid &grid, CUstream stream, void **params) const;

  /// The kernel parameter buffer as the driver lays it out (each parameter at its natural
  /// alignment), for tests and debugging.
  std::string packedBytes(ArgumentBuffer &arguments) const;

private:
  std::vector<ArgKind> signature_;
  std::shared_ptr<Function> function_;
  int numWarps_;
  int sharedBytes_;
  const DriverApi *api_ = nullptr;
  CUfunction handle_ = nullptr;
  CUcontext context_ = nullptr;
};

} // namespace tessera::runtime
