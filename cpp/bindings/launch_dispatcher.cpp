// tessera._tessera.runtime.KernelDispatcher: the base class of JITFunction (python/tessera/jit.py)
// whose `kernel[grid]` is a BoundLaunch (launch.cpp), and the methods by which the Python path
// describes the kernel's parameters and registers each kernel it launched. Also
// set_interpret_sources (where the interpret knob lives) and exchange_current_stream (tests).
#include "launch_dispatcher.h"

#include <structmember.h>

#include <new>

namespace py = pybind11;

namespace tessera::bindings {
namespace {

using runtime::KernelLauncher;
using runtime::python::ArgumentValue;

PyTypeObject *gBoundLaunchType = nullptr;

DispatcherState &stateOf(PyObject *self) {
  return *reinterpret_cast<DispatcherObject *>(self)->state;
}

PyObject *dispatcherNew(PyTypeObject *type, PyObject *, PyObject *) {
  PyObject *self = type->tp_alloc(type, 0);
  if (self == nullptr)
    return nullptr;
  auto *dispatcher = reinterpret_cast<DispatcherObject *>(self);
  dispatcher->state = new (std::nothrow) DispatcherState();
  if (dispatcher->state == nullptr) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  dispatcher->state->generation = ++dispatchGlobals().generation;
  return self;
}

void dispatcherDealloc(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  auto *dispatcher = reinterpret_cast<DispatcherObject *>(self);
  delete dispatcher->state;
  dispatcher->state = nullptr;
  type->tp_free(self);
  Py_DECREF(type); // instances of heap types own a reference to their type
}

PyObject *dispatcherSubscript(PyObject *self, PyObject *grid) {
  BoundLaunchObject *bound = PyObject_New(BoundLaunchObject, gBoundLaunchType);
  if (bound == nullptr)
    return nullptr;
  bound->vectorcall = boundLaunchCall;
  bound->dispatcher = Py_NewRef(self);
  bound->grid = Py_NewRef(grid);
  return reinterpret_cast<PyObject *>(bound);
}

// _dispatch_configure(names: tuple[str], is_constexpr: tuple[bool], defaults: dict[str, Any],
//                     specialize_flags: tuple[int] = ()): specialize_flags per parameter are
// runtime::python::SpecializeFlags (do_not_specialize, do_not_specialize_on_alignment).
PyObject *dispatcherConfigure(PyObject *self, PyObject *args) {
  PyObject *names, *flags, *defaults, *specialize = nullptr;
  if (!PyArg_ParseTuple(args, "O!O!O!|O!:_dispatch_configure", &PyTuple_Type, &names, &PyTuple_Type,
                        &flags, &PyDict_Type, &defaults, &PyTuple_Type, &specialize))
    return nullptr;
  DispatcherState &state = stateOf(self);
  state.clearParameters();
  state.table.clear();
  Py_ssize_t count = PyTuple_GET_SIZE(names);
  if (PyTuple_GET_SIZE(flags) != count ||
      (specialize != nullptr && PyTuple_GET_SIZE(specialize) != 0 &&
       PyTuple_GET_SIZE(specialize) != count)) {
    PyErr_SetString(PyExc_ValueError, "_dispatch_configure: one flag per parameter");
    return nullptr;
  }
  bool hasSpecialize = specialize != nullptr && PyTuple_GET_SIZE(specialize) == count;
  if (static_cast<size_t>(count) > kMaxFastParameters)
    Py_RETURN_NONE; // left unconfigured: every call takes the Python path
  for (Py_ssize_t i = 0; i < count; ++i) {
    Parameter parameter;
    parameter.name = Py_NewRef(PyTuple_GET_ITEM(names, i));
    if (!PyUnicode_CheckExact(parameter.name)) {
      Py_DECREF(parameter.name);
      PyErr_SetString(PyExc_TypeError, "_dispatch_configure: parameter names must be str");
      return nullptr;
    }
    PyUnicode_InternInPlace(&parameter.name);
    parameter.launchOption = launchOptionSlot(parameter.name);
    int flag = PyObject_IsTrue(PyTuple_GET_ITEM(flags, i));
    parameter.isConstexpr = flag > 0;
    parameter.defaultValue = Py_XNewRef(PyDict_GetItemWithError(defaults, parameter.name));
    if (hasSpecialize)
      parameter.specializeFlags =
          static_cast<uint8_t>(PyLong_AsLong(PyTuple_GET_ITEM(specialize, i)) & 3);
    state.parameters.push_back(parameter);
    if (flag < 0 || PyErr_Occurred())
      return nullptr;
    (parameter.isConstexpr ? state.constexprIndices : state.runtimeIndices).push_back(i);
    if (!parameter.isConstexpr)
      state.runtimeFlags.push_back(parameter.specializeFlags);
  }
  state.configured = true;
  Py_RETURN_NONE;
}

// _dispatch_interpret(interpret: Optional[bool])
PyObject *dispatcherInterpret(PyObject *self, PyObject *value) {
  int truth = value == Py_None ? 0 : PyObject_IsTrue(value);
  if (truth < 0)
    return nullptr;
  stateOf(self).interpret = value == Py_None ? InterpretMode::FromKnob
                            : truth          ? InterpretMode::Always
                                             : InterpretMode::Never;
  Py_RETURN_NONE;
}

/// How the fast path finds a Launchable's stream: the DLPack exchange table of its `stream_type`
/// (torch.Tensor: torch's current stream in one C call), else its `current_stream()`.
bool streamSource(PyObject *launchable, LaunchTarget &target) {
  PyObject *type = PyObject_GetAttr(launchable, launchStrings().streamType);
  PyErr_Clear();
  if (type != nullptr && PyType_Check(type)) {
    const auto &strategy = runtime::python::strategyFor(reinterpret_cast<PyTypeObject *>(type));
    if (strategy.exchange != nullptr && strategy.exchange->current_work_stream != nullptr)
      target.streamApi = strategy.exchange;
  }
  Py_XDECREF(type);
  if (target.streamApi != nullptr)
    return true;
  target.streamFunction = PyObject_GetAttr(launchable, launchStrings().currentStream);
  if (target.streamFunction == nullptr || !PyCallable_Check(target.streamFunction)) {
    PyErr_Clear();
    Py_CLEAR(target.streamFunction);
    return false;
  }
  return true;
}

/// The loaded kernel of a Launchable, if the fast path can launch it.
bool makeTarget(PyObject *launchable, const ArgumentValue *values, size_t count,
                LaunchTarget &target) {
  target.launcherObject = PyObject_GetAttr(launchable, launchStrings().launcher);
  PyObject *device = PyObject_GetAttr(launchable, launchStrings().device);
  if (target.launcherObject != nullptr && device != nullptr && PyLong_Check(device)) {
    target.device = static_cast<int>(PyLong_AsLong(device));
    try {
      target.launcher = py::handle(target.launcherObject).cast<KernelLauncher *>();
    } catch (const py::cast_error &) { // e.g. a test's stand-in launcher
      target.launcher = nullptr;
    }
  }
  Py_XDECREF(device);
  PyErr_Clear();
  bool usable = false;
  if (target.launcher != nullptr) {
    runtime::ArgumentBuffer buffer(count);
    usable = packValues(*target.launcher, values, count, buffer);
  }
  if (usable && streamSource(launchable, target)) {
    target.launchable = Py_NewRef(launchable);
    return true;
  }
  target.release();
  return false;
}

// _dispatch_register(values, constexprs, num_warps, num_stages, launchable, options=()) -> bool:
// after the Python path launched `launchable` for these bound arguments, later calls with the
// same specialization launch it from C++. False when the fast path cannot take these arguments.
// `options`: the other launch options as the call gave them (num_ctas, maxnreg,
// enable_fp_fusion, debug; None where absent), or () for none given.
PyObject *dispatcherRegister(PyObject *self, PyObject *args) {
  PyObject *values, *constexprs, *numWarps, *numStages, *launchable, *given = nullptr;
  if (!PyArg_ParseTuple(args, "OOOOO|O!:_dispatch_register", &values, &constexprs, &numWarps,
                        &numStages, &launchable, &PyTuple_Type, &given))
    return nullptr;
  PyObject *options[kLaunchOptionCount] = {};
  if (given != nullptr && PyTuple_GET_SIZE(given) != 0) {
    if (static_cast<size_t>(PyTuple_GET_SIZE(given)) != kLaunchOptionCount)
      Py_RETURN_FALSE;
    for (size_t i = 0; i < kLaunchOptionCount; ++i)
      options[i] = PyTuple_GET_ITEM(given, i);
  }
  DispatcherState &state = stateOf(self);
  if (!state.configured || !PyTuple_Check(values) || !PyTuple_Check(constexprs))
    Py_RETURN_FALSE;
  size_t runtimeCount = state.runtimeIndices.size();
  size_t constexprCount = state.constexprIndices.size();
  if (static_cast<size_t>(PyTuple_GET_SIZE(values)) != runtimeCount ||
      static_cast<size_t>(PyTuple_GET_SIZE(constexprs)) != constexprCount)
    Py_RETURN_FALSE;
  LaunchKey key;
  ArgumentValue argumentValues[kMaxFastParameters];
  size_t valueCount = 0;
  if (!state.table.makeKey(&PyTuple_GET_ITEM(values, 0), runtimeCount,
                           &PyTuple_GET_ITEM(constexprs, 0), constexprCount, numWarps, numStages,
                           key, argumentValues, valueCount, state.runtimeFlags.data(), options))
    Py_RETURN_FALSE;
  uint64_t epoch = currentKnobEpoch();
  if (state.knobEpoch != epoch) { // the kernels there were compiled under other code knobs
    state.table.clear();
    state.knobEpoch = epoch;
  }
  const LaunchEntry *known = state.table.find(key);
  if (known != nullptr && known->target.launchable == launchable)
    Py_RETURN_TRUE; // callers that always take the Python path (the autotuner) come here often
  LaunchTarget target;
  if (!makeTarget(launchable, argumentValues, valueCount, target))
    Py_RETURN_FALSE;
  state.table.insert(key, target);
  Py_RETURN_TRUE;
}

PyObject *dispatcherClear(PyObject *self, PyObject *) {
  stateOf(self).table.clear();
  Py_RETURN_NONE;
}

PyObject *dispatcherValidate(PyObject *self, PyObject *) {
  stateOf(self).generation = dispatchGlobals().generation;
  Py_RETURN_NONE;
}

// _dispatch_watch(triples: tuple[(namespace, str, object)]): replaces the watched names; a
// namespace is a dict, a closure cell or a mapping (DispatcherState::globalsUnchanged).
PyObject *dispatcherWatch(PyObject *self, PyObject *triples) {
  if (!PyTuple_Check(triples)) {
    PyErr_SetString(PyExc_TypeError, "_dispatch_watch takes a tuple of (namespace, name, value)");
    return nullptr;
  }
  std::vector<PyObject *> watched;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(triples); ++i) {
    PyObject *triple = PyTuple_GET_ITEM(triples, i);
    if (!PyTuple_Check(triple) || PyTuple_GET_SIZE(triple) != 3 ||
        !(PyDict_Check(PyTuple_GET_ITEM(triple, 0)) || PyCell_Check(PyTuple_GET_ITEM(triple, 0)) ||
          PyMapping_Check(PyTuple_GET_ITEM(triple, 0)))) {
      for (PyObject *object : watched)
        Py_DECREF(object);
      PyErr_SetString(PyExc_TypeError, "_dispatch_watch takes a tuple of (namespace, name, value)");
      return nullptr;
    }
    for (Py_ssize_t j = 0; j < 3; ++j)
      watched.push_back(Py_NewRef(PyTuple_GET_ITEM(triple, j)));
  }
  DispatcherState &state = stateOf(self);
  state.clearWatched();
  state.watched = std::move(watched);
  Py_RETURN_NONE;
}

PyObject *dispatcherEntries(PyObject *self, PyObject *) {
  return PyLong_FromSize_t(stateOf(self).table.size());
}

PyObject *dispatcherRecorded(PyObject *self, PyObject *) {
  const LaunchRecord &record = stateOf(self).recorded;
  if (record.count == 0)
    Py_RETURN_NONE;
  size_t count = record.launcher->signature().size();
  runtime::ArgumentBuffer buffer(count);
  for (size_t i = 0; i < count; ++i) {
    buffer.slot(i) = record.slots[i];
    if (record.launcher->signature()[i] == runtime::ArgKind::TensorMap) // the bytes it points at
      buffer.params()[i] = reinterpret_cast<void *>(buffer.slot(i));
  }
  std::string packed = record.launcher->packedBytes(buffer);
  PyObject *bytes = PyBytes_FromStringAndSize(packed.data(), packed.size());
  return bytes ? Py_BuildValue("((III)KNOK)", record.grid.x, record.grid.y, record.grid.z,
                               static_cast<unsigned long long>(record.stream), bytes,
                               record.launchable, static_cast<unsigned long long>(record.count))
               : nullptr;
}

PyMethodDef dispatcherMethods[] = {
    {"_dispatch_configure", dispatcherConfigure, METH_VARARGS,
     "_dispatch_configure(names, is_constexpr, defaults, specialize_flags=()): the kernel's "
     "parameters, in order."},
    {"_dispatch_interpret", dispatcherInterpret, METH_O,
     "_dispatch_interpret(interpret): True/False fixes the mode, None follows the knob."},
    {"_dispatch_register", dispatcherRegister, METH_VARARGS,
     "_dispatch_register(values, constexprs, num_warps, num_stages, launchable, options=()) "
     "-> bool"},
    {"_dispatch_clear", dispatcherClear, METH_NOARGS, "Forgets every registered kernel."},
    {"_dispatch_validate", dispatcherValidate, METH_NOARGS,
     "Marks the kernel's sources as checked since the last @jit function was defined."},
    {"_dispatch_watch", dispatcherWatch, METH_O,
     "_dispatch_watch(((namespace, name, value), ...)): launches take the Python path once a "
     "namespace (a dict, a closure cell or a class's mapping) no longer holds the value."},
    {"_dispatch_entries", dispatcherEntries, METH_NOARGS, "Number of registered kernels."},
    {"_dispatch_recorded", dispatcherRecorded, METH_NOARGS,
     "((x, y, z), stream, parameter bytes, launchable, count) of the last launch of a "
     "launcher without a kernel, which the fast path records instead of launching (count: "
     "launches recorded so far); None before one."},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot dispatcherSlots[] = {
    {Py_tp_new, reinterpret_cast<void *>(dispatcherNew)},
    {Py_tp_dealloc, reinterpret_cast<void *>(dispatcherDealloc)},
    {Py_tp_methods, dispatcherMethods},
    {Py_mp_subscript, reinterpret_cast<void *>(dispatcherSubscript)},
    {Py_tp_doc, const_cast<char *>("Base class of JITFunction: kernel[grid](*args) launches "
                                   "from C++ once the Python path registered the kernel.")},
    {0, nullptr}};

PyType_Spec dispatcherSpec = {"tessera._tessera.runtime.KernelDispatcher", sizeof(DispatcherObject),
                              0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, dispatcherSlots};

PyMemberDef boundLaunchMembers[] = {
    {const_cast<char *>("__vectorcalloffset__"), T_PYSSIZET,
     static_cast<Py_ssize_t>(offsetof(BoundLaunchObject, vectorcall)), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot boundLaunchSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void *>(boundLaunchDealloc)},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_members, boundLaunchMembers},
    {Py_tp_doc, const_cast<char *>("kernel[grid]: call it with the kernel's arguments.")},
    {0, nullptr}};

PyType_Spec boundLaunchSpec = {"tessera._tessera.runtime.BoundLaunch", sizeof(BoundLaunchObject), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL |
                                   Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
                               boundLaunchSlots};

#if PY_VERSION_HEX >= 0x030C0000
/// The dict watcher on the knob override dict and the environment (any change: look again).
int knobSourceChanged(PyDict_WatchEvent, PyObject *, PyObject *, PyObject *) {
  dispatchGlobals().knobSourcesChanged = true;
  return 0;
}
#endif

void setInterpretSources(py::object overrides, py::object rawEnviron, py::bytes variable,
                         py::tuple codeKnobs) {
  DispatchGlobals &globals = dispatchGlobals();
  auto keep = [](PyObject *&slot, const py::object &value) {
#if PY_VERSION_HEX >= 0x030C0000
    static int watcher = PyDict_AddWatcher(knobSourceChanged);
    if (watcher < 0)
      throw py::error_already_set();
    if (slot != nullptr && PyDict_Unwatch(watcher, slot) < 0)
      throw py::error_already_set();
    if (PyDict_Check(value.ptr()) && PyDict_Watch(watcher, value.ptr()) < 0)
      throw py::error_already_set();
#endif
    Py_XDECREF(slot);
    slot = PyDict_Check(value.ptr()) ? Py_NewRef(value.ptr()) : nullptr;
  };
  std::vector<std::pair<PyObject *, PyObject *>> knobs;
  for (py::handle pair : codeKnobs) {
    auto names = py::reinterpret_borrow<py::tuple>(pair);
    if (names.size() != 2 || !PyUnicode_Check(names[0].ptr()) || !PyBytes_Check(names[1].ptr()))
      throw py::type_error("code_knobs: a tuple of (knob name: str, variable: bytes)");
    knobs.emplace_back(names[0].ptr(), names[1].ptr());
  }
  keep(globals.knobOverrides, overrides);
  keep(globals.rawEnviron, rawEnviron);
  Py_XDECREF(globals.interpretVariable);
  globals.interpretVariable = Py_NewRef(variable.ptr());
  for (auto &[name, variable] : globals.codeKnobs) {
    Py_DECREF(name);
    Py_DECREF(variable);
  }
  for (PyObject *value : globals.codeKnobValues)
    Py_XDECREF(value);
  globals.codeKnobs.clear();
  for (auto [name, variable] : knobs)
    globals.codeKnobs.emplace_back(Py_NewRef(name), Py_NewRef(variable));
  globals.codeKnobValues.assign(globals.codeKnobs.size(), nullptr);
  globals.knobSourcesChanged = true;
  ++globals.knobEpoch; // every table was filled under sources no longer read
}

/// The current stream that `tensor_type`'s framework reports through its DLPack exchange table.
uint64_t exchangeCurrentStream(py::handle tensorType, int device) {
  if (!PyType_Check(tensorType.ptr()))
    throw py::type_error("exchange_current_stream needs a type, e.g. torch.Tensor");
  const auto &strategy =
      runtime::python::strategyFor(reinterpret_cast<PyTypeObject *>(tensorType.ptr()));
  if (strategy.exchange == nullptr || strategy.exchange->current_work_stream == nullptr)
    throw py::type_error("this type has no DLPack exchange table with current_work_stream");
  void *stream = nullptr;
  if (strategy.exchange->current_work_stream(runtime::dlpack::kDLCUDA, device, &stream) != 0)
    throw py::error_already_set();
  return reinterpret_cast<uint64_t>(stream);
}

} // namespace

void bindDispatcher(py::module_ &m) {
  PyObject *bound = PyType_FromSpec(&boundLaunchSpec);
  if (bound == nullptr)
    throw py::error_already_set();
  gBoundLaunchType = reinterpret_cast<PyTypeObject *>(bound); // kept for the process
  m.add_object("BoundLaunch", py::handle(bound));
  PyObject *dispatcher = PyType_FromSpec(&dispatcherSpec);
  if (dispatcher == nullptr)
    throw py::error_already_set();
  m.add_object("KernelDispatcher", py::reinterpret_steal<py::object>(dispatcher));
  m.def("set_interpret_sources", &setInterpretSources, py::arg("overrides"), py::arg("raw_environ"),
        py::arg("variable"), py::arg("code_knobs") = py::tuple(),
        "Where the fast launch path reads the interpret knob: tessera.config's override dict, "
        "os.environ's raw bytes dict and the variable name as bytes (None: ask Python); "
        "code_knobs: (name, variable bytes) of each knob that changes the generated code, "
        "whose change sends launches through the Python path.");
  m.def("exchange_current_stream", &exchangeCurrentStream, py::arg("tensor_type"),
        py::arg("device"),
        "The stream the fast launch path launches on for tensors of this type (tests).");
  m.def(
      "specialization_words",
      [](py::sequence args, py::sequence flags) {
        // The key word the fast path computes for each runtime argument (python_specialize.h),
        // after @jit(do_not_specialize...)'s mask; None where it leaves the call to Python.
        // A TensorDescriptor's two words come as a tuple (unmasked, as the fast path keys it).
        py::list words;
        for (size_t i = 0; i < py::len(args); ++i) {
          uint64_t word[2] = {};
          size_t wordCount = 0, valueCount = 0;
          runtime::python::ArgumentValue values[kMaxFastParameters];
          if (!runtime::python::specializeExpanded(args[i].ptr(), word, wordCount, values,
                                                   kMaxFastParameters, valueCount))
            words.append(py::none());
          else if (wordCount == 2)
            words.append(py::make_tuple(py::int_(word[0]), py::int_(word[1])));
          else
            words.append(py::int_(runtime::python::maskedWord(word[0], flags[i].cast<uint8_t>())));
        }
        return words;
      },
      py::arg("args"), py::arg("flags"),
      "The fast launch path's specialization word of each argument (None: it takes the "
      "Python path), for the tests that pin it to tessera/specialization.py.");
  m.def(
      "set_descriptor_support",
      [](py::handle type, py::handle mapAddress) {
        if (!PyType_Check(type.ptr()) || !PyCallable_Check(mapAddress.ptr()))
          throw py::type_error("set_descriptor_support(TensorDescriptor, map_address)");
        auto &support = runtime::python::descriptorSupport();
        Py_XSETREF(support.type, reinterpret_cast<PyTypeObject *>(Py_NewRef(type.ptr())));
        Py_XSETREF(support.mapAddress, Py_NewRef(mapAddress.ptr()));
      },
      py::arg("descriptor_type"), py::arg("map_address"),
      "The host TensorDescriptor class the fast launch path expands (base, shape, strides) and "
      "map_address(desc): the host address of its encoded CUtensorMap, for kernels that take "
      "one (runtime/descriptor_arguments.py registers them).");
  m.def(
      "fast_tensor_read",
      [](py::handle obj) -> std::string {
        const runtime::python::TypeStrategy &strategy =
            runtime::python::strategyFor(Py_TYPE(obj.ptr()));
        if (strategy.exchange == nullptr)
          return "other";
        if (strategy.torchTensorOffset > 0)
          return "in place";
        return strategy.torchTensorOffset < 0 &&
                       strategy.source == runtime::python::PointerSource::Torch
                   ? "not read yet"
                   : "exchange";
      },
      py::arg("obj"),
      "How the fast launch path reads tensors of obj's type: 'in place' (torch's tensor object, "
      "python_torch_tensor.h), 'exchange' (the DLPack exchange call), 'not read yet' (torch, "
      "before its first instance is), 'other' (no exchange table).");
}

} // namespace tessera::bindings
