// Torch tensors read for the fast launch path (python_specialize.h) without the reference round
// trip of torch's DLPack exchange call. Header-only: it reads Python objects, and
// libtessera_core does not link Python.
//
// torch's `dltensor_from_py_object_no_sync` is `at::toDLPackNonOwning` applied to a *copy* of
// the tensor's at::Tensor. For a tensor held only by its Python object (nearly all of them) the
// copy takes the TensorImpl's count from 1 to 2 and back, and torch's PyObject preservation then
// increfs the Python object and decrefs it under pybind11::gil_scoped_acquire (thread-state
// lookups): about 3/4 of the call (docs/perf/launch_overhead.md). Here the same
// toDLPackNonOwning reads the at::Tensor inside the Python object, by reference: the same
// DLTensor, without the copy.
//
// Nothing is assumed blindly: the function is looked up by name in the library that holds the
// exchange table (absent: the exchange call as before), and each tensor type is checked on its
// first instance: the at::Tensor's one word must be the TensorImpl address that `_cdata` reports,
// and the DLTensor read must equal the exchange call's. A type that fails keeps the exchange call.
#pragma once

#include "python_arguments.h"

#include <dlfcn.h>

namespace tessera::runtime::python {

/// at::toDLPackNonOwning(const at::Tensor &, DLTensor *), which throws c10::Error for a tensor
/// DLPack cannot describe (no storage, an unsupported dtype). An at::Tensor is one pointer
/// (its intrusive_ptr<TensorImpl>), passed by reference: a pointer to that word.
using ToDLPackNonOwning = void (*)(const void *tensor, dlpack::DLTensor *out);

/// The function, looked up from the library that holds `api` (libtorch_python, whose exchange
/// call calls it in libtorch_cpu: dlsym searches a library's dependencies too), or null.
inline ToDLPackNonOwning findToDLPackNonOwning(const dlpack::DLPackExchangeAPI *api) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(api->dltensor_from_py_object_no_sync), &info) == 0 ||
      info.dli_fname == nullptr)
    return nullptr;
  void *library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD); // already loaded by torch
  if (library == nullptr)
    return nullptr;
  void *symbol = dlsym(library, "_ZN2at17toDLPackNonOwningERKNS_6TensorEP8DLTensor");
  dlclose(library); // drops the reference dlopen took; torch keeps the library loaded
  return reinterpret_cast<ToDLPackNonOwning>(symbol);
}

inline ToDLPackNonOwning toDLPackNonOwning(const dlpack::DLPackExchangeAPI *api) {
  static ToDLPackNonOwning function = findToDLPackNonOwning(api);
  return function;
}

/// Reads the at::Tensor at `offset` in `obj` into `out`; false for a tensor the function rejects.
inline bool readTorchTensorAt(ToDLPackNonOwning read, PyObject *obj, int offset,
                              dlpack::DLTensor &out) {
  try {
    read(reinterpret_cast<const char *>(obj) + offset, &out);
    return true;
  } catch (...) { // c10::Error: the exchange call would have failed too
    return false;
  }
}

inline bool sameDLTensor(const dlpack::DLTensor &a, const dlpack::DLTensor &b) {
  if (a.data != b.data || a.byte_offset != b.byte_offset || a.ndim != b.ndim ||
      a.device.device_type != b.device.device_type || a.device.device_id != b.device.device_id ||
      a.dtype.code != b.dtype.code || a.dtype.bits != b.dtype.bits ||
      a.dtype.lanes != b.dtype.lanes || (a.strides == nullptr) != (b.strides == nullptr))
    return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[d] != b.shape[d] || (a.strides && a.strides[d] != b.strides[d]))
      return false;
  return true;
}

/// Where instances of obj's type hold their at::Tensor (0: not found, or not usable). The two
/// layouts torch has had: `at::Tensor cdata` right after the object header, and before it
/// (`c10::MaybeOwned<at::Tensor>`) a flag word then the tensor. `reference`: the exchange
/// call's DLTensor of obj, which the direct read must reproduce.
inline int torchTensorOffset(PyObject *obj, ToDLPackNonOwning read,
                             const dlpack::DLTensor &reference) {
  static PyObject *cdataName = PyUnicode_InternFromString("_cdata");
  PyObject *cdata = PyObject_GetAttr(obj, cdataName); // the TensorImpl's address, as an int
  void *impl = cdata != nullptr && PyLong_Check(cdata) ? PyLong_AsVoidPtr(cdata) : nullptr;
  Py_XDECREF(cdata);
  PyErr_Clear();
  if (impl == nullptr)
    return 0;
  const int header = static_cast<int>(sizeof(PyObject));
  for (int offset : {header, header + 8}) {
    if (offset + static_cast<int>(sizeof(void *)) > Py_TYPE(obj)->tp_basicsize)
      break;
    void *word;
    std::memcpy(&word, reinterpret_cast<const char *>(obj) + offset, sizeof(word));
    if (word != impl)
      continue;
    dlpack::DLTensor direct;
    return readTorchTensorAt(read, obj, offset, direct) && sameDLTensor(direct, reference) ? offset
                                                                                           : 0;
  }
  return 0;
}

/// obj's DLTensor, as strategy.exchange->dltensor_from_py_object_no_sync gives it; false (no
/// Python error set) where that call fails. The first instance of each torch type decides
/// whether its instances are read directly.
inline bool readExchangeTensor(PyObject *obj, const TypeStrategy &strategy, dlpack::DLTensor &out) {
  if (strategy.torchTensorOffset > 0)
    return readTorchTensorAt(toDLPackNonOwning(strategy.exchange), obj, strategy.torchTensorOffset,
                             out);
  if (strategy.exchange->dltensor_from_py_object_no_sync(obj, &out) != 0) {
    PyErr_Clear();
    return false;
  }
  if (strategy.torchTensorOffset < 0 && strategy.source == PointerSource::Torch) {
    ToDLPackNonOwning read = toDLPackNonOwning(strategy.exchange);
    strategy.torchTensorOffset = read != nullptr ? torchTensorOffset(obj, read, out) : 0;
  }
  return true;
}

} // namespace tessera::runtime::python
