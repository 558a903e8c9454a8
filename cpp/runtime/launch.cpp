// Argument kinds, scalar conversions and the cuLaunchKernel call behind every Tessera launch.
#include "runtime/launch.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace tessera::runtime {
namespace {

struct KindName {
  ArgKind kind;
  const char *name;
  size_t bytes;
};

constexpr KindName kKindNames[] = {
    {ArgKind::Pointer, "ptr", 8},
    {ArgKind::I1, "i1", 1},
    {ArgKind::I8, "i8", 1},
    {ArgKind::I16, "i16", 2},
    {ArgKind::I32, "i32", 4},
    {ArgKind::I64, "i64", 8},
    {ArgKind::U32, "u32", 4},
    {ArgKind::U64, "u64", 8},
    {ArgKind::F16, "fp16", 2},
    {ArgKind::BF16, "bf16", 2},
    {ArgKind::F32, "fp32", 4},
    {ArgKind::F64, "fp64", 8},
    {ArgKind::TensorMap, "tensormap", 128},
};

const KindName &kindEntry(ArgKind kind) { return kKindNames[static_cast<int>(kind)]; }

// Rounds a double to a binary float format with `exponentBits` and `mantissaBits`, to nearest
// even, with gradual underflow and overflow to infinity. Rounding straight from double (rather
// than through float) avoids double rounding.
uint16_t roundToFormat(double value, int exponentBits, int mantissaBits) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 63) << (exponentBits + mantissaBits));
  const int exponent = static_cast<int>((bits >> 52) & 0x7ff);
  const uint64_t fraction = bits & ((uint64_t(1) << 52) - 1);
  const int maxExponent = (1 << exponentBits) - 1;
  const uint16_t infinity = static_cast<uint16_t>(maxExponent << mantissaBits);
  if (exponent == 0x7ff) // inf or NaN (quiet, keeping the top fraction bits)
    return sign | infinity |
           (fraction ? static_cast<uint16_t>((1 << (mantissaBits - 1)) |
                                             (fraction >> (52 - mantissaBits)))
                     : 0);
  if (exponent == 0) // zero or a double subnormal: far below the target's range
    return sign;
  const uint64_t significand = (uint64_t(1) << 52) | fraction; // 53 bits
  int targetExponent = exponent - 1023 + (maxExponent >> 1);
  int shift = 52 - mantissaBits + (targetExponent >= 1 ? 0 : 1 - targetExponent);
  if (shift > 63)
    return sign;
  uint64_t rounded = significand >> shift;
  const uint64_t remainder = significand & ((uint64_t(1) << shift) - 1);
  const uint64_t half = uint64_t(1) << (shift - 1);
  if (remainder > half || (remainder == half && (rounded & 1)))
    ++rounded;
  if (targetExponent < 1) // subnormal; rounding up into the smallest normal encodes itself
    return sign | static_cast<uint16_t>(rounded);
  if (rounded >> (mantissaBits + 1)) { // rounding carried into a new bit
    rounded >>= 1;
    ++targetExponent;
  }
  if (targetExponent >= maxExponent)
    return sign | infinity;
  return sign | static_cast<uint16_t>(targetExponent << mantissaBits) |
         static_cast<uint16_t>(rounded & ((uint64_t(1) << mantissaBits) - 1));
}

} // namespace

bool parseArgKind(const std::string &name, ArgKind &kind) {
  for (const KindName &entry : kKindNames) {
    if (name == entry.name) {
      kind = entry.kind;
      return true;
    }
  }
  return false;
}

const char *argKindName(ArgKind kind) { return kindEntry(kind).name; }
size_t argKindBytes(ArgKind kind) { return kindEntry(kind).bytes; }

uint16_t toHalfBits(double value) { return roundToFormat(value, 5, 10); }
uint16_t toBfloat16Bits(double value) { return roundToFormat(value, 8, 7); }

void storeFloat(ArgKind kind, double value, uint64_t &slot) {
  slot = 0;
  switch (kind) {
  case ArgKind::F16: slot = toHalfBits(value); break;
  case ArgKind::BF16: slot = toBfloat16Bits(value); break;
  case ArgKind::F32: {
    float narrow = static_cast<float>(value);
    std::memcpy(&slot, &narrow, sizeof(narrow));
    break;
  }
  default: std::memcpy(&slot, &value, sizeof(value)); break;
  }
}

std::string integerRange(ArgKind kind) {
  IntegerRange range = rangeOf(kind);
  return "[" + std::to_string(range.min) + ", " + std::to_string(range.max) + "]";
}

KernelLauncher::KernelLauncher(std::vector<ArgKind> signature, std::shared_ptr<Function> function,
                               int numWarps, int sharedBytes)
    : signature_(std::move(signature)), function_(std::move(function)), numWarps_(numWarps),
      sharedBytes_(sharedBytes) {
  if (numWarps <= 0 || numWarps > 32)
    throw std::invalid_argument("num_warps must be in [1, 32], got " + std::to_string(numWarps));
  if (sharedBytes < 0)
    throw std::invalid_argument("shared_bytes must be >= 0");
  if (!function_)
    return;
  api_ = &driver();
  handle_ = function_->handle();
  context_ = function_->module().context();
  function_->reserveDynamicSharedMemory(sharedBytes);
  int maxThreads = function_->attributes().maxThreadsPerBlock;
  if (numWarps * 32 > maxThreads)
    throw std::invalid_argument("kernel '" + function_->name() + "' allows at most " +
                                std::to_string(maxThreads) + " threads per block, asked for " +
                                std::to_string(numWarps) + " warps");
}

void KernelLauncher::launch(const LaunchGrid &grid, CUstream stream, void **params) const {
  if (grid.empty())
    return;
  // CUDA's grid limits (every architecture we target), checked here so that the error names the
  // kernel and axis, in the interpreter's words, instead of the driver's bare "invalid argument".
  const unsigned limits[3] = {0x7fffffffu, 65535u, 65535u};
  const unsigned sizes[3] = {grid.x, grid.y, grid.z};
  for (int axis = 0; axis < 3; ++axis)
    if (sizes[axis] > limits[axis])
      throw std::invalid_argument(
          "kernel '" + (function_ ? function_->name() : std::string("?")) + "': grid axis " +
          std::to_string(axis) + " has " + std::to_string(sizes[axis]) +
          " programs; a GPU launches at most " + std::to_string(limits[axis]) + " along it");
  if (handle_ == nullptr)
    throw CudaError("cuLaunchKernel", -1,
                    "this KernelLauncher has no loaded kernel (it was built with function=None)");
  // One cheap driver call per launch: the kernel belongs to one context, and the caller's thread
  // may have another (or none) current.
  CUcontext current = nullptr;
  checkCuda(api_->cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != context_)
    checkCuda(api_->cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  CUresult result =
      api_->cuLaunchKernel(handle_, grid.x, grid.y, grid.z, static_cast<unsigned>(numWarps_) * 32,
                           1, 1, static_cast<unsigned>(sharedBytes_), stream, params, nullptr);
  if (current != context_ && current != nullptr)
    api_->cuCtxSetCurrent(current);
  if (result != kCudaSuccess)
    throwCudaError(result, "cuLaunchKernel",
                   function_ ? " (kernel '" + function_->name() + "')" : std::string());
}

std::string KernelLauncher::packedBytes(ArgumentBuffer &arguments) const {
  std::string bytes;
  for (size_t i = 0; i < signature_.size(); ++i) {
    size_t size = argKindBytes(signature_[i]);
    size_t align = std::min<size_t>(size, 64); // a tensor map: .align 64
    bytes.resize((bytes.size() + align - 1) / align * align, '\0');
    bytes.append(static_cast<const char *>(arguments.params()[i]), size);
  }
  return bytes;
}

} // namespace tessera::runtime
