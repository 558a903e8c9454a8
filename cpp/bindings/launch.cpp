// The fast launch path: `kernel[grid](*args, **kwargs)` bound, specialized, looked up, packed and
// launched in one C++ call, with no Python frame. JITFunction (python/tessera/jit.py) subclasses
// KernelDispatcher, whose `[grid]` gives a BoundLaunch; calling that:
//   1. binds the arguments to the kernel's parameters (positional, keyword, defaults);
//   2. computes the specialization words (launch_table.h) and looks the kernel up;
//   3. evaluates a callable grid, packs the parameters on the stack, reads the framework's current
//      stream and calls cuLaunchKernel without the GIL (nothing allocated: capturable in graphs).
// Anything else (a miss, an unusual argument, interpret mode, a redefined @jit helper, an error
// to report) calls JITFunction.run, the Python path, which raises the errors and, after a launch,
// registers the kernel here (_dispatch_register).
#include "launch_dispatcher.h"

#include <cctype>
#include <string>

namespace tessera::bindings {
namespace {

using runtime::ArgKind;
using runtime::ArgumentBuffer;
using runtime::CudaError;
using runtime::KernelLauncher;
using runtime::LaunchGrid;
using runtime::python::ArgumentValue;
using runtime::python::ValueKind;

// ------------------------------------------------------------------------------ small helpers

/// False only for the texts the interpret knob reads as off; true for "on" and for text that is
/// no boolean at all, which the Python path then rejects with a message naming the knob.
bool notFalseText(PyObject *bytes) {
  if (!PyBytes_Check(bytes))
    return true; // unexpected: let the Python path decide
  std::string text(PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
  size_t begin = text.find_first_not_of(" \t\r\n\v\f");
  size_t end = text.find_last_not_of(" \t\r\n\v\f");
  text = begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
  for (char &c : text)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return !(text.empty() || text == "0" || text == "false" || text == "no" || text == "off");
}

/// Whether kernels following the knob run in the interpreter, read from the knob's sources now;
/// `stable`: false for an override whose truth may change while the dict does not (a list).
bool interpretKnobNow(const DispatchGlobals &globals, bool &stable) {
  stable = true;
  if (globals.knobOverrides == nullptr || globals.rawEnviron == nullptr)
    return true; // unknown: the Python path finds out
  PyObject *override = PyDict_GetItemWithError(globals.knobOverrides, launchStrings().interpret);
  if (override != nullptr) { // `knobs.interpret = ...` wins over the environment
    int truth = PyObject_IsTrue(override);
    PyErr_Clear();
    stable = override == Py_None || PyBool_Check(override) || PyLong_CheckExact(override) ||
             PyFloat_CheckExact(override) || PyUnicode_CheckExact(override) ||
             PyBytes_CheckExact(override);
    return truth != 0;
  }
  PyObject *raw = PyDict_GetItemWithError(globals.rawEnviron, globals.interpretVariable);
  if (raw == nullptr) {
    bool failed = PyErr_Occurred() != nullptr;
    PyErr_Clear();
    return failed;
  }
  return notFalseText(raw);
}

/// Whether this call must run in the interpreter (or be left to Python to find out). The knob's
/// truth is the one currentKnobEpoch() last looked at: call that first.
bool interpreting(const DispatcherState &state) {
  if (state.interpret != InterpretMode::FromKnob)
    return state.interpret == InterpretMode::Always;
  const DispatchGlobals &globals = dispatchGlobals();
  bool stable;
  if (globals.interpretKnob == KnobTruth::EachLaunch)
    return interpretKnobNow(globals, stable);
  return globals.interpretKnob == KnobTruth::True;
}

bool gridDimension(PyObject *value, unsigned &dimension) {
  if (!PyLong_CheckExact(value))
    return false;
  int overflow = 0;
  long long parsed = runtime::python::intValue(value, overflow);
  if (overflow != 0 || parsed < 0 || parsed > 0xffffffffLL)
    return false;
  dimension = static_cast<unsigned>(parsed);
  return true;
}

/// An int or a tuple/list of 1 to 3 ints; anything else is left to the Python path.
bool parseGrid(PyObject *grid, LaunchGrid &parsed) {
  if (PyLong_CheckExact(grid))
    return gridDimension(grid, parsed.x);
  if (!PyTuple_CheckExact(grid) && !PyList_CheckExact(grid))
    return false;
  Py_ssize_t size = PySequence_Fast_GET_SIZE(grid);
  if (size < 1 || size > 3)
    return false;
  PyObject **items = PySequence_Fast_ITEMS(grid);
  unsigned *dimensions[] = {&parsed.x, &parsed.y, &parsed.z};
  for (Py_ssize_t axis = 0; axis < size; ++axis)
    if (!gridDimension(items[axis], *dimensions[axis]))
      return false;
  return true;
}

} // namespace

int launchOptionSlot(PyObject *name) {
  // Keyword names are almost always interned (identifiers in code), as are the option names:
  // two distinct interned strings differ, so only the rare uninterned name is compared.
  const LaunchStrings &strings = launchStrings();
  bool interned = PyUnicode_Check(name) && PyUnicode_CHECK_INTERNED(name);
  auto same = [&](PyObject *option) {
    return name == option ||
           (!interned && PyUnicode_Check(name) && PyUnicode_Compare(name, option) == 0);
  };
  if (same(strings.numWarps))
    return kNumWarpsSlot;
  if (same(strings.numStages))
    return kNumStagesSlot;
  for (size_t o = 0; o < kLaunchOptionCount; ++o)
    if (same(strings.options[o]))
      return static_cast<int>(o);
  return kNotALaunchOption;
}

bool packValue(ArgKind kind, const ArgumentValue &value, uint64_t &slot) {
  if (kind == ArgKind::TensorMap) { // the host address of its 128 bytes, 64-byte aligned
    bool address = value.kind == ValueKind::Int || value.kind == ValueKind::UInt ||
                   value.kind == ValueKind::Address;
    if (!address || value.bits == 0 || value.bits % 64)
      return false;
    slot = value.bits;
    return true;
  }
  switch (value.kind) {
  case ValueKind::Address:
    if (kind != ArgKind::Pointer)
      return false;
    slot = value.bits;
    return true;
  case ValueKind::Float:
    if (!runtime::isFloatKind(kind))
      return false;
    runtime::storeFloat(kind, value.real, slot);
    return true;
  case ValueKind::Int:
  case ValueKind::Bool:
    if (kind == ArgKind::Pointer || runtime::isFloatKind(kind))
      return false;
    return runtime::storeSigned(kind, static_cast<int64_t>(value.bits), slot);
  case ValueKind::UInt:
    return kind != ArgKind::Pointer && !runtime::isFloatKind(kind) &&
           runtime::storeUnsigned(kind, value.bits, slot);
  case ValueKind::None: return false; // never a parameter (packValues skips it)
  }
  return false;
}

bool packValues(const KernelLauncher &launcher, const ArgumentValue *values, size_t count,
                ArgumentBuffer &buffer) {
  const auto &signature = launcher.signature();
  size_t packed = 0;
  for (size_t i = 0; i < count; ++i) {
    if (values[i].kind == ValueKind::None)
      continue;
    if (values[i].kind == ValueKind::Descriptor) { // its map, where the kernel takes one
      if (packed >= signature.size() || signature[packed] != ArgKind::TensorMap)
        continue; // a kernel without maps (TESSERA_TMA off, or a descriptor the TMA skips)
      uint64_t &slot = buffer.slot(packed);
      if (!runtime::python::descriptorMapAddress(reinterpret_cast<PyObject *>(values[i].bits),
                                                 slot))
        return false;
      buffer.params()[packed++] = reinterpret_cast<void *>(slot); // the bytes are the parameter
      continue;
    }
    if (packed >= signature.size() || !packValue(signature[packed], values[i], buffer.slot(packed)))
      return false;
    if (signature[packed] == ArgKind::TensorMap) // the parameter is the bytes themselves
      buffer.params()[packed] = reinterpret_cast<void *>(buffer.slot(packed));
    ++packed;
  }
  return packed == signature.size();
}

namespace {

bool currentStream(const LaunchTarget &target, uint64_t &stream) {
  if (target.streamApi != nullptr) {
    void *handle = nullptr;
    if (target.streamApi->current_work_stream(runtime::dlpack::kDLCUDA, target.device, &handle) !=
        0) {
      PyErr_Clear();
      return false;
    }
    stream = reinterpret_cast<uint64_t>(handle);
    return true;
  }
  PyObject *value = PyObject_CallNoArgs(target.streamFunction);
  stream = value ? PyLong_AsUnsignedLongLong(value) : 0;
  Py_XDECREF(value);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

/// {name: value} of every parameter, runtime ones first (as JITFunction.run passes to a grid).
PyObject *metaDictionary(const DispatcherState &state, PyObject *const *runtimeValues,
                         PyObject *const *constexprValues) {
  PyObject *meta = PyDict_New();
  if (meta == nullptr)
    return nullptr;
  for (size_t i = 0; i < state.runtimeIndices.size(); ++i)
    if (PyDict_SetItem(meta, state.parameters[state.runtimeIndices[i]].name, runtimeValues[i]))
      return Py_DECREF(meta), nullptr;
  for (size_t i = 0; i < state.constexprIndices.size(); ++i)
    if (PyDict_SetItem(meta, state.parameters[state.constexprIndices[i]].name, constexprValues[i]))
      return Py_DECREF(meta), nullptr;
  return meta;
}

// ------------------------------------------------------------------------------ the fast path

enum class Outcome { Launched, Error, Fallback };

/// The index of the parameter named `name` (`count` when none): interned names by identity,
/// then, for a name that is not interned, by value.
size_t parameterIndex(const DispatcherState &state, PyObject *name) {
  const size_t count = state.parameters.size();
  for (size_t i = 0; i < count; ++i)
    if (state.parameters[i].name == name)
      return i;
  if (PyUnicode_Check(name) && !PyUnicode_CHECK_INTERNED(name))
    for (size_t i = 0; i < count; ++i)
      if (PyUnicode_Compare(name, state.parameters[i].name) == 0)
        return i;
  return count;
}

/// Binds the call's arguments to parameters (borrowed references in `bound`), or fails.
/// A launch option keyword that is also the name of a parameter binds both (as Triton passes
/// it to the kernel and to the launch). `options` receives the other launch options.
bool bindArguments(const DispatcherState &state, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames, PyObject **bound, PyObject *&numWarps, PyObject *&numStages,
                   PyObject **options) {
  size_t count = state.parameters.size();
  if (static_cast<size_t>(nargs) > count)
    return false;
  for (size_t i = 0; i < count; ++i)
    bound[i] = i < static_cast<size_t>(nargs) ? args[i] : nullptr;
  Py_ssize_t keywords = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < keywords; ++k) {
    PyObject *name = PyTuple_GET_ITEM(kwnames, k);
    PyObject *value = args[nargs + k];
    // Parameters first: their launch option slots were found when the kernel was configured.
    size_t index = parameterIndex(state, name);
    int option;
    if (index < count) {
      if (bound[index] != nullptr)
        return false;
      bound[index] = value;
      option = state.parameters[index].launchOption;
    } else {
      option = launchOptionSlot(name);
      if (option == kNotALaunchOption)
        return false;
    }
    if (option == kNumWarpsSlot)
      numWarps = value;
    else if (option == kNumStagesSlot)
      numStages = value;
    else if (option != kNotALaunchOption)
      options[option] = value;
  }
  for (size_t i = 0; i < count; ++i) {
    if (bound[i] == nullptr)
      bound[i] = state.parameters[i].defaultValue;
    if (bound[i] == nullptr)
      return false;
  }
  return true;
}

/// Packs and launches; `target` holds its own references (another thread may clear the table
/// while the launch runs without the GIL, and the stream function may run any Python code).
Outcome launchOrRecord(DispatcherState &state, const LaunchTarget &target, const LaunchGrid &grid,
                       const ArgumentValue *values, size_t count) {
  const KernelLauncher &launcher = *target.launcher;
  const bool recording = launcher.function() == nullptr;
  ArgumentBuffer buffer(count);
  for (size_t i = 0; i < count; ++i)
    if (values[i].onHost && !recording)
      return Outcome::Fallback; // the Python path names the argument in its error
  if (!packValues(launcher, values, count, buffer))
    return Outcome::Fallback;
  if (grid.empty())
    return Outcome::Launched;
  uint64_t stream = 0;
  if (!currentStream(target, stream))
    return Outcome::Fallback;
  if (recording) { // a launcher without a kernel: keep what would have been launched
    LaunchRecord &record = state.recorded;
    record.grid = grid;
    record.stream = stream;
    for (size_t i = 0; i < launcher.signature().size(); ++i)
      record.slots[i] = buffer.slot(i);
    if (record.launchable != target.launchable) {
      Py_XSETREF(record.launchable, Py_NewRef(target.launchable));
      Py_XSETREF(record.launcherObject, Py_NewRef(target.launcherObject));
      record.launcher = target.launcher;
    }
    ++record.count;
    return Outcome::Launched;
  }
  // cuLaunchKernel without the GIL: it blocks while the launch queue is full.
  PyThreadState *thread = PyEval_SaveThread();
  try {
    launcher.launch(grid, reinterpret_cast<runtime::CUstream>(stream), buffer.params());
  } catch (const CudaError &error) {
    PyEval_RestoreThread(thread);
    setCudaError(error);
    return Outcome::Error;
  } catch (const std::exception &error) {
    PyEval_RestoreThread(thread);
    PyErr_SetString(PyExc_RuntimeError, error.what());
    return Outcome::Error;
  }
  PyEval_RestoreThread(thread);
  return Outcome::Launched;
}

/// `evaluatedGrid` receives a callable grid's result (a new reference), so that the Python
/// path, if it takes over, does not call the grid a second time.
Outcome tryLaunch(DispatcherState &state, PyObject *grid, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames, PyObject *&evaluatedGrid) {
  if (!state.configured || state.generation != dispatchGlobals().generation ||
      state.knobEpoch != currentKnobEpoch() || interpreting(state) || !state.globalsUnchanged())
    return Outcome::Fallback;
  PyObject *bound[kMaxFastParameters];
  PyObject *numWarps = launchStrings().defaultWarps, *numStages = launchStrings().defaultStages;
  PyObject *options[kLaunchOptionCount] = {};
  if (!bindArguments(state, args, nargs, kwnames, bound, numWarps, numStages, options))
    return Outcome::Fallback;
  PyObject *runtimeValues[kMaxFastParameters], *constexprValues[kMaxFastParameters];
  const size_t runtimeCount = state.runtimeIndices.size();
  const size_t constexprCount = state.constexprIndices.size();
  for (size_t i = 0; i < runtimeCount; ++i)
    runtimeValues[i] = bound[state.runtimeIndices[i]];
  for (size_t i = 0; i < constexprCount; ++i)
    constexprValues[i] = bound[state.constexprIndices[i]];

  LaunchKey key;
  ArgumentValue values[kMaxFastParameters];
  size_t valueCount = 0;
  if (!state.table.makeKey(runtimeValues, runtimeCount, constexprValues, constexprCount, numWarps,
                           numStages, key, values, valueCount, state.runtimeFlags.data(), options))
    return Outcome::Fallback;
  LaunchGrid parsedGrid;
  if (!parseGrid(grid, parsedGrid)) {
    if (!PyCallable_Check(grid))
      return Outcome::Fallback;
    PyObject *meta = metaDictionary(state, runtimeValues, constexprValues);
    evaluatedGrid = meta ? PyObject_CallOneArg(grid, meta) : nullptr;
    Py_XDECREF(meta);
    if (evaluatedGrid == nullptr) {
      // A KeyError (the grid read a key the launch does not have): the Python path calls the
      // grid again and names the kernel, the key and the keys there are.
      if (PyErr_ExceptionMatches(PyExc_KeyError)) {
        PyErr_Clear();
        return Outcome::Fallback;
      }
      return Outcome::Error;
    }
    if (!parseGrid(evaluatedGrid, parsedGrid))
      return Outcome::Fallback;
  }
  const LaunchEntry *entry = state.table.find(key);
  if (entry == nullptr)
    return Outcome::Fallback;
  LaunchTarget target = entry->target.pin();
  Outcome outcome = launchOrRecord(state, target, parsedGrid, values, valueCount);
  target.release();
  return outcome;
}

/// JITFunction._launch_bracket(grid, args, kwargs): the Python path. The grid is passed apart
/// from the call's keywords, which are all the kernel's (a parameter named `grid` included).
PyObject *runInPython(PyObject *dispatcher, PyObject *grid, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames) {
  PyObject *positional = PyTuple_New(nargs);
  PyObject *keywords = positional ? PyDict_New() : nullptr;
  PyObject *result = nullptr;
  if (keywords != nullptr) {
    for (Py_ssize_t i = 0; i < nargs; ++i) {
      Py_INCREF(args[i]);
      PyTuple_SET_ITEM(positional, i, args[i]);
    }
    bool ok = true;
    Py_ssize_t count = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < count && ok; ++k)
      ok = PyDict_SetItem(keywords, PyTuple_GET_ITEM(kwnames, k), args[nargs + k]) == 0;
    if (ok)
      result = PyObject_CallMethodObjArgs(dispatcher, launchStrings().launchBracket, grid,
                                          positional, keywords, nullptr);
  }
  Py_XDECREF(keywords);
  Py_XDECREF(positional);
  return result;
}

} // namespace

PyObject *boundLaunchCall(PyObject *callable, PyObject *const *args, size_t nargsf,
                          PyObject *kwnames) {
  auto *bound = reinterpret_cast<BoundLaunchObject *>(callable);
  auto *dispatcher = reinterpret_cast<DispatcherObject *>(bound->dispatcher);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject *evaluatedGrid = nullptr;
  Outcome outcome = tryLaunch(*dispatcher->state, bound->grid, args, nargs, kwnames, evaluatedGrid);
  PyObject *result = nullptr;
  if (outcome == Outcome::Launched)
    result = Py_NewRef(Py_None);
  else if (outcome == Outcome::Fallback)
    // A grid callable that returned None: the Python path calls it again and says so (None
    // itself would read as a launch without a grid).
    result = runInPython(bound->dispatcher,
                         evaluatedGrid && evaluatedGrid != Py_None ? evaluatedGrid : bound->grid,
                         args, nargs, kwnames);
  Py_XDECREF(evaluatedGrid);
  return result;
}

void boundLaunchDealloc(PyObject *self) {
  auto *bound = reinterpret_cast<BoundLaunchObject *>(self);
  PyTypeObject *type = Py_TYPE(self);
  Py_XDECREF(bound->dispatcher);
  Py_XDECREF(bound->grid);
  type->tp_free(self);
  Py_DECREF(type);
}

DispatchGlobals &dispatchGlobals() {
  static DispatchGlobals globals;
  return globals;
}

uint64_t currentKnobEpoch() {
  DispatchGlobals &globals = dispatchGlobals();
  if (globals.knobOverrides == nullptr || globals.rawEnviron == nullptr) {
    globals.interpretKnob = KnobTruth::True; // the Python path reads the knob
    return globals.knobEpoch;
  }
#if PY_VERSION_HEX < 0x030C0000 // no dict watchers: PEP 509's version tag moves on every change
  uint64_t overridesVersion =
      reinterpret_cast<PyDictObject *>(globals.knobOverrides)->ma_version_tag;
  uint64_t environVersion = reinterpret_cast<PyDictObject *>(globals.rawEnviron)->ma_version_tag;
  if (overridesVersion != globals.overridesVersion || environVersion != globals.environVersion) {
    globals.overridesVersion = overridesVersion;
    globals.environVersion = environVersion;
    globals.knobSourcesChanged = true;
  }
#endif
  if (!globals.knobSourcesChanged)
    return globals.knobEpoch;
  globals.knobSourcesChanged = false;
  bool stable;
  bool interpret = interpretKnobNow(globals, stable);
  globals.interpretKnob = !stable     ? KnobTruth::EachLaunch
                          : interpret ? KnobTruth::True
                                      : KnobTruth::False;
  bool anyOverride = PyDict_GET_SIZE(globals.knobOverrides) != 0;
  for (size_t i = 0; i < globals.codeKnobs.size(); ++i) {
    // An override wins over the environment.
    PyObject *value = nullptr;
    if (anyOverride)
      value = PyDict_GetItemWithError(globals.knobOverrides, globals.codeKnobs[i].first);
    if (value == nullptr)
      value = PyDict_GetItemWithError(globals.rawEnviron, globals.codeKnobs[i].second);
    PyErr_Clear(); // an unhashable key cannot happen (str and bytes); a failed lookup is "unset"
    PyObject *&known = globals.codeKnobValues[i];
    if (value != known) {
      Py_XINCREF(value);
      Py_XSETREF(known, value);
      ++globals.knobEpoch;
    }
  }
  return globals.knobEpoch;
}

} // namespace tessera::bindings
