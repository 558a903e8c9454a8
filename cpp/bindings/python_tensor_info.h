// tensor_info(obj): address, device, dtype, shape and strides of any framework's tensor, which
// the front end reads to specialize a kernel (dtypes, 16-byte alignment). Header-only, included
// only by cpp/bindings/runtime.cpp (libtessera_core does not link Python).
//
// Same protocols as the launch path (python_arguments.h), in the order that gives the most
// information: torch's own attributes, the DLPack exchange table, __dlpack__, then
// __cuda_array_interface__ (whose typestr cannot name bfloat16 and which has no device index).
#pragma once

#include "python_arguments.h"

#include <pybind11/stl.h>

#include <vector>

namespace tessera::runtime::python {

struct TensorInfo {
  uint64_t dataPtr = 0;
  std::string deviceType; // "cuda", "cpu", "cuda_host", "cuda_managed", or torch's name
  int deviceIndex = -1;   // -1 for host memory
  std::string dtype;      // "fp32", "bf16", "i1" (bool), "u8", "fp8e4m3", ...
  std::vector<int64_t> shape;
  std::vector<int64_t> strides; // in elements

  py::tuple toTuple() const {
    return py::make_tuple(dataPtr, deviceType, deviceIndex, dtype, py::tuple(py::cast(shape)),
                          py::tuple(py::cast(strides)));
  }
};

inline std::string dtypeFromDLPack(const dlpack::DLDataType &type) {
  if (type.lanes == 1) {
    switch (type.code) {
    case dlpack::kDLInt:
      if (type.bits == 8 || type.bits == 16 || type.bits == 32 || type.bits == 64)
        return "i" + std::to_string(type.bits);
      break;
    case dlpack::kDLUInt:
      if (type.bits == 8 || type.bits == 16 || type.bits == 32 || type.bits == 64)
        return "u" + std::to_string(type.bits);
      break;
    case dlpack::kDLFloat:
      if (type.bits == 16 || type.bits == 32 || type.bits == 64)
        return "fp" + std::to_string(type.bits);
      break;
    case dlpack::kDLBfloat:
      if (type.bits == 16)
        return "bf16";
      break;
    case dlpack::kDLBool: return "i1";
    case dlpack::kDLFloat8_e4m3fn: return "fp8e4m3";
    case dlpack::kDLFloat8_e5m2: return "fp8e5m2";
    default: break;
    }
  }
  throw py::type_error("unsupported tensor dtype (DLPack code " + std::to_string(type.code) + ", " +
                       std::to_string(type.bits) + " bits, " + std::to_string(type.lanes) +
                       " lanes)");
}

inline TensorInfo infoFromDLTensor(const dlpack::DLTensor &tensor) {
  TensorInfo info;
  info.dataPtr = reinterpret_cast<uint64_t>(tensor.data) + tensor.byte_offset;
  switch (tensor.device.device_type) {
  case dlpack::kDLCPU: info.deviceType = "cpu"; break;
  case dlpack::kDLCUDA: info.deviceType = "cuda"; break;
  case dlpack::kDLCUDAHost: info.deviceType = "cuda_host"; break;
  case dlpack::kDLCUDAManaged: info.deviceType = "cuda_managed"; break;
  default: info.deviceType = "dlpack_device_" + std::to_string(tensor.device.device_type);
  }
  info.deviceIndex = tensor.device.device_type == dlpack::kDLCUDA ? tensor.device.device_id : -1;
  info.dtype = dtypeFromDLPack(tensor.dtype);
  info.shape.assign(tensor.shape, tensor.shape + tensor.ndim);
  info.strides.resize(tensor.ndim);
  int64_t compact = 1; // DLPack before 1.0 may omit strides for a row-major tensor
  for (int d = tensor.ndim - 1; d >= 0; --d) {
    info.strides[d] = tensor.strides ? tensor.strides[d] : compact;
    compact *= tensor.shape[d];
  }
  return info;
}

/// torch dtype object -> Tessera name, cached per dtype object (torch's dtypes are singletons).
inline std::string torchDtypeName(PyObject *dtype) {
  static auto *cache = new std::unordered_map<PyObject *, std::string>();
  auto found = cache->find(dtype);
  if (found != cache->end())
    return found->second;
  static const std::unordered_map<std::string, std::string> kNames = {
      {"torch.bool", "i1"},
      {"torch.int8", "i8"},
      {"torch.int16", "i16"},
      {"torch.int32", "i32"},
      {"torch.int64", "i64"},
      {"torch.uint8", "u8"},
      {"torch.uint16", "u16"},
      {"torch.uint32", "u32"},
      {"torch.uint64", "u64"},
      {"torch.float16", "fp16"},
      {"torch.bfloat16", "bf16"},
      {"torch.float32", "fp32"},
      {"torch.float64", "fp64"},
      {"torch.float8_e4m3fn", "fp8e4m3"},
      {"torch.float8_e5m2", "fp8e5m2"}};
  std::string text = py::str(dtype).cast<std::string>();
  auto known = kNames.find(text);
  if (known == kNames.end())
    throw py::type_error("unsupported tensor dtype " + text);
  Py_INCREF(dtype);
  return cache->emplace(dtype, known->second).first->second;
}

inline TensorInfo torchTensorInfo(PyObject *obj, const TypeStrategy &strategy) {
  py::handle tensor(obj);
  TensorInfo info;
  py::object address =
      py::reinterpret_steal<py::object>(PyObject_Vectorcall(strategy.dataPtr, &obj, 1, nullptr));
  if (!address)
    throw py::error_already_set();
  info.dataPtr = address.cast<uint64_t>();
  py::object isCuda = py::reinterpret_steal<py::object>(bindDescriptor(strategy.isCuda, obj));
  if (!isCuda)
    throw py::error_already_set();
  if (isCuda.ptr() == Py_True) {
    info.deviceType = "cuda";
    info.deviceIndex = tensor.attr(names().getDevice)().cast<int>();
  } else {
    info.deviceType = tensor.attr(names().device).attr(names().type).cast<std::string>();
    info.deviceIndex = -1;
  }
  info.dtype = torchDtypeName(tensor.attr(names().dtype).ptr());
  info.shape = tensor.attr(names().shape).cast<std::vector<int64_t>>();
  info.strides = tensor.attr(names().stride)().cast<std::vector<int64_t>>();
  return info;
}

inline std::string dtypeFromTypestr(const std::string &typestr) {
  static const std::unordered_map<std::string, std::string> kNames = {
      {"|b1", "i1"},   {"|i1", "i8"},   {"<i2", "i16"}, {"<i4", "i32"}, {"<i8", "i64"},
      {"|u1", "u8"},   {"<u2", "u16"},  {"<u4", "u32"}, {"<u8", "u64"}, {"<f2", "fp16"},
      {"<f4", "fp32"}, {"<f8", "fp64"}, {"<i1", "i8"},  {"<u1", "u8"},  {"<b1", "i1"}};
  auto known = kNames.find(typestr);
  if (known == kNames.end())
    throw py::type_error("unsupported __cuda_array_interface__ typestr '" + typestr + "'");
  return known->second;
}

inline TensorInfo cudaArrayInterfaceInfo(PyObject *obj) {
  py::dict interface = py::reinterpret_borrow<py::object>(obj).attr(names().cudaArrayInterface);
  TensorInfo info;
  info.dataPtr = py::tuple(interface["data"])[0].cast<uint64_t>();
  info.deviceType = "cuda";
  info.dtype = dtypeFromTypestr(interface["typestr"].cast<std::string>());
  info.shape = interface["shape"].cast<std::vector<int64_t>>();
  int64_t itemBytes = std::stoll(interface["typestr"].cast<std::string>().substr(2));
  info.strides.resize(info.shape.size());
  py::object strides = py::none();
  if (interface.contains("strides"))
    strides = interface["strides"];
  int64_t compact = 1;
  for (int d = static_cast<int>(info.shape.size()) - 1; d >= 0; --d) {
    info.strides[d] =
        strides.is_none() ? compact : py::tuple(strides)[d].cast<int64_t>() / itemBytes;
    compact *= info.shape[d];
  }
  try {
    info.deviceIndex = info.dataPtr ? pointerDevice(info.dataPtr) : -1;
  } catch (const CudaError &) {
    info.deviceIndex = -1; // no driver: the interface itself does not say
  }
  return info;
}

inline py::tuple tensorInfo(py::handle handle) {
  PyObject *obj = handle.ptr();
  const TypeStrategy &strategy = strategyFor(Py_TYPE(obj));
  if (strategy.source == PointerSource::Torch)
    return torchTensorInfo(obj, strategy).toTuple();
  if (strategy.exchange) {
    dlpack::DLTensor tensor;
    if (strategy.exchange->dltensor_from_py_object_no_sync(obj, &tensor) != 0)
      throw py::error_already_set();
    return infoFromDLTensor(tensor).toTuple();
  }
  const TypeStrategy fallback =
      strategy.source == PointerSource::Unsupported ? instanceStrategy(obj) : strategy;
  if (fallback.hasDlpack) {
    try {
      py::object capsule = dlpackCapsule(0, obj, nullptr);
      if (const dlpack::DLTensor *tensor = tensorOfCapsule(capsule.ptr()))
        return infoFromDLTensor(*tensor).toTuple();
    } catch (const ArgumentError &error) {
      if (!fallback.hasCudaArrayInterface)
        throw py::type_error(error.reason);
    }
  }
  if (fallback.hasCudaArrayInterface)
    return cudaArrayInterfaceInfo(obj).toTuple();
  throw py::type_error("tensor_info needs a tensor (torch, CuPy, JAX, NumPy or any DLPack or "
                       "CUDA array interface object), got " +
                       typeName(obj));
}

} // namespace tessera::runtime::python
