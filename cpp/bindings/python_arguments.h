// Python objects -> kernel parameters, for the launch path bound in cpp/bindings/runtime.cpp.
// Header-only on purpose: libtessera_core does not link Python, so only the binding includes it.
//
// A pointer argument is an int (an address), None (null), a torch.Tensor, a CuPy array, or any
// object with the DLPack C exchange table, __cuda_array_interface__ (Numba, JAX) or __dlpack__
// (JAX, NumPy, ...). Which extraction works is decided once per Python type and cached, so the
// common case costs a couple of C calls per argument. Memory that the GPU cannot reach (a CPU
// tensor) is an ArgumentError naming the argument's index, never a launch.
#pragma once

#include "runtime/dlpack.h"
#include "runtime/launch.h"

#include <pybind11/pybind11.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <unordered_map>

namespace tessera::runtime::python {

namespace py = pybind11;

/// A launch argument that cannot be passed; the binding turns it into the Python exception
/// tessera._tessera.runtime.ArgumentError with attributes `index` and `reason`.
struct ArgumentError {
  size_t index;
  std::string reason;
};

enum class PointerSource : uint8_t {
  Torch,
  CupyArray,
  ExchangeApi,
  CudaArrayInterface,
  DLPack,
  Unsupported
};

/// What Tessera knows about one Python type, found on first sight and kept for the process.
struct TypeStrategy {
  PointerSource source = PointerSource::Unsupported;
  PyObject *dataPtr = nullptr; // torch: the unbound `data_ptr` of the type
  PyObject *isCuda = nullptr;  // torch: the `is_cuda` descriptor of the type
  PyObject *data = nullptr;    // CuPy: the `data` descriptor (a MemoryPointer with `.ptr`)
  const dlpack::DLPackExchangeAPI *exchange = nullptr;
  bool hasCudaArrayInterface = false;
  bool hasDlpack = false;
  // Torch with an exchange table: where instances hold their at::Tensor, found on the first
  // instance read (python_torch_tensor.h); -1: not looked yet, 0: read through the table.
  mutable int torchTensorOffset = -1;
};

// Interned attribute names, created once (the GIL is held whenever these run).
struct Names {
  PyObject *dataPtr = PyUnicode_InternFromString("data_ptr");
  PyObject *isCuda = PyUnicode_InternFromString("is_cuda");
  PyObject *getDevice = PyUnicode_InternFromString("get_device");
  PyObject *device = PyUnicode_InternFromString("device");
  PyObject *type = PyUnicode_InternFromString("type");
  PyObject *dtype = PyUnicode_InternFromString("dtype");
  PyObject *shape = PyUnicode_InternFromString("shape");
  PyObject *stride = PyUnicode_InternFromString("stride");
  PyObject *data = PyUnicode_InternFromString("data");
  PyObject *ptr = PyUnicode_InternFromString("ptr");
  PyObject *cudaArrayInterface = PyUnicode_InternFromString("__cuda_array_interface__");
  PyObject *dlpack = PyUnicode_InternFromString("__dlpack__");
  PyObject *exchangeApi = PyUnicode_InternFromString("__c_dlpack_exchange_api__");
  PyObject *exchangeCapsule = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  PyObject *streamKeyword = Py_BuildValue("(s)", "stream");
};
inline const Names &names() {
  static const Names *instance = new Names(); // leaked: lives as long as the interpreter
  return *instance;
}

/// "torch.Tensor", "numpy.ndarray", ...: for error messages only (it allocates).
inline std::string typeName(PyObject *obj) {
  py::handle type(reinterpret_cast<PyObject *>(Py_TYPE(obj)));
  if (!(Py_TYPE(obj)->tp_flags & Py_TPFLAGS_HEAPTYPE))
    return Py_TYPE(obj)->tp_name; // static types already carry their module: "numpy.ndarray"
  std::string module = py::str(type.attr("__module__"));
  std::string name = py::str(type.attr("__qualname__"));
  return module == "builtins" || module == "__main__" ? name : module + "." + name;
}

/// The pending Python exception as "Type: message", clearing it.
inline std::string takePythonError() {
  py::error_already_set error;
  return error.what();
}

/// Whether `type` or a base has one of `names` (C type names, e.g. "torch._C.TensorBase").
inline bool derivesFrom(PyTypeObject *type, std::initializer_list<const char *> names) {
  PyObject *mro = type->tp_mro;
  for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
    const char *name = reinterpret_cast<PyTypeObject *>(PyTuple_GET_ITEM(mro, i))->tp_name;
    for (const char *wanted : names)
      if (std::strcmp(name, wanted) == 0)
        return true;
  }
  return false;
}

/// The type's DLPack C exchange table: `__dlpack_c_exchange_api__`, a capsule named
/// "dlpack_exchange_api" (DLPack 1.3; PyTorch 2.10+), else the draft spelling
/// `__c_dlpack_exchange_api__` holding the same capsule or the address as an int.
inline const dlpack::DLPackExchangeAPI *exchangeApiOf(PyTypeObject *type) {
  void *address = nullptr;
  for (PyObject *name : {names().exchangeCapsule, names().exchangeApi}) {
    PyObject *value = PyObject_GetAttr(reinterpret_cast<PyObject *>(type), name);
    if (value != nullptr && PyCapsule_IsValid(value, "dlpack_exchange_api"))
      address = PyCapsule_GetPointer(value, "dlpack_exchange_api");
    else if (value != nullptr && PyLong_Check(value))
      address = PyLong_AsVoidPtr(value);
    Py_XDECREF(value); // the table itself is static in its library
    PyErr_Clear();
    if (address != nullptr)
      break;
  }
  auto *api = static_cast<const dlpack::DLPackExchangeAPI *>(address);
  if (api == nullptr || api->header.version.major != dlpack::kSupportedMajorVersion ||
      api->dltensor_from_py_object_no_sync == nullptr)
    return nullptr;
  return api;
}

inline TypeStrategy makeStrategy(PyTypeObject *type) {
  PyObject *typeObject = reinterpret_cast<PyObject *>(type);
  TypeStrategy strategy;
  strategy.hasCudaArrayInterface = PyObject_HasAttr(typeObject, names().cudaArrayInterface);
  strategy.hasDlpack = PyObject_HasAttr(typeObject, names().dlpack);
  strategy.exchange = exchangeApiOf(type);
  // The frameworks' own accessors are faster than the generic protocols (CuPy builds a new
  // __cuda_array_interface__ dict on every access).
  if (derivesFrom(type, {"torch._C.TensorBase", "torch._C._TensorBase"})) {
    strategy.dataPtr = PyObject_GetAttr(typeObject, names().dataPtr);
    strategy.isCuda = PyObject_GetAttr(typeObject, names().isCuda);
    if (strategy.dataPtr && strategy.isCuda)
      strategy.source = PointerSource::Torch;
    PyErr_Clear();
  } else if (derivesFrom(type, {"cupy._core.core._ndarray_base", "cupy._core.core.ndarray",
                                "cupy.ndarray"})) {
    strategy.data = PyObject_GetAttr(typeObject, names().data);
    if (strategy.data)
      strategy.source = PointerSource::CupyArray;
    PyErr_Clear();
  }
  if (strategy.source == PointerSource::Unsupported) {
    if (strategy.exchange)
      strategy.source = PointerSource::ExchangeApi;
    else if (strategy.hasCudaArrayInterface)
      strategy.source = PointerSource::CudaArrayInterface;
    else if (strategy.hasDlpack)
      strategy.source = PointerSource::DLPack;
  }
  return strategy;
}

/// Protocols found on an object itself rather than on its type (a plain holder object given a
/// __cuda_array_interface__ attribute): looked up on every call, which is slower but rare.
inline TypeStrategy instanceStrategy(PyObject *obj) {
  TypeStrategy strategy;
  strategy.hasCudaArrayInterface = PyObject_HasAttr(obj, names().cudaArrayInterface);
  strategy.hasDlpack = PyObject_HasAttr(obj, names().dlpack);
  return strategy;
}

inline const TypeStrategy &strategyFor(PyTypeObject *type) {
  static auto *cache = new std::unordered_map<PyTypeObject *, TypeStrategy>();
  auto found = cache->find(type);
  if (found != cache->end())
    return found->second;
  Py_INCREF(type); // a cached type must never be freed and its address reused
  return cache->emplace(type, makeStrategy(type)).first->second;
}

// Reads `type(obj).<descriptor>` bound to obj: a getset/property is read, a plain value returned.
inline PyObject *bindDescriptor(PyObject *descriptor, PyObject *obj) {
  descrgetfunc get = Py_TYPE(descriptor)->tp_descr_get;
  if (get == nullptr) {
    Py_INCREF(descriptor);
    return descriptor;
  }
  return get(descriptor, obj, reinterpret_cast<PyObject *>(Py_TYPE(obj)));
}

inline ArgumentError notOnGpu(size_t index, PyObject *obj, const std::string &where) {
  return {index, "a " + typeName(obj) + " in " + where +
                     " memory; Tessera kernels need GPU memory (move it to the GPU first, "
                     "e.g. x.cuda() or x.to('cuda'))"};
}

/// Address of a tensor described by DLPack, if the GPU can reach its memory.
inline uint64_t devicePointer(size_t index, PyObject *obj, const dlpack::DLTensor &tensor) {
  switch (tensor.device.device_type) {
  case dlpack::kDLCUDA:
  case dlpack::kDLCUDAHost:
  case dlpack::kDLCUDAManaged: return reinterpret_cast<uint64_t>(tensor.data) + tensor.byte_offset;
  case dlpack::kDLCPU: throw notOnGpu(index, obj, "CPU");
  default:
    throw notOnGpu(index, obj, "DLPack device type " + std::to_string(tensor.device.device_type));
  }
}

/// The DLTensor inside a capsule returned by __dlpack__, either capsule flavour; null if neither.
inline const dlpack::DLTensor *tensorOfCapsule(PyObject *capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor"))
    return &static_cast<dlpack::DLManagedTensor *>(PyCapsule_GetPointer(capsule, "dltensor"))
                ->dl_tensor;
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    auto *managed = static_cast<dlpack::DLManagedTensorVersioned *>(
        PyCapsule_GetPointer(capsule, "dltensor_versioned"));
    if (managed->version.major == dlpack::kSupportedMajorVersion)
      return &managed->dl_tensor;
  }
  return nullptr;
}

/// Calls obj.__dlpack__(stream=...) so the producer orders its pending work before the launch
/// stream (stream 0, the legacy default stream, is spelled 1 in the protocol); producers that
/// refuse a stream (NumPy) are asked again without one, as is everyone when `launchStream` is
/// null (metadata only). Returns the capsule.
inline py::object dlpackCapsule(size_t index, PyObject *obj, const uint64_t *launchStream) {
  PyObject *capsule = nullptr;
  PyObject *arguments[] = {obj, nullptr};
  if (launchStream != nullptr) {
    py::object streamValue = py::reinterpret_steal<py::object>(
        PyLong_FromUnsignedLongLong(*launchStream == 0 ? 1 : *launchStream));
    arguments[1] = streamValue.ptr();
    capsule = PyObject_VectorcallMethod(names().dlpack, arguments, 1, names().streamKeyword);
    if (capsule == nullptr)
      PyErr_Clear();
  }
  if (capsule == nullptr)
    capsule = PyObject_VectorcallMethod(names().dlpack, arguments, 1, nullptr);
  if (capsule == nullptr)
    throw ArgumentError{index, typeName(obj) + ".__dlpack__() failed: " + takePythonError()};
  return py::reinterpret_steal<py::object>(capsule);
}

inline uint64_t dlpackPointer(size_t index, PyObject *obj, uint64_t stream) {
  py::object capsule = dlpackCapsule(index, obj, &stream);
  const dlpack::DLTensor *tensor = tensorOfCapsule(capsule.ptr());
  if (tensor == nullptr)
    throw ArgumentError{index, typeName(obj) + ".__dlpack__() returned no DLPack 0.8/1.x tensor"};
  // Dropping the unconsumed capsule calls the producer's deleter; the memory itself stays owned
  // by `obj`, which the caller keeps alive.
  return devicePointer(index, obj, *tensor);
}

inline uint64_t torchPointer(size_t index, PyObject *obj, const TypeStrategy &strategy) {
  PyObject *isCuda = bindDescriptor(strategy.isCuda, obj);
  if (isCuda == nullptr)
    throw ArgumentError{index, takePythonError()};
  bool onGpu = isCuda == Py_True;
  Py_DECREF(isCuda);
  if (!onGpu) {
    py::object device = py::reinterpret_borrow<py::object>(obj).attr("device");
    throw notOnGpu(index, obj, "'" + py::str(device).cast<std::string>() + "'");
  }
  PyObject *address = PyObject_Vectorcall(strategy.dataPtr, &obj, 1, nullptr);
  if (address == nullptr)
    throw ArgumentError{index, takePythonError()};
  uint64_t value = PyLong_AsUnsignedLongLong(address);
  Py_DECREF(address);
  return value;
}

/// CuPy arrays always live in GPU memory; `a.data.ptr` already includes a view's offset.
inline uint64_t cupyPointer(size_t index, PyObject *obj, const TypeStrategy &strategy) {
  py::object memory = py::reinterpret_steal<py::object>(bindDescriptor(strategy.data, obj));
  PyObject *address = memory ? PyObject_GetAttr(memory.ptr(), names().ptr) : nullptr;
  if (address == nullptr)
    throw ArgumentError{index, takePythonError()};
  uint64_t value = PyLong_AsUnsignedLongLong(address);
  Py_DECREF(address);
  return value;
}

inline uint64_t cudaArrayInterfacePointer(size_t index, PyObject *obj, const TypeStrategy &strategy,
                                          uint64_t stream) {
  py::object interface =
      py::reinterpret_steal<py::object>(PyObject_GetAttr(obj, names().cudaArrayInterface));
  if (!interface) {
    // E.g. a JAX array on the CPU: let DLPack say where the memory is.
    if (strategy.hasDlpack) {
      PyErr_Clear();
      return dlpackPointer(index, obj, stream);
    }
    throw ArgumentError{index, takePythonError()};
  }
  PyObject *data = PyDict_Check(interface.ptr())
                       ? PyDict_GetItemWithError(interface.ptr(), names().data)
                       : nullptr;
  if (data == nullptr || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) < 1) {
    PyErr_Clear();
    throw ArgumentError{index, typeName(obj) + ".__cuda_array_interface__ has no 'data' tuple"};
  }
  uint64_t value = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(data, 0));
  if (PyErr_Occurred())
    throw ArgumentError{index, takePythonError()};
  return value;
}

inline uint64_t addressFromInt(size_t index, PyObject *obj) {
  uint64_t value = PyLong_AsUnsignedLongLong(obj);
  if (value == static_cast<uint64_t>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    throw ArgumentError{index, "an int used as an address must be in [0, 2**64), got " +
                                   py::repr(obj).cast<std::string>()};
  }
  return value;
}

/// The device address a "ptr" argument passes.
inline uint64_t pointerArgument(size_t index, PyObject *obj, uint64_t stream) {
  if (PyLong_CheckExact(obj))
    return addressFromInt(index, obj);
  if (obj == Py_None)
    return 0;
  const TypeStrategy &strategy = strategyFor(Py_TYPE(obj));
  switch (strategy.source) {
  case PointerSource::Torch: return torchPointer(index, obj, strategy);
  case PointerSource::CupyArray: return cupyPointer(index, obj, strategy);
  case PointerSource::ExchangeApi: {
    dlpack::DLTensor tensor;
    if (strategy.exchange->dltensor_from_py_object_no_sync(obj, &tensor) != 0)
      throw ArgumentError{index, takePythonError()};
    return devicePointer(index, obj, tensor);
  }
  case PointerSource::CudaArrayInterface:
    return cudaArrayInterfacePointer(index, obj, strategy, stream);
  case PointerSource::DLPack: return dlpackPointer(index, obj, stream);
  case PointerSource::Unsupported: break;
  }
  if (PyLong_Check(obj) && !PyBool_Check(obj))
    return addressFromInt(index, obj);
  TypeStrategy instance = instanceStrategy(obj);
  if (instance.hasCudaArrayInterface)
    return cudaArrayInterfacePointer(index, obj, instance, stream);
  if (instance.hasDlpack)
    return dlpackPointer(index, obj, stream);
  throw ArgumentError{index, "expected a GPU tensor (torch, CuPy, JAX, any DLPack or CUDA array "
                             "interface object) or an int address, got " +
                                 typeName(obj)};
}

/// Stores a scalar argument of an integer or float kind.
inline void scalarArgument(size_t index, ArgKind kind, PyObject *obj, uint64_t &slot) {
  if (isFloatKind(kind)) {
    double value = PyFloat_CheckExact(obj) ? PyFloat_AS_DOUBLE(obj) : PyFloat_AsDouble(obj);
    if (value == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      throw ArgumentError{index, std::string("expected a float for ") + argKindName(kind) +
                                     ", got " + typeName(obj)};
    }
    storeFloat(kind, value, slot);
    return;
  }
  if (PyFloat_Check(obj))
    throw ArgumentError{index, std::string("expected an int for ") + argKindName(kind) +
                                   ", got float " + py::repr(obj).cast<std::string>()};
  py::object integer = py::reinterpret_steal<py::object>(PyNumber_Index(obj)); // ints, numpy ints
  if (!integer) {
    PyErr_Clear();
    throw ArgumentError{index, std::string("expected an int for ") + argKindName(kind) + ", got " +
                                   typeName(obj)};
  }
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow);
  bool stored = false;
  if (overflow == 0) {
    stored = storeSigned(kind, value, slot);
  } else if (overflow > 0) {
    unsigned long long wide = PyLong_AsUnsignedLongLong(integer.ptr());
    stored = !PyErr_Occurred() && storeUnsigned(kind, wide, slot);
    PyErr_Clear();
  }
  if (!stored)
    throw ArgumentError{index, py::repr(obj).cast<std::string>() + " does not fit " +
                                   argKindName(kind) + " " + integerRange(kind)};
}

/// Packs `args` (a tuple or list, one object per signature entry) into `buffer`.
inline void packArguments(const std::vector<ArgKind> &signature, PyObject *args, uint64_t stream,
                          ArgumentBuffer &buffer) {
  py::object sequence = py::reinterpret_steal<py::object>(
      PySequence_Fast(args, "kernel arguments must be a tuple or list"));
  if (!sequence)
    throw py::error_already_set();
  Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence.ptr());
  if (static_cast<size_t>(count) != signature.size())
    throw py::type_error("the kernel takes " + std::to_string(signature.size()) +
                         " arguments, got " + std::to_string(count));
  PyObject **items = PySequence_Fast_ITEMS(sequence.ptr());
  for (size_t i = 0; i < signature.size(); ++i) {
    if (signature[i] == ArgKind::Pointer) {
      buffer.slot(i) = pointerArgument(i, items[i], stream);
    } else if (signature[i] == ArgKind::TensorMap) { // the host address of its 128 bytes
      PyObject *obj = items[i];
      unsigned long long address =
          PyLong_Check(obj) && !PyBool_Check(obj) ? PyLong_AsUnsignedLongLong(obj) : 0;
      if (PyErr_Occurred())
        PyErr_Clear();
      if (address == 0 || address % 64)
        throw ArgumentError{i, "expected the 64-byte-aligned host address of an encoded "
                               "CUtensorMap (runtime/tensor_map.py), got " +
                                   py::repr(obj).cast<std::string>()};
      buffer.slot(i) = address;
      buffer.params()[i] = reinterpret_cast<void *>(address); // the bytes are the parameter
    } else
      scalarArgument(i, signature[i], items[i], buffer.slot(i));
  }
}

} // namespace tessera::runtime::python
