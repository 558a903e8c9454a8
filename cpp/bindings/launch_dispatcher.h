// The Python objects of the fast launch path, shared by launch.cpp (the call: bind, specialize,
// launch) and launch_dispatcher.cpp (the KernelDispatcher type that JITFunction subclasses, and
// the methods the Python path uses to fill its launch table). Written against the CPython API:
// a pybind11 call costs more than the whole fast path.
#pragma once

#include "launch_table.h"

#include <pybind11/pybind11.h>

namespace tessera::bindings {

/// Adds KernelDispatcher (the base class of JITFunction), set_interpret_sources and
/// exchange_current_stream to the runtime submodule (called by bindRuntime in runtime.cpp).
void bindDispatcher(pybind11::module_ &m);

/// Adds PackedLaunch and packed_launch (packed_launch.cpp: the driver floor of benchmarks) to
/// the runtime submodule.
void bindPackedLaunch(pybind11::module_ &m);

/// Sets the Python error tessera._tessera.runtime.CudaError (with `call` and `code`); defined
/// in runtime.cpp beside the exception type.
void setCudaError(const runtime::CudaError &error);

struct LaunchStrings {
  PyObject *numWarps = PyUnicode_InternFromString("num_warps");
  PyObject *numStages = PyUnicode_InternFromString("num_stages");
  // The other launch options, in the key's order (launch_table.h, kLaunchOptionCount).
  PyObject *options[kLaunchOptionCount] = {
      PyUnicode_InternFromString("num_ctas"), PyUnicode_InternFromString("maxnreg"),
      PyUnicode_InternFromString("enable_fp_fusion"), PyUnicode_InternFromString("debug")};
  PyObject *launchBracket = PyUnicode_InternFromString("_launch_bracket");
  PyObject *launcher = PyUnicode_InternFromString("launcher");
  PyObject *device = PyUnicode_InternFromString("device");
  PyObject *currentStream = PyUnicode_InternFromString("current_stream");
  PyObject *streamType = PyUnicode_InternFromString("stream_type");
  PyObject *interpret = PyUnicode_InternFromString("interpret");
  PyObject *defaultWarps = PyLong_FromLong(4); // JITFunction.run's defaults
  PyObject *defaultStages = PyLong_FromLong(1);
};
inline const LaunchStrings &launchStrings() {
  static const LaunchStrings *instance = new LaunchStrings(); // lives as long as the interpreter
  return *instance;
}

/// A knob's truth as last read; EachLaunch: read it again at every launch.
enum class KnobTruth : uint8_t { False, True, EachLaunch };

struct DispatchGlobals {
  // Bumped whenever a KernelDispatcher (a @jit function) is created: a kernel compiled before a
  // @jit helper it calls was redefined takes the Python path once, which checks its sources.
  uint64_t generation = 0;
  // Where tessera.config.knobs.interpret comes from (set_interpret_sources), read here without
  // calling the Python property: the knobs' override dict, os.environ's raw bytes dict and the
  // variable's name as bytes. Null: unknown, every call asks the Python path.
  PyObject *knobOverrides = nullptr;
  PyObject *rawEnviron = nullptr;
  PyObject *interpretVariable = nullptr;
  // The knobs read at each launch that change the generated code (TESSERA_TMA, ...: the
  // Python path puts their values in the kernel's key): each one's override key (str) and
  // variable (bytes), and the objects they were bound to when last looked at (strong, or
  // null: unset). Holding the objects makes an identity compare a value compare: a knob set
  // to a new object, or set back, moves `knobEpoch`, and launch tables filled under another
  // epoch send their calls through the Python path.
  std::vector<std::pair<PyObject *, PyObject *>> codeKnobs;
  std::vector<PyObject *> codeKnobValues;
  uint64_t knobEpoch = 0;
  // Whether the override dict or the environment may have changed since the code knobs were
  // last looked at, so that a launch costs a flag test, not a dozen dict lookups: a dict
  // watcher sets it (Python 3.12+); before 3.12 the dicts' version tags are compared.
  bool knobSourcesChanged = true;
  uint64_t overridesVersion = 0, environVersion = 0;
  // The interpret knob as read when the sources last changed (with the code knobs), so that a
  // launch costs no dict lookup for it: True also when the sources are unknown (then every
  // launch asks the Python path), EachLaunch for an override of a mutable type.
  KnobTruth interpretKnob = KnobTruth::True;
};
DispatchGlobals &dispatchGlobals();

/// The epoch of the code knobs' current values (DispatchGlobals::knobEpoch), after looking at
/// them when their sources changed (a few dict lookups; a flag test otherwise), which also
/// refreshes DispatchGlobals::interpretKnob.
uint64_t currentKnobEpoch();

/// JITFunction(interpret=...): None follows the knob.
enum class InterpretMode { FromKnob, Always, Never };

/// Which launch option a keyword sets: an index of LaunchStrings::options, or one of these.
constexpr int kNumWarpsSlot = -1, kNumStagesSlot = -2, kNotALaunchOption = -3;

/// The launch option `name` (a str) names, or kNotALaunchOption.
int launchOptionSlot(PyObject *name);

struct Parameter {
  PyObject *name = nullptr;         // strong, interned
  PyObject *defaultValue = nullptr; // strong, null when required
  bool isConstexpr = false;
  uint8_t specializeFlags = 0; // runtime::python::SpecializeFlags
  // The launch option of the same name (kNotALaunchOption: none, the usual case): given by
  // keyword, the value goes to both.
  int launchOption = kNotALaunchOption;
};

/// What the fast path would have launched, for a launcher without a kernel (tests, and
/// benchmarks of the host path on machines without a GPU).
struct LaunchRecord {
  runtime::LaunchGrid grid;
  uint64_t stream = 0;
  uint64_t slots[kMaxFastParameters]; // the parameters, one 8-byte slot each
  PyObject *launchable = nullptr;     // strong
  PyObject *launcherObject = nullptr; // strong; owns `launcher`
  const runtime::KernelLauncher *launcher = nullptr;
  uint64_t count = 0; // launches recorded so far

  ~LaunchRecord() {
    Py_XDECREF(launchable);
    Py_XDECREF(launcherObject);
  }
};

struct DispatcherState {
  std::vector<Parameter> parameters;
  std::vector<size_t> runtimeIndices, constexprIndices;
  std::vector<uint8_t> runtimeFlags; // specializeFlags of each runtime parameter, in order
  InterpretMode interpret = InterpretMode::FromKnob;
  bool configured = false;
  uint64_t generation = 0;
  uint64_t knobEpoch = 0; // the code knobs' epoch that `table` was filled under
  LaunchTable table;
  LaunchRecord recorded;
  // The names the compiled kernels' source key read (tl.constexpr globals, @jit helpers,
  // dtypes, closure variables, ...: python/tessera/frontend/source_key.py), as (namespace,
  // name, value) triples, all strong; the namespace is a module's dict, a closure cell or a
  // class's mapping. A launch where one no longer holds the same object takes the Python
  // path, which recompiles when the key changed.
  std::vector<PyObject *> watched;

  bool globalsUnchanged() const {
    for (size_t i = 0; i + 2 < watched.size(); i += 3) {
      PyObject *space = watched[i];
      bool same;
      if (PyDict_Check(space)) { // module globals: the common case, no reference taken
        same = PyDict_GetItemWithError(space, watched[i + 1]) == watched[i + 2];
      } else if (PyCell_Check(space)) {
        same = PyCell_GET(space) == watched[i + 2];
      } else { // a class's mappingproxy
        PyObject *now = PyObject_GetItem(space, watched[i + 1]);
        same = now == watched[i + 2];
        Py_XDECREF(now);
      }
      if (!same) {
        PyErr_Clear();
        return false;
      }
    }
    return true;
  }
  void clearWatched() {
    for (PyObject *object : watched)
      Py_DECREF(object);
    watched.clear();
  }

  void clearParameters() {
    for (Parameter &parameter : parameters) {
      Py_XDECREF(parameter.name);
      Py_XDECREF(parameter.defaultValue);
    }
    parameters.clear();
    runtimeIndices.clear();
    runtimeFlags.clear();
    constexprIndices.clear();
    configured = false;
  }
  ~DispatcherState() {
    clearParameters();
    clearWatched();
  }
};

struct DispatcherObject {
  PyObject_HEAD DispatcherState *state;
};

/// `kernel[grid]`: called, it launches (vectorcall).
struct BoundLaunchObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject *dispatcher; // strong
  PyObject *grid;       // strong
};

/// Stores one runtime value as the kernel's parameter `kind`; false where the Python path
/// would convert differently or raise (then the call takes the Python path).
bool packValue(runtime::ArgKind kind, const runtime::python::ArgumentValue &value, uint64_t &slot);

/// Packs the runtime values the kernel takes (those passed None are constexprs of the compiled
/// kernel: skipped) into `buffer`; false unless they match `launcher`'s signature exactly.
bool packValues(const runtime::KernelLauncher &launcher,
                const runtime::python::ArgumentValue *values, size_t count,
                runtime::ArgumentBuffer &buffer);

PyObject *boundLaunchCall(PyObject *callable, PyObject *const *args, size_t nargsf,
                          PyObject *kwnames);
void boundLaunchDealloc(PyObject *self);

} // namespace tessera::bindings
