"""Finds the live host arrays behind addresses a kernel read from memory (pointer arrays).

A grouped GEMM, an MoE layer or a multi-tensor optimizer passes many tensors as an int64
tensor of their addresses (``torch.tensor([a.data_ptr() for a in As])``) and casts the loaded
values back to pointers. Those tensors are not arguments, so the interpreter has never seen
them. Triton's interpreter reads raw host memory at whatever address it is given (garbage or a
crash when the address is wrong); this one only reads memory it can show belongs to a live
object, so it looks for the objects: NumPy arrays and CPU PyTorch tensors

1. referenced from the current thread's Python frames (locals, and lists, tuples, dicts and
   sets of them, a few levels deep): the common case, cheap;
2. then, only if some address is still unexplained, anywhere in the Python heap: every object
   the garbage collector tracks (PyTorch tensors are tracked) and what those reference,
   through untracked containers (NumPy arrays are not tracked, nor a dict or tuple holding
   only arrays). This walks every object once, about a second in a large process.

An address counts only if it lies inside such an object's allocation (a tensor's whole
storage, an array's outermost NumPy base), so the interpreter never reads freed or foreign
memory: an address outside every array found stays unmapped and faults where it is used.
Memory that only C code holds (not reachable from Python objects) cannot be found.
"""
from __future__ import annotations

import gc
import sys
import types
from typing import Any, Callable, Dict, Iterable, List, Optional

import numpy as np

_FRAME_DEPTH = 3  # container levels followed from a frame's locals
_HEAP_DEPTH = 4   # untracked container levels followed from the tracked objects


class Found:
    """One live allocation: [low, low + size) of host memory, owned (kept alive) by owner."""
    __slots__ = ("owner", "low", "size", "writable", "description")

    def __init__(self, owner: Any, low: int, size: int, writable: bool, description: str):
        self.owner, self.low, self.size = owner, low, size
        self.writable, self.description = writable, description


def byte_extent(array: np.ndarray):
    """(lowest address, size in bytes) of the memory an array's elements occupy."""
    start = array.__array_interface__["data"][0]
    if array.size == 0:
        return start, 0
    low = high = 0
    for extent, stride in zip(array.shape, array.strides):
        reach = (extent - 1) * stride
        low, high = low + min(reach, 0), high + max(reach, 0)
    return start + low, high - low + array.itemsize


def _torch_module():
    return sys.modules.get("torch")  # only look for tensors if PyTorch is already in use


def _describe_array(kind: str, dtype, shape) -> str:
    return f"{kind} {dtype} {'tensor' if kind == 'torch' else 'array'} of shape {tuple(shape)}"


def _from_tensor(tensor) -> Optional[Found]:
    try:
        if tensor.device.type != "cpu" or tensor.is_sparse:
            return None
        storage = tensor.untyped_storage()  # the allocation, not just this view of it
        low, size = storage.data_ptr(), storage.nbytes()
    except Exception:  # meta, fake or otherwise storage-less tensors hold no host memory
        return None
    if size == 0:
        return None
    what = _describe_array("torch", tensor.dtype, tensor.shape)
    return Found(tensor, low, size, True, f"storage of a {what}")


def _from_array(array: np.ndarray) -> Optional[Found]:
    root = array
    while isinstance(root.base, np.ndarray):  # the outermost array owning (or viewing) memory
        root = root.base
    low, size = byte_extent(root)
    if size == 0 or root.dtype.hasobject:  # an object array holds Python pointers, not data
        return None
    return Found(root, low, size, bool(root.flags.writeable),
                 _describe_array("NumPy", root.dtype, root.shape))


# How to list a container's items with the built-in type's own methods, never an override a
# subclass may define (a dict subclass's __iter__, a list subclass's): nothing user-written runs.
_ITEMS = ((dict, dict.values), (list, list.__iter__), (tuple, tuple.__iter__),
          (set, set.__iter__), (frozenset, frozenset.__iter__))


class Classifier:
    """Sorts objects into arrays, tensors, containers to follow, or nothing, by type (never
    isinstance, which may run an object's __class__ property); caches the answer per type."""

    def __init__(self) -> None:
        self.kinds: Dict[type, str] = {}
        self.items: Dict[type, Callable[[Any], Iterable[Any]]] = {}
        torch = _torch_module()
        self.tensor_type = torch.Tensor if torch is not None else None

    def kind(self, obj: Any) -> str:
        t = type(obj)
        kind = self.kinds.get(t)
        if kind is None:
            kind = ""
            if issubclass(t, np.ndarray):
                kind = "array"
            elif self.tensor_type is not None and issubclass(t, self.tensor_type):
                kind = "tensor"
            else:
                for base, items in _ITEMS:
                    if issubclass(t, base):
                        kind, self.items[t] = "container", items
                        break
            self.kinds[t] = kind
        return kind


class Finder:
    """Collects candidate allocations, lazily: the frames first, the heap only when asked."""

    def __init__(self) -> None:
        self.stage = 0  # 0: nothing searched; 1: the frames; 2: the heap too
        self.found: List[Found] = []
        self._seen: Dict[int, Any] = {}  # id -> object, so each object is looked at once
        self._classifier: Optional[Classifier] = None
        self._table: Optional[List[Found]] = None

    def table(self) -> List[Found]:
        """What has been found so far, for lookup (see innermost_first)."""
        if self._table is None:
            self._table = innermost_first(self.found)
        return self._table

    def search_next(self) -> bool:
        """Searches the next, wider stage; False when everything has been searched."""
        if self.stage >= 2:
            return False
        if self._classifier is None:
            self._classifier = Classifier()
        self.stage += 1
        self._table = None
        if self.stage == 1:
            self._search_frames()
        else:
            self._search_heap()
        return True

    def _take(self, obj: Any, kind: str) -> None:
        if id(obj) in self._seen:
            return
        self._seen[id(obj)] = obj
        found = _from_array(obj) if kind == "array" else _from_tensor(obj)
        if found is not None:
            self.found.append(found)

    def _walk(self, objects: Iterable[Any], depth: int) -> None:
        """Takes the arrays among objects and follows containers `depth` levels down."""
        assert self._classifier is not None
        kind_of = self._classifier.kind
        level = list(objects)
        for _ in range(depth + 1):
            deeper: List[Any] = []
            for obj in level:
                kind = kind_of(obj)
                if kind == "container":
                    deeper.extend(self._classifier.items[type(obj)](obj))
                elif kind:
                    self._take(obj, kind)
            level = deeper

    def _search_frames(self) -> None:
        frame: Optional[types.FrameType] = sys._getframe(1)
        while frame is not None:
            self._walk(list(frame.f_locals.values()), _FRAME_DEPTH)
            frame = frame.f_back

    def _search_heap(self) -> None:
        assert self._classifier is not None
        kind_of = self._classifier.kind
        tracked = gc.get_objects()
        for obj in tracked:  # tracked tensors (and array subclasses that are tracked)
            kind = kind_of(obj)
            if kind and kind != "container":
                self._take(obj, kind)
        level = gc.get_referents(*tracked)
        del tracked
        for _ in range(_HEAP_DEPTH):
            untracked: List[Any] = []
            for obj in level:
                kind = kind_of(obj)
                if kind == "container":
                    if not gc.is_tracked(obj):  # tracked ones were visited themselves
                        untracked.append(obj)
                elif kind:
                    self._take(obj, kind)
            if not untracked:
                break
            level = gc.get_referents(*untracked)


def innermost_first(found: List[Found]) -> List[Found]:
    """The allocations without the ones nested in another (a view found beside its base),
    sorted by address; what remains neither nests nor (for real allocations) overlaps."""
    ordered = sorted(found, key=lambda f: (f.low, -f.size))
    kept: List[Found] = []
    for f in ordered:
        if kept and f.low + f.size <= kept[-1].low + kept[-1].size:
            continue  # inside the previous one: that one is the allocation
        kept.append(f)
    return kept


def lookup(table: List[Found], addresses: np.ndarray) -> np.ndarray:
    """For each address: the index in table (sorted, non-nested) of the allocation holding it
    (or ending just before it: a pointer one past the end is valid, though not to access), or
    -1. Non-nested intervals sorted by start are sorted by end too, so one search suffices."""
    if not table:
        return np.full(addresses.shape, -1, np.int64)
    lows = np.array([f.low for f in table], np.int64)
    ends = np.array([f.low + f.size for f in table], np.int64)
    index = np.searchsorted(lows, addresses, side="right") - 1
    held = (index >= 0) & (addresses <= ends[np.maximum(index, 0)])
    return np.where(held, index, -1)
