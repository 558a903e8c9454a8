// The launch table of one @jit function, for the fast launch path (launch.cpp): specialization
// key -> the loaded kernel, filled by the Python path after it prepares (or finds) a kernel, read
// on every launch. Key words come from python_specialize.h; constexpr values are added
// here. Needs the GIL for everything (it holds references to Python objects).
#pragma once

#include "python_specialize.h"
#include "runtime/launch.h"

#include <unordered_map>
#include <vector>

namespace tessera::bindings {

/// Up to this many parameters a kernel takes the fast path (ArgumentBuffer keeps them on the
/// stack); wider kernels always take the Python path.
constexpr size_t kMaxFastParameters = runtime::ArgumentBuffer::kInlineArguments;

/// Launch options besides num_warps and num_stages that the fast path takes as given, in the
/// order of LaunchStrings::options: num_ctas, maxnreg, enable_fp_fusion, debug (JITFunction.run
/// normalizes and checks them; here they only tell launches apart).
constexpr size_t kLaunchOptionCount = 4;

/// Specialization words of one call: num_warps, num_stages, one or two per other launch option,
/// one word per runtime argument (two per TensorDescriptor), one or two per constexpr.
struct LaunchKey {
  static constexpr size_t kCapacity = 2 + 2 * kLaunchOptionCount + 2 * kMaxFastParameters;
  uint64_t words[kCapacity];
  size_t size = 0;

  void push(uint64_t word) { words[size++] = word; }
  uint64_t hash() const {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ size;
    for (size_t i = 0; i < size; ++i) {
      h = (h ^ words[i]) * 0xff51afd7ed558ccdull;
      h ^= h >> 29;
    }
    return h;
  }
  bool equals(const std::vector<uint64_t> &other) const {
    if (other.size() != size)
      return false;
    for (size_t i = 0; i < size; ++i)
      if (other[i] != words[i])
        return false;
    return true;
  }
};

/// One loaded kernel as the fast path launches it. Holds strong references.
struct LaunchTarget {
  PyObject *launchable = nullptr;     // the Python Launchable (runtime/launcher.py)
  PyObject *launcherObject = nullptr; // its `launcher`, which owns `launcher`
  const runtime::KernelLauncher *launcher = nullptr;
  // The stream: from the framework's DLPack exchange table (one C call), else by calling
  // `streamFunction` (the Launchable's current_stream).
  const runtime::dlpack::DLPackExchangeAPI *streamApi = nullptr;
  PyObject *streamFunction = nullptr;
  int device = 0;

  /// Another reference to the same objects (released with release()).
  LaunchTarget pin() const {
    Py_XINCREF(launchable);
    Py_XINCREF(launcherObject);
    Py_XINCREF(streamFunction);
    return *this;
  }
  void release() {
    Py_CLEAR(launchable);
    Py_CLEAR(launcherObject);
    Py_CLEAR(streamFunction);
  }
};

struct LaunchEntry {
  std::vector<uint64_t> key;
  LaunchTarget target;
};

class LaunchTable {
public:
  LaunchTable() = default;
  LaunchTable(const LaunchTable &) = delete;
  LaunchTable &operator=(const LaunchTable &) = delete;
  ~LaunchTable() {
    clear();
    for (PyObject *constant : constants_)
      Py_DECREF(constant);
  }

  /// Words of (num_warps, num_stages, runtime values, constexpr values); `values` receives what
  /// the runtime arguments pass, `valueCount` of them (kMaxFastParameters at most: a
  /// TensorDescriptor passes several). False (no Python error set): leave the call to Python.
  /// `flags`: per runtime argument, the SpecializeFlags of its parameter (null: none);
  /// `options`: the other launch options as given (kLaunchOptionCount; null: absent).
  bool makeKey(PyObject *const *runtime, size_t runtimeCount, PyObject *const *constexprs,
               size_t constexprCount, PyObject *numWarps, PyObject *numStages, LaunchKey &key,
               runtime::python::ArgumentValue *values, size_t &valueCount,
               const uint8_t *flags = nullptr, PyObject *const *options = nullptr) {
    if (!smallInt(numWarps, key) || !smallInt(numStages, key))
      return false;
    for (size_t i = 0; i < kLaunchOptionCount; ++i)
      if (!constexprWords(options != nullptr && options[i] != nullptr ? options[i] : Py_None, key))
        return false;
    valueCount = 0;
    for (size_t i = 0; i < runtimeCount; ++i) {
      uint64_t words[2];
      size_t wordCount, used;
      if (!runtime::python::specializeExpanded(runtime[i], words, wordCount, values + valueCount,
                                               kMaxFastParameters - valueCount, used))
        return false;
      valueCount += used;
      if (wordCount == 2) { // a descriptor: its key has no alignment or equality to 1 to mask
        key.push(words[0]);
        key.push(words[1]);
      } else {
        key.push(flags != nullptr ? runtime::python::maskedWord(words[0], flags[i]) : words[0]);
      }
    }
    for (size_t i = 0; i < constexprCount; ++i)
      if (!constexprWords(constexprs[i], key))
        return false;
    return true;
  }

  const LaunchEntry *find(const LaunchKey &key) {
    // Launches repeat: compare with the last hit before hashing.
    if (last_ != nullptr && key.equals(last_->key))
      return last_;
    uint64_t hash = key.hash();
    auto range = entries_.equal_range(hash);
    for (auto it = range.first; it != range.second; ++it) {
      if (key.equals(it->second.key)) {
        last_ = &it->second; // nodes of an unordered_multimap never move
        return last_;
      }
    }
    return nullptr;
  }

  /// Adds `target` (taking its references) for `key`, replacing the target of an equal key.
  void insert(const LaunchKey &key, const LaunchTarget &target) {
    uint64_t hash = key.hash();
    auto range = entries_.equal_range(hash);
    for (auto it = range.first; it != range.second; ++it) {
      if (key.equals(it->second.key)) {
        it->second.target.release();
        it->second.target = target;
        return;
      }
    }
    LaunchEntry entry;
    entry.key.assign(key.words, key.words + key.size);
    entry.target = target;
    entries_.emplace(hash, std::move(entry));
  }

  void clear() {
    for (auto &item : entries_)
      item.second.target.release();
    entries_.clear();
    last_ = nullptr;
  }

  size_t size() const { return entries_.size(); }

private:
  static constexpr size_t kMaxConstants = 4096;

  static bool smallInt(PyObject *obj, LaunchKey &key) {
    if (!PyLong_CheckExact(obj))
      return false;
    int overflow = 0;
    long long value = runtime::python::intValue(obj, overflow);
    if (overflow != 0 || (value == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    key.push(static_cast<uint64_t>(value));
    return true;
  }

  // A constexpr value: ints, bools and None by value; anything else hashable by the index of an
  // equal object of the same type seen before (as the Python key's tuple comparison, but never
  // merging values of different types, such as 1 and 1.0).
  bool constexprWords(PyObject *obj, LaunchKey &key) {
    using runtime::python::KeyTag;
    using runtime::python::keyWord;
    if (PyBool_Check(obj)) {
      key.push(keyWord(KeyTag::ConstBool, obj == Py_True));
      return true;
    }
    if (obj == Py_None) {
      key.push(keyWord(KeyTag::ConstNone));
      return true;
    }
    if (PyLong_CheckExact(obj)) {
      int overflow = 0;
      long long value = runtime::python::intValue(obj, overflow);
      if (overflow == 0 && !(value == -1 && PyErr_Occurred())) {
        key.push(keyWord(KeyTag::ConstInt));
        key.push(static_cast<uint64_t>(value));
        return true;
      }
      PyErr_Clear();
    }
    for (size_t i = 0; i < constants_.size(); ++i) {
      if (constants_[i] == obj) {
        key.push(keyWord(KeyTag::ConstObject, i));
        return true;
      }
    }
    if (PyObject_Hash(obj) == -1) { // the Python path says "constexpr values must be hashable"
      PyErr_Clear();
      return false;
    }
    for (size_t i = 0; i < constants_.size(); ++i) {
      if (Py_TYPE(constants_[i]) != Py_TYPE(obj))
        continue;
      int equal = PyObject_RichCompareBool(constants_[i], obj, Py_EQ);
      if (equal < 0) {
        PyErr_Clear();
        return false;
      }
      if (equal) {
        key.push(keyWord(KeyTag::ConstObject, i));
        return true;
      }
    }
    if (constants_.size() >= kMaxConstants)
      return false;
    Py_INCREF(obj);
    constants_.push_back(obj);
    key.push(keyWord(KeyTag::ConstObject, constants_.size() - 1));
    return true;
  }

  std::unordered_multimap<uint64_t, LaunchEntry> entries_;
  const LaunchEntry *last_ = nullptr;
  std::vector<PyObject *> constants_; // strong references; never dropped (indices are in keys)
};

} // namespace tessera::bindings
