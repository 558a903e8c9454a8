// tessera._tessera.runtime.PackedLaunch: one launch of a KernelLauncher whose parameters, grid
// and stream were packed once, repeated by each call with nothing else (no binding, no
// specialization, no stream lookup). Calling it costs the driver's cuLaunchKernel plus a
// no-argument C call: the floor that benchmarks/launch_overhead.py sets beside the fast launch
// path (launch.cpp), so that its table shows what Tessera adds above the driver.
#include "bindings.h"
#include "launch_dispatcher.h"

#include <structmember.h>

namespace py = pybind11;

namespace tessera::bindings {
namespace {

using runtime::ArgKind;
using runtime::KernelLauncher;

struct PackedLaunchObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject *launcherObject; // strong; owns `launcher`
  PyObject *arguments;      // strong: the tensors whose addresses `slots` hold stay alive
  const KernelLauncher *launcher;
  runtime::LaunchGrid grid;
  uint64_t stream;
  bool releaseGil; // as the fast path does around cuLaunchKernel
  uint64_t slots[kMaxFastParameters];
  void *params[kMaxFastParameters]; // into `slots`, or a tensor map's own bytes
};

PyTypeObject *gPackedLaunchType = nullptr;

PyObject *packedLaunchCall(PyObject *callable, PyObject *const *, size_t nargsf,
                           PyObject *kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 0 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)) {
    PyErr_SetString(PyExc_TypeError, "a PackedLaunch takes no arguments");
    return nullptr;
  }
  auto *self = reinterpret_cast<PackedLaunchObject *>(callable);
  PyThreadState *thread = self->releaseGil ? PyEval_SaveThread() : nullptr;
  try {
    self->launcher->launch(self->grid, reinterpret_cast<runtime::CUstream>(self->stream),
                           self->params);
  } catch (const runtime::CudaError &error) {
    if (thread != nullptr)
      PyEval_RestoreThread(thread);
    setCudaError(error);
    return nullptr;
  } catch (const std::exception &error) {
    if (thread != nullptr)
      PyEval_RestoreThread(thread);
    PyErr_SetString(PyExc_RuntimeError, error.what());
    return nullptr;
  }
  if (thread != nullptr)
    PyEval_RestoreThread(thread);
  Py_RETURN_NONE;
}

void packedLaunchDealloc(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  Py_XDECREF(reinterpret_cast<PackedLaunchObject *>(self)->launcherObject);
  Py_XDECREF(reinterpret_cast<PackedLaunchObject *>(self)->arguments);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMemberDef packedLaunchMembers[] = {
    {const_cast<char *>("__vectorcalloffset__"), T_PYSSIZET,
     static_cast<Py_ssize_t>(offsetof(PackedLaunchObject, vectorcall)), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot packedLaunchSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void *>(packedLaunchDealloc)},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_members, packedLaunchMembers},
    {Py_tp_doc, const_cast<char *>("PackedLaunch(): launches the packed kernel again.")},
    {0, nullptr}};

PyType_Spec packedLaunchSpec = {"tessera._tessera.runtime.PackedLaunch", sizeof(PackedLaunchObject),
                                0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL |
                                    Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                packedLaunchSlots};

/// packed_launch(launcher, grid, stream, args, release_gil): packs as KernelLauncher.launch
/// does (the same errors), launches nothing.
py::object packedLaunch(py::object launcherObject, py::object grid, uint64_t stream,
                        py::handle args, bool releaseGil) {
  const auto *launcher = launcherObject.cast<const KernelLauncher *>();
  const std::vector<ArgKind> &signature = launcher->signature();
  if (signature.size() > kMaxFastParameters)
    throw py::value_error("packed_launch takes kernels of at most " +
                          std::to_string(kMaxFastParameters) + " parameters");
  runtime::ArgumentBuffer buffer(signature.size());
  runtime::python::packArguments(signature, args.ptr(), stream, buffer);
  runtime::LaunchGrid parsed;
  py::tuple dimensions = py::isinstance<py::int_>(grid) ? py::make_tuple(grid) : py::tuple(grid);
  if (dimensions.size() < 1 || dimensions.size() > 3)
    throw py::value_error("grid must have 1 to 3 dimensions");
  unsigned *axes[] = {&parsed.x, &parsed.y, &parsed.z};
  for (size_t axis = 0; axis < dimensions.size(); ++axis)
    *axes[axis] = dimensions[axis].cast<unsigned>();
  PyObject *object = PyType_GenericAlloc(gPackedLaunchType, 0);
  if (object == nullptr)
    throw py::error_already_set();
  auto *self = reinterpret_cast<PackedLaunchObject *>(object);
  self->vectorcall = packedLaunchCall;
  self->launcherObject = launcherObject.release().ptr();
  self->arguments = Py_NewRef(args.ptr());
  self->launcher = launcher;
  self->grid = parsed;
  self->stream = stream;
  self->releaseGil = releaseGil;
  for (size_t i = 0; i < signature.size(); ++i) {
    self->slots[i] = buffer.slot(i);
    self->params[i] = signature[i] == ArgKind::TensorMap ? buffer.params()[i] : &self->slots[i];
  }
  return py::reinterpret_steal<py::object>(object);
}

} // namespace

void bindPackedLaunch(py::module_ &m) {
  PyObject *type = PyType_FromSpec(&packedLaunchSpec);
  if (type == nullptr)
    throw py::error_already_set();
  gPackedLaunchType = reinterpret_cast<PyTypeObject *>(type); // kept for the process
  m.add_object("PackedLaunch", py::handle(type));
  m.def("packed_launch", &packedLaunch, py::arg("launcher"), py::arg("grid"), py::arg("stream"),
        py::arg("args"), py::arg("release_gil") = true,
        "A PackedLaunch: calling it launches `launcher` on `grid` and `stream` with `args` "
        "packed now (as launcher.launch packs them), and does nothing else; release_gil: "
        "around cuLaunchKernel, as every Tessera launch does (benchmarks: the driver floor).");
}

} // namespace tessera::bindings
