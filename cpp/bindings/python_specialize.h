// The specialization of a kernel call, computed in C++ for the fast launch path
// (cpp/bindings/launch.cpp): per runtime argument a 64-bit key word (kind, dtype, divisibility by
// 16, equality to 1, a tensor addressing 2**31 elements or more) and the value to pass; per
// constexpr one or two words. Header-only: it reads Python objects, and libtessera_core does not
// link Python.
//
// The words mirror python/tessera/specialization.py and must be at least as fine as its keys: two
// calls with equal words must get equal Python keys, or the fast path would launch a kernel
// compiled for another specialization. Anything this file does not know returns false, and the
// call takes the Python path instead.
#pragma once

#include "python_arguments.h"
#include "python_torch_tensor.h"

#include <climits>
#include <unordered_set>

namespace tessera::runtime::python {

/// What a runtime argument passes. None: nothing (as Triton, None specializes the parameter
/// as a constexpr None, so the compiled kernel has no such parameter).
/// Descriptor: a host TensorDescriptor (`bits`: the object, borrowed for the call), after its
/// base, shape and strides: where its CUtensorMap goes when the kernel takes one.
enum class ValueKind : uint8_t { Int, UInt, Bool, Float, Address, None, Descriptor };

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
  DLPackTensor, // payload: DLPack dtype (code, bits, lanes), 16-byte alignment, large
  DtypeTensor,  // payload: address of the tensor's dtype object (kept alive), alignment, large
  ConstInt,     // a constexpr int; the next word is its value
  ConstBool,
  ConstNone,
  ConstObject, // payload: index of an equal object in the dispatcher's constant table
  Descriptor,  // after its base's tensor word; payload: rank, nan padding, div16 dims, block
};

inline uint64_t keyWord(KeyTag tag, uint64_t payload = 0) {
  return static_cast<uint64_t>(tag) << 56 | (payload & ((uint64_t(1) << 56) - 1));
}

/// Per parameter, what @jit(do_not_specialize=..., do_not_specialize_on_alignment=...) leaves
/// out of its key word (specialization.masked_key in Python): divisibility by 16 (and pointer
/// alignment), equality to 1.
enum SpecializeFlags : uint8_t { kNoDivisibility = 1, kNoEqualToOne = 2 };

/// The Int payload's bits (specializeInt) and the tensors' alignment and extent bits. The
/// extent bit is never masked: a kernel compiled for int32 offsets is wrong for such a tensor.
constexpr uint64_t kIntDivisibleBit = uint64_t(1) << 2;
constexpr uint64_t kIntEqualToOneBit = uint64_t(1) << 3;
constexpr uint64_t kTensorAlignedBit = 1;
constexpr uint64_t kTensorLargeBit = 2;

/// Elements from a tensor's first one that an int32 offset cannot reach.
constexpr uint64_t kLargeSpan = uint64_t(1) << 31;

/// Whether a tensor addresses 2**31 elements or more from its first one: its span
/// 1 + sum((size - 1) * |stride|), 0 when empty; strides in elements (null: row-major). The
/// same as specialization.spans_2_31: one pass, exact in 128 bits (an empty dim's term is
/// garbage that `empty` discards).
inline bool spansLargeTensor(int ndim, const int64_t *shape, const int64_t *strides) {
  using Wide = unsigned __int128;
  Wide span = 1, rowMajor = 1;
  bool empty = false;
  for (int d = ndim - 1; d >= 0; --d) {
    uint64_t size = static_cast<uint64_t>(shape[d]);
    uint64_t step = strides ? static_cast<uint64_t>(strides[d]) : 0;
    Wide stride = !strides ? rowMajor : strides[d] < 0 ? Wide(0 - step) : Wide(step);
    empty |= size == 0;
    span += static_cast<Wide>(size - 1) * stride; // < 2**126 each (int64 inputs)
    span = span >> 100 ? Wide(1) << 100 : span;   // so that a sum of them cannot wrap
    if (!strides) // row-major strides stop mattering past 2**62: keep them from wrapping
      rowMajor = rowMajor * size > (uint64_t(1) << 62) ? (uint64_t(1) << 62) : rowMajor * size;
  }
  return !empty && span >= kLargeSpan;
}

/// spansLargeTensor of a Python sequence of sizes and one of strides (None: row-major),
/// divided by `divisor` (1, or the element size for strides in bytes). False: not readable.
inline bool spansLargeSequences(PyObject *shape, PyObject *strides, int64_t divisor, bool &large) {
  int64_t sizes[64], steps[64];
  PyObject *shapeItems = PySequence_Fast(shape, "shape");
  if (shapeItems == nullptr) {
    PyErr_Clear();
    return false;
  }
  Py_ssize_t ndim = PySequence_Fast_GET_SIZE(shapeItems);
  PyObject *strideItems = strides == Py_None ? nullptr : PySequence_Fast(strides, "strides");
  bool ok = ndim <= 64 &&
            (strides == Py_None || (strideItems && PySequence_Fast_GET_SIZE(strideItems) == ndim));
  for (Py_ssize_t d = 0; ok && d < ndim; ++d) {
    sizes[d] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(shapeItems, d));
    if (strideItems) {
      int64_t step = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(strideItems, d));
      steps[d] = (step < 0 ? -step : step) / divisor;
    }
    ok = !PyErr_Occurred();
  }
  Py_DECREF(shapeItems);
  Py_XDECREF(strideItems);
  PyErr_Clear();
  if (ok)
    large = spansLargeTensor(static_cast<int>(ndim), sizes, strideItems ? steps : nullptr);
  return ok;
}

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
    break; // kTensorLargeBit stays
  default: break;
  }
  return word;
}

/// PyLong_AsLongLongAndOverflow of an int, inline for the ints of one machine digit (sizes,
/// strides, block sizes: nearly every int a launch passes), which CPython stores compactly.
inline long long intValue(PyObject *obj, int &overflow) {
#if PY_VERSION_HEX >= 0x030C0000
  if (PyUnstable_Long_IsCompact(reinterpret_cast<PyLongObject *>(obj))) {
    overflow = 0;
    return PyUnstable_Long_CompactValue(reinterpret_cast<PyLongObject *>(obj));
  }
#else
  Py_ssize_t size = Py_SIZE(obj); // the sign and number of 30-bit digits
  if (size >= -1 && size <= 1) {
    overflow = 0;
    return size * static_cast<long long>(reinterpret_cast<PyLongObject *>(obj)->ob_digit[0]);
  }
#endif
  return PyLong_AsLongLongAndOverflow(obj, &overflow);
}

/// ("int", "i32" | "i64" | "u64", divisible by 16, equal to 1), as specialization.integer_code.
inline bool specializeInt(PyObject *obj, uint64_t &word, ArgumentValue &value) {
  int overflow = 0;
  long long signedValue = intValue(obj, overflow);
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

/// A tensor through the DLPack exchange table (torch's read directly): one C call, no Python
/// objects.
inline bool specializeExchangeTensor(PyObject *obj, const TypeStrategy &strategy, uint64_t &word,
                                     ArgumentValue &value) {
  dlpack::DLTensor tensor;
  if (!readExchangeTensor(obj, strategy, tensor))
    return false;
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
  bool large = spansLargeTensor(tensor.ndim, tensor.shape, tensor.strides);
  word = keyWord(KeyTag::DLPackTensor, (value.bits % 16 == 0) | (large ? kTensorLargeBit : 0) |
                                           uint64_t(dtype.code) << 8 | uint64_t(dtype.bits) << 16 |
                                           uint64_t(dtype.lanes) << 24);
  return true;
}

/// spansLargeTensor of a tensor without the exchange table: torch's shape and stride(), CuPy's
/// shape and strides (bytes), or __cuda_array_interface__'s (as specialization.py reads each).
inline bool otherTensorIsLarge(PyObject *obj, const TypeStrategy &strategy, bool &large) {
  py::handle handle(obj);
  try {
    if (strategy.source == PointerSource::Torch)
      return spansLargeSequences(handle.attr(names().shape).ptr(),
                                 handle.attr(names().stride)().ptr(), 1, large);
    py::dict interface = handle.attr(names().cudaArrayInterface);
    py::object strides = py::none();
    if (interface.contains("strides"))
      strides = interface["strides"];
    int64_t itemBytes = std::stoll(interface["typestr"].cast<std::string>().substr(2));
    return itemBytes > 0 &&
           spansLargeSequences(interface["shape"].ptr(), strides.ptr(), itemBytes, large);
  } catch (const std::exception &) { // py::error_already_set, a cast or a malformed typestr
    PyErr_Clear();
    return false;
  }
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
  bool large = false;
  if (!otherTensorIsLarge(obj, strategy, large))
    return false;
  value.kind = ValueKind::Address;
  value.onHost = false;
  word = keyWord(KeyTag::DtypeTensor, address | (value.bits % 16 == 0) | // objects are 8-aligned
                                          (large ? kTensorLargeBit : 0));
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

namespace tessera::runtime::python {

/// Host TensorDescriptor arguments (python/tessera/tools/tensor_descriptor.py), known once
/// runtime/descriptor_arguments.py registers the class (set_descriptor_support); until then no
/// argument is one.
struct DescriptorSupport {
  PyTypeObject *type = nullptr;   // strong
  PyObject *mapAddress = nullptr; // strong: descriptor -> the host address of its CUtensorMap
  PyObject *base = PyUnicode_InternFromString("base");
  PyObject *shape = PyUnicode_InternFromString("shape");
  PyObject *strides = PyUnicode_InternFromString("strides");
  PyObject *blockShape = PyUnicode_InternFromString("block_shape");
  PyObject *padding = PyUnicode_InternFromString("padding");
};
inline DescriptorSupport &descriptorSupport() {
  static auto *instance = new DescriptorSupport(); // lives as long as the interpreter
  return *instance;
}

/// The values a descriptor passes at most: base, 5 sizes, 5 strides, its map.
constexpr size_t kMaxDescriptorValues = 12;

/// The ints of a descriptor's list attribute (shape, strides, block_shape): false unless a list
/// or tuple of `rank` ints of 64 bits (rank 0: any length from 1 to 5, which it sets).
inline bool descriptorInts(PyObject *desc, PyObject *name, size_t &rank, long long *out) {
  PyObject *items = PyObject_GetAttr(desc, name);
  if (items == nullptr || !(PyList_CheckExact(items) || PyTuple_CheckExact(items))) {
    Py_XDECREF(items);
    PyErr_Clear();
    return false;
  }
  size_t size = static_cast<size_t>(PySequence_Fast_GET_SIZE(items));
  bool ok = rank == 0 ? size >= 1 && size <= 5 : size == rank;
  for (size_t d = 0; ok && d < size; ++d) {
    PyObject *item = PySequence_Fast_GET_ITEM(items, d);
    int overflow = 0;
    ok = PyLong_CheckExact(item);
    if (ok)
      out[d] = intValue(item, overflow);
    ok = ok && overflow == 0 && !(out[d] == -1 && PyErr_Occurred());
  }
  Py_DECREF(items);
  PyErr_Clear();
  if (ok)
    rank = size;
  return ok;
}

/// A TensorDescriptor argument: two key words (its base's tensor word; rank, padding, the shape
/// dims divisible by 16 and the block shape) as descriptor_arguments.key, and the values that
/// descriptor_arguments.expand passes: base, shape (i32), strides (i64), then the descriptor
/// itself where the kernel takes its map. False: the Python path takes the call (a base the fast
/// path cannot read, a malformed descriptor, whose error the Python path raises).
inline bool specializeDescriptor(PyObject *desc, uint64_t *words, ArgumentValue *values,
                                 size_t capacity, size_t &valueCount) {
  const DescriptorSupport &support = descriptorSupport();
  if (capacity < kMaxDescriptorValues)
    return false;
  PyObject *base = PyObject_GetAttr(desc, support.base);
  if (base == nullptr) {
    PyErr_Clear();
    return false;
  }
  bool tensor = specializeArgument(base, words[0], values[0]) &&
                values[0].kind == ValueKind::Address; // not an int, None or another descriptor
  Py_DECREF(base);
  if (!tensor)
    return false;
  size_t rank = 0;
  long long shape[5], strides[5], block[5];
  if (!descriptorInts(desc, support.shape, rank, shape) ||
      !descriptorInts(desc, support.strides, rank, strides) ||
      !descriptorInts(desc, support.blockShape, rank, block))
    return false;
  PyObject *padding = PyObject_GetAttr(desc, support.padding);
  int nan = padding && PyUnicode_CheckExact(padding)
                ? PyUnicode_CompareWithASCIIString(padding, "nan") == 0    ? 1
                  : PyUnicode_CompareWithASCIIString(padding, "zero") == 0 ? 0
                                                                           : -1
                : -1;
  Py_XDECREF(padding);
  PyErr_Clear();
  if (nan < 0)
    return false;
  uint64_t payload = rank | uint64_t(nan) << 3;
  for (size_t d = 0; d < rank; ++d) {
    // Block dims are powers of 2 (checked on creation): 5 bits of log2 each say them exactly.
    if (block[d] <= 0 || block[d] > (1ll << 31) || (block[d] & (block[d] - 1)))
      return false;
    payload |= uint64_t(shape[d] % 16 == 0) << (4 + d);
    payload |= uint64_t(__builtin_ctzll(static_cast<uint64_t>(block[d]))) << (9 + 5 * d);
    values[1 + d] = {ValueKind::Int, false, static_cast<uint64_t>(shape[d]), 0};
    values[1 + rank + d] = {ValueKind::Int, false, static_cast<uint64_t>(strides[d]), 0};
  }
  words[1] = keyWord(KeyTag::Descriptor, payload);
  values[1 + 2 * rank] = {ValueKind::Descriptor, false, reinterpret_cast<uint64_t>(desc), 0};
  valueCount = 2 + 2 * rank;
  return true;
}

/// Whether `obj` is a TensorDescriptor (an instance of a subclass too, as the Python key).
inline bool isDescriptor(PyObject *obj) {
  PyTypeObject *type = descriptorSupport().type;
  return type != nullptr && PyObject_TypeCheck(obj, type);
}

/// A runtime argument's key words (one; two for a descriptor) and the values it passes (one;
/// a descriptor's expansion), at most `capacity`; false: leave this call to the Python path.
inline bool specializeExpanded(PyObject *obj, uint64_t *words, size_t &wordCount,
                               ArgumentValue *values, size_t capacity, size_t &valueCount) {
  if (Py_TYPE(obj) != descriptorSupport().type) {
    if (capacity >= 1 && specializeArgument(obj, words[0], values[0])) {
      wordCount = valueCount = 1;
      return true;
    }
    if (!isDescriptor(obj)) // a subclass of TensorDescriptor comes through
      return false;
  }
  wordCount = 2;
  return specializeDescriptor(obj, words, values, capacity, valueCount);
}

/// The host address of a descriptor's encoded CUtensorMap (runtime/tensor_map.py's
/// host_address, cached by content there), 64-byte aligned; false: the Python path says why.
inline bool descriptorMapAddress(PyObject *desc, uint64_t &address) {
  PyObject *function = descriptorSupport().mapAddress;
  PyObject *result = function ? PyObject_CallOneArg(function, desc) : nullptr;
  address = result && PyLong_Check(result) ? PyLong_AsUnsignedLongLong(result) : 0;
  Py_XDECREF(result);
  PyErr_Clear();
  return address != 0 && address != static_cast<uint64_t>(-1) && address % 64 == 0;
}

} // namespace tessera::runtime::python
