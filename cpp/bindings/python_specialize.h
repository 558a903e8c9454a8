// The specialization of a kernel call, computed in C++ for the fast launch path
// (cpp/bindings/launch.cpp): per runtime argument a 64-bit key word (kind, dtype, divisibility by
// 16, equality to 1) and the value to pass; per constexpr one or two words. Header-only: it reads
// Python objects, and libtessera_core does not link Python.
//
// The words mirror python/tessera/specialization.py and must be at least as fine as its keys: two
// calls with equal words must get equal Python keys, or the fast path would launch a kernel
// compiled for another specialization. Anything this file does not know returns false, and the
// call takes the Python path instead.
#pragma once

#include "python_arguments.h"

#include <climits>
#include <unordered_set>

namespace tessera::runtime::python {

/// What a runtime argument passes. None: nothing (as Triton, None specializes the parameter
/// as a constexpr None, so the compiled kernel has no such parameter).
enum class ValueKind : uint8_t { Int, UInt, Bool, Float, Address, None };

/// No default member values: the fast path keeps 64 of these on the stack per call, and each
/// is filled by specializeArgument before use.
struct ArgumentValue {
  ValueKind kind;
  bool onHost;   // memory the GPU cannot reach (only recording launchers take it)
  uint64_t bits; // an integer (two's complement) or an address
  double real;   // a float
};

/// The top byte of every key word says what it describes.
enum class KeyTag : uint64_t {
  Int = 1,
  Bool,
  Float,
  DLPackTensor, // payload: DLPack dtype (code, bits, lanes) and 16-byte alignment
  DtypeTensor,  // payload: address of the tensor's dtype object (kept alive) and alignment
  ConstInt,     // a constexpr int; the next word is its value
  ConstBool,
  ConstNone,
  ConstObject, // payload: index of an equal object in the dispatcher's constant table
};

inline uint64_t keyWord(KeyTag tag, uint64_t payload = 0) {
  return static_cast<uint64_t>(tag) << 56 | (payload & ((uint64_t(1) << 56) - 1));
}

/// Per parameter, what @jit(do_not_specialize=..., do_not_specialize_on_alignment=...) leaves
/// out of its key word (specialization.masked_key in Python): divisibility by 16 (and pointer
/// alignment), equality to 1.
enum SpecializeFlags : uint8_t { kNoDivisibility = 1, kNoEqualToOne = 2 };

/// The Int payload's bits (specializeInt) and the tensors' alignment bit.
constexpr uint64_t kIntDivisibleBit = uint64_t(1) << 2;
constexpr uint64_t kIntEqualToOneBit = uint64_t(1) << 3;
constexpr uint64_t kTensorAlignedBit = 1;

inline uint64_t maskedWord(uint64_t word, uint8_t flags) {
  if (flags == 0)
    return word;
  switch (static_cast<KeyTag>(word >> 56)) {
  case KeyTag::Int:
    if (flags & kNoDivisibility)
      word &= ~kIntDivisibleBit;
    if (flags & kNoEqualToOne)
      word &= ~kIntEqualToOneBit;
    break;
  case KeyTag::DLPackTensor:
  case KeyTag::DtypeTensor:
    if (flags & kNoDivisibility)
      word &= ~kTensorAlignedBit;
    break;
  default: break;
  }
  return word;
}

/// ("int", "i32" | "i64" | "u64", divisible by 16, equal to 1), as specialization.integer_code.
inline bool specializeInt(PyObject *obj, uint64_t &word, ArgumentValue &value) {
  int overflow = 0;
  long long signedValue = PyLong_AsLongLongAndOverflow(obj, &overflow);
  uint64_t code, divisible, one;
  if (overflow == 0) {
    if (signedValue == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    code = signedValue >= INT32_MIN && signedValue <= INT32_MAX ? 0 : 1;
    divisible = signedValue % 16 == 0;
    one = signedValue == 1;
    value = {ValueKind::Int, false, static_cast<uint64_t>(signedValue), 0};
  } else if (overflow > 0) {
    unsigned long long wide = PyLong_AsUnsignedLongLong(obj);
    if (PyErr_Occurred()) { // beyond 64 bits: the Python path raises OverflowError
      PyErr_Clear();
      return false;
    }
    code = 2;
    divisible = wide % 16 == 0;
    one = 0;
    value = {ValueKind::UInt, false, wide, 0};
  } else {
    return false;
  }
  word = keyWord(KeyTag::Int, code | divisible << 2 | one << 3);
  return true;
}

/// Dtype objects named by key words: kept alive for the process, so that an address in a key
/// can never be reused by another object. A handful exist (one per framework dtype).
inline PyObject *keptDtype(PyObject *dtype) {
  static auto *kept = new std::unordered_set<PyObject *>();
  if (kept->insert(dtype).second)
    Py_INCREF(dtype);
  return dtype;
}

/// The one-entry memo in front of strategyFor: launches pass the same tensor type again and again.
inline const TypeStrategy &cachedStrategy(PyTypeObject *type) {
  static PyTypeObject *lastType = nullptr;
  static const TypeStrategy *lastStrategy = nullptr;
  if (type != lastType) {
    lastStrategy = &strategyFor(type); // unordered_map nodes never move
    lastType = type;
  }
  return *lastStrategy;
}

/// A tensor through the DLPack exchange table: one C call, no Python objects.
inline bool specializeExchangeTensor(PyObject *obj, const TypeStrategy &strategy, uint64_t &word,
                                     ArgumentValue &value) {
  dlpack::DLTensor tensor;
  if (strategy.exchange->dltensor_from_py_object_no_sync(obj, &tensor) != 0) {
    PyErr_Clear();
    return false;
  }
  // A 0-d array of another framework may be a scalar to the Python path (NumPy's are).
  if (tensor.ndim == 0 && strategy.source != PointerSource::Torch)
    return false;
  switch (tensor.device.device_type) {
  case dlpack::kDLCUDA:
  case dlpack::kDLCUDAHost:
  case dlpack::kDLCUDAManaged: value.onHost = false; break;
  case dlpack::kDLCPU: value.onHost = true; break;
  default: return false;
  }
  value.kind = ValueKind::Address;
  value.bits = reinterpret_cast<uint64_t>(tensor.data) + tensor.byte_offset;
  const dlpack::DLDataType &dtype = tensor.dtype;
  word =
      keyWord(KeyTag::DLPackTensor, (value.bits % 16 == 0) | uint64_t(dtype.code) << 8 |
                                        uint64_t(dtype.bits) << 16 | uint64_t(dtype.lanes) << 24);
  return true;
}

/// A tensor of a framework without the exchange table: the launch path's own address
/// extraction (torch, CuPy, __cuda_array_interface__) and the identity of its dtype object.
/// __dlpack__-only objects are left to the Python path, which passes them the launch stream.
inline bool specializeOtherTensor(PyObject *obj, const TypeStrategy &strategy, uint64_t &word,
                                  ArgumentValue &value) {
  TypeStrategy withoutDlpack = strategy;
  withoutDlpack.hasDlpack = false;
  try {
    switch (strategy.source) {
    case PointerSource::Torch: value.bits = torchPointer(0, obj, strategy); break;
    case PointerSource::CupyArray: value.bits = cupyPointer(0, obj, strategy); break;
    case PointerSource::CudaArrayInterface:
      value.bits = cudaArrayInterfacePointer(0, obj, withoutDlpack, 0);
      break;
    default: return false;
    }
  } catch (const ArgumentError &) { // host memory, or a failing protocol: the Python path says
    PyErr_Clear();
    return false;
  }
  PyObject *dtype = PyObject_GetAttr(obj, names().dtype);
  if (dtype == nullptr) {
    PyErr_Clear();
    return false;
  }
  uint64_t address = reinterpret_cast<uint64_t>(keptDtype(dtype));
  Py_DECREF(dtype);
  value.kind = ValueKind::Address;
  value.onHost = false;
  word = keyWord(KeyTag::DtypeTensor, address | (value.bits % 16 == 0)); // objects are 8-aligned
  return true;
}

/// The key word and value of one runtime argument; false: leave this call to the Python path.
inline bool specializeArgument(PyObject *obj, uint64_t &word, ArgumentValue &value) {
  if (obj == Py_None) { // specialization.py's ("none",)
    value = {ValueKind::None, false, 0, 0};
    word = keyWord(KeyTag::ConstNone);
    return true;
  }
  if (PyLong_CheckExact(obj))
    return specializeInt(obj, word, value);
  if (PyFloat_CheckExact(obj)) {
    value = {ValueKind::Float, false, 0, PyFloat_AS_DOUBLE(obj)};
    word = keyWord(KeyTag::Float);
    return true;
  }
  if (PyBool_Check(obj)) {
    value = {ValueKind::Bool, false, obj == Py_True ? 1u : 0u, 0};
    word = keyWord(KeyTag::Bool);
    return true;
  }
  const TypeStrategy &strategy = cachedStrategy(Py_TYPE(obj));
  if (strategy.exchange != nullptr)
    return specializeExchangeTensor(obj, strategy, word, value);
  return specializeOtherTensor(obj, strategy, word, value);
}

} // namespace tessera::runtime::python
