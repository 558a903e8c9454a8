// Python bindings of the CUDA runtime (tessera._tessera.runtime): driver status, devices, module
// loading, the kernel launcher and tensor_info. Wrapped by python/tessera/runtime/driver.py.
#include "bindings.h"
#include "launch_dispatcher.h"

#include "python_tensor_info.h"
#include "runtime/launch.h"
#include "runtime/tensor_map.h"

#include <pybind11/stl.h>

namespace py = pybind11;
using namespace tessera::runtime;

namespace tessera::bindings {
namespace {

// Exception classes, created once in bindRuntime and never freed.
PyObject *cudaErrorType = nullptr;
PyObject *argumentErrorType = nullptr;

void raiseWithAttributes(PyObject *type, const std::string &message, const py::dict &attributes) {
  py::object error = py::reinterpret_borrow<py::object>(type)(message);
  for (auto item : attributes)
    py::setattr(error, item.first, item.second);
  PyErr_SetObject(type, error.ptr());
}

} // namespace

void setCudaError(const CudaError &error) {
  raiseWithAttributes(cudaErrorType, error.what(),
                      py::dict(py::arg("call") = error.call(), py::arg("code") = error.code()));
}

namespace {

void registerExceptions(py::module_ &m) {
  cudaErrorType = PyErr_NewExceptionWithDoc(
      "tessera._tessera.runtime.CudaError",
      "A CUDA driver call failed, or no driver is available. Attributes: call (the driver "
      "function), code (CUresult, -1 when there is no driver).",
      PyExc_RuntimeError, nullptr);
  py::object bases = py::make_tuple(py::handle(PyExc_TypeError), py::handle(PyExc_ValueError));
  argumentErrorType = PyErr_NewExceptionWithDoc(
      "tessera._tessera.runtime.ArgumentError",
      "A kernel argument cannot be passed (wrong type, out of range, CPU memory). Attributes: "
      "index (0-based position in the kernel's signature), reason (the message without it).",
      bases.ptr(), nullptr);
  m.add_object("CudaError", py::handle(cudaErrorType));
  m.add_object("ArgumentError", py::handle(argumentErrorType));
  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      std::rethrow_exception(pointer);
    } catch (const CudaError &error) {
      setCudaError(error);
    } catch (const python::ArgumentError &error) {
      raiseWithAttributes(
          argumentErrorType, "argument " + std::to_string(error.index) + ": " + error.reason,
          py::dict(py::arg("index") = error.index, py::arg("reason") = error.reason));
    }
  });
}

unsigned gridDimension(PyObject *value, int axis) {
  long long dimension = PyLong_Check(value) ? PyLong_AsLongLong(value) : -1;
  if (PyErr_Occurred())
    PyErr_Clear();
  if (dimension < 0 || dimension > 0xffffffffLL)
    throw py::value_error("grid dimension " + std::to_string(axis) + " must be an int >= 0, got " +
                          py::repr(value).cast<std::string>());
  return static_cast<unsigned>(dimension);
}

/// A grid is an int or a tuple/list of 1 to 3 ints; a zero dimension means "launch nothing".
LaunchGrid parseGrid(py::handle grid) {
  LaunchGrid parsed;
  if (PyLong_Check(grid.ptr())) {
    parsed.x = gridDimension(grid.ptr(), 0);
    return parsed;
  }
  py::object sequence = py::reinterpret_steal<py::object>(
      PySequence_Fast(grid.ptr(), "grid must be an int or a tuple of 1 to 3 ints"));
  if (!sequence)
    throw py::error_already_set();
  Py_ssize_t size = PySequence_Fast_GET_SIZE(sequence.ptr());
  if (size < 1 || size > 3)
    throw py::value_error("grid must have 1 to 3 dimensions, got " + std::to_string(size));
  PyObject **items = PySequence_Fast_ITEMS(sequence.ptr());
  unsigned *dimensions[] = {&parsed.x, &parsed.y, &parsed.z};
  for (Py_ssize_t axis = 0; axis < size; ++axis)
    *dimensions[axis] = gridDimension(items[axis], static_cast<int>(axis));
  return parsed;
}

std::shared_ptr<KernelLauncher> makeLauncher(const std::vector<std::string> &signature,
                                             std::shared_ptr<Function> function, int numWarps,
                                             int sharedBytes) {
  std::vector<ArgKind> kinds;
  for (const std::string &name : signature) {
    ArgKind kind;
    if (!parseArgKind(name, kind))
      throw py::value_error("unknown argument kind '" + name +
                            "' (expected ptr, i1, i8, i16, i32, i64, u32, u64, fp16, bf16, "
                            "fp32 or fp64)");
    kinds.push_back(kind);
  }
  return std::make_shared<KernelLauncher>(std::move(kinds), std::move(function), numWarps,
                                          sharedBytes);
}

// The hot path: parse the grid, pack the arguments on the stack, launch without the GIL.
void launch(const KernelLauncher &launcher, py::handle grid, uint64_t stream, py::handle args) {
  LaunchGrid parsedGrid = parseGrid(grid);
  ArgumentBuffer buffer(launcher.signature().size());
  python::packArguments(launcher.signature(), args.ptr(), stream, buffer);
  // Without the GIL: cuLaunchKernel blocks while the launch queue is full. PyEval_SaveThread
  // is cheaper than py::gil_scoped_release (measured: 0.2 us per launch).
  PyThreadState *thread = PyEval_SaveThread();
  try {
    launcher.launch(parsedGrid, reinterpret_cast<CUstream>(stream), buffer.params());
  } catch (...) {
    PyEval_RestoreThread(thread);
    throw;
  }
  PyEval_RestoreThread(thread);
}

py::bytes pack(const KernelLauncher &launcher, py::handle args, uint64_t stream) {
  ArgumentBuffer buffer(launcher.signature().size());
  python::packArguments(launcher.signature(), args.ptr(), stream, buffer);
  return py::bytes(launcher.packedBytes(buffer));
}

py::dict deviceInfoDict(int device) {
  DeviceInfo info = deviceInfo(device);
  py::dict result;
  result["name"] = info.name;
  result["compute_capability"] =
      py::make_tuple(info.computeCapabilityMajor, info.computeCapabilityMinor);
  result["multiprocessor_count"] = info.multiprocessorCount;
  result["max_threads_per_block"] = info.maxThreadsPerBlock;
  result["warp_size"] = info.warpSize;
  result["max_shared_memory_per_block"] = info.maxSharedMemoryPerBlock;
  result["max_shared_memory_per_block_optin"] = info.maxSharedMemoryPerBlockOptin;
  result["max_shared_memory_per_multiprocessor"] = info.maxSharedMemoryPerMultiprocessor;
  result["max_registers_per_multiprocessor"] = info.maxRegistersPerMultiprocessor;
  result["l2_cache_bytes"] = info.l2CacheBytes;
  result["max_registers_per_block"] = info.maxRegistersPerBlock;
  result["clock_rate_khz"] = info.clockRateKhz;
  result["memory_clock_rate_khz"] = info.memoryClockRateKhz;
  result["memory_bus_width_bits"] = info.memoryBusWidthBits;
  return result;
}

std::string extractionProtocol(py::handle obj) {
  if (PyLong_CheckExact(obj.ptr()))
    return "int";
  switch (python::strategyFor(Py_TYPE(obj.ptr())).source) {
  case python::PointerSource::Torch: return "torch";
  case python::PointerSource::CupyArray: return "cupy";
  case python::PointerSource::ExchangeApi: return "dlpack_exchange_api";
  case python::PointerSource::CudaArrayInterface: return "cuda_array_interface";
  case python::PointerSource::DLPack: return "dlpack";
  case python::PointerSource::Unsupported: break;
  }
  python::TypeStrategy instance = python::instanceStrategy(obj.ptr());
  if (instance.hasCudaArrayInterface)
    return "cuda_array_interface (instance attribute)";
  if (instance.hasDlpack)
    return "dlpack (instance attribute)";
  return "unsupported";
}

void bindObjects(py::module_ &m) {
  py::class_<Module, std::shared_ptr<Module>>(m, "Module", "A cubin loaded on one device.")
      .def("function", &Module::function, py::arg("name"),
           "The kernel `name` in this module (raises CudaError when absent).")
      .def_property_readonly("device", &Module::device);

  py::class_<Function, std::shared_ptr<Function>>(m, "Function", "One kernel of a Module.")
      .def_property_readonly("name", &Function::name)
      .def_property_readonly("device", [](const Function &f) { return f.module().device(); })
      .def_property_readonly("num_regs", [](const Function &f) { return f.attributes().numRegs; })
      .def_property_readonly("local_bytes",
                             [](const Function &f) { return f.attributes().localBytes; })
      .def_property_readonly("shared_bytes",
                             [](const Function &f) { return f.attributes().sharedBytes; })
      .def_property_readonly("max_threads_per_block",
                             [](const Function &f) { return f.attributes().maxThreadsPerBlock; })
      .def_property_readonly(
          "handle", [](const Function &f) { return reinterpret_cast<uintptr_t>(f.handle()); });

  py::class_<KernelLauncher, std::shared_ptr<KernelLauncher>>(
      m, "KernelLauncher",
      "Launches one kernel: built once from its signature, called on every launch.")
      .def(py::init(&makeLauncher), py::arg("signature"), py::arg("function").none(true),
           py::arg("num_warps"), py::arg("shared_bytes") = 0)
      .def("launch", &launch, py::arg("grid"), py::arg("stream"), py::arg("args"),
           "launch(grid, stream, args): grid is an int or 1-3 ints, stream a CUstream handle "
           "(0: legacy default stream), args one object per signature entry.")
      .def("pack", &pack, py::arg("args"), py::arg("stream") = 0,
           "The kernel parameter buffer that launch() would pass, as bytes (nothing launches).")
      .def_property_readonly("signature",
                             [](const KernelLauncher &l) {
                               std::vector<std::string> names;
                               for (ArgKind kind : l.signature())
                                 names.push_back(argKindName(kind));
                               return names;
                             })
      .def_property_readonly("function", &KernelLauncher::function)
      .def_property_readonly("num_warps", &KernelLauncher::numWarps)
      .def_property_readonly("shared_bytes", &KernelLauncher::sharedBytes);
}

} // namespace

void bindRuntime(py::module_ &m) {
  registerExceptions(m);
  bindObjects(m);
  bindDispatcher(m);
  bindPackedLaunch(m);
  m.def("driver_available", &driverAvailable,
        "(True, description) when libcuda loads and sees a device, else (False, reason).");
  m.def("driver_version", &driverVersion);
  m.def(
      "encode_tensor_map_tiled",
      [](int dataType, unsigned rank, uint64_t address, std::vector<uint64_t> globalDim,
         std::vector<uint64_t> globalStrides, std::vector<uint32_t> boxDim,
         std::vector<uint32_t> elementStrides, int interleave, int swizzle, int l2Promotion,
         int oobFill) {
        runtime::TensorMapArguments arguments{dataType,
                                              address,
                                              std::move(globalDim),
                                              std::move(globalStrides),
                                              std::move(boxDim),
                                              std::move(elementStrides),
                                              interleave,
                                              swizzle,
                                              l2Promotion,
                                              oobFill};
        if (arguments.globalDim.size() != rank)
          throw std::invalid_argument("tensor map: rank differs from the dims given");
        runtime::TensorMapBytes bytes = runtime::encodeTensorMap(arguments);
        return py::bytes(reinterpret_cast<const char *>(bytes.data()), bytes.size());
      },
      py::arg("data_type"), py::arg("rank"), py::arg("global_address"), py::arg("global_dim"),
      py::arg("global_strides"), py::arg("box_dim"), py::arg("element_strides"),
      py::arg("interleave"), py::arg("swizzle"), py::arg("l2_promotion"), py::arg("oob_fill"),
      "The 128-byte CUtensorMap (cuTensorMapEncodeTiled; arguments: runtime/tensor_map.py).");
  m.def(
      "check_tensor_map_arguments",
      [](std::vector<uint64_t> globalDim, std::vector<uint64_t> globalStrides,
         std::vector<uint32_t> boxDim, std::vector<uint32_t> elementStrides, uint64_t address) {
        runtime::TensorMapArguments arguments;
        arguments.globalAddress = address;
        arguments.globalDim = std::move(globalDim);
        arguments.globalStrides = std::move(globalStrides);
        arguments.boxDim = std::move(boxDim);
        arguments.elementStrides = std::move(elementStrides);
        runtime::checkTensorMapArguments(arguments);
      },
      "Checks encode_tensor_map_tiled's array arguments on the CPU (ValueError when wrong).");
  m.def("device_count", &deviceCount);
  m.def("device_info", &deviceInfoDict, py::arg("device"));
  m.def(
      "load_module",
      [](const std::string &image, int device) { return Module::load(image, device); },
      py::arg("image"), py::arg("device"), py::call_guard<py::gil_scoped_release>(),
      "Loads a cubin/fatbin (bytes) or PTX (str or bytes, assembled by the driver JIT).");
  m.def(
      "jit_ptx_to_cubin",
      [](const std::string &ptx, int device) {
        JitResult jit;
        {
          py::gil_scoped_release release;
          jit = jitPtxToCubin(ptx, device);
        }
        return py::make_tuple(py::bytes(jit.cubin), jit.infoLog);
      },
      py::arg("ptx"), py::arg("device"),
      "(cubin bytes, JIT log): PTX assembled by the driver, for when ptxas is absent.");
  m.def(
      "synchronize",
      [](int device) {
        ScopedDeviceContext scope(device);
        checkCuda(driver().cuCtxSynchronize(), "cuCtxSynchronize");
      },
      py::arg("device"), py::call_guard<py::gil_scoped_release>());
  m.def("tensor_info", &python::tensorInfo, py::arg("tensor"),
        "(data_ptr, device_type, device_index, dtype, shape, strides) of a framework tensor.");
  m.def("extraction_protocol", &extractionProtocol, py::arg("obj"),
        "Which protocol the launcher uses to read a pointer from objects of this type.");
}

} // namespace tessera::bindings
