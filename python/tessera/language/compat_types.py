"""Triton's small language types: tl.tuple, tl.slice, tl.const, tl.constexpr_type, tl.void,
tl.pi32_t and tl.condition (Triton 3.6's meaning of each).

In a kernel a tuple (written ``(a, b)``, ``tl.tuple([a, b])``, a tuple kernel argument or a
tuple returned by a @jit helper) is a :class:`tuple`: a Python tuple of tensors and
compile-time values, indexed with compile-time indices, sliced, iterated in static loops,
passed to and returned from @jit helpers and carried through runtime loops and ifs (its
tensors are carried one by one: frontend/control_flow.py).

Example::

    @tessera.jit
    def kernel(ptrs, n):                 # kernel[grid]((x, y, out), n)
        x_ptr, y_ptr, out_ptr = ptrs
        offs = tl.arange(0, 128)
        pair = tl.tuple([tl.load(x_ptr + offs, mask=offs < n),
                         tl.load(y_ptr + offs, mask=offs < n)])
        tl.store(out_ptr + offs, pair[0] + pair[1], mask=offs < n)
"""
from __future__ import annotations

import builtins
from typing import Any, Iterable, Optional

from .core import dtype, int32, pointer_type


class tuple(builtins.tuple):
    """Triton's ``tl.tuple``: ``tl.tuple([a, b])`` or ``tl.tuple((a, b))``.

    A Python tuple (so ``len``, unpacking, ``+``, ``==`` and iteration behave as Python's);
    ``values`` lists its elements and ``type`` describes them, as Triton's.

    Example::

        t = tl.tuple([x, 2])   # in a kernel: t[0] is x, t[1] is 2, len(t) == 2
    """

    def __new__(cls, args: Iterable[Any] = (), type: Any = None) -> "tuple":
        return super().__new__(cls, args)

    @property
    def values(self) -> list:
        return list(self)

    @property
    def type(self) -> "tuple_type":
        return tuple_type([getattr(v, "type", constexpr_type(v)) for v in self])

    def __getitem__(self, index: Any) -> Any:
        index = getattr(index, "value", index)  # a tl.constexpr index
        if isinstance(index, builtins.slice):
            return tuple(builtins.tuple.__getitem__(self, index))
        return builtins.tuple.__getitem__(self, index)

    def __add__(self, other: Any) -> "tuple":
        return tuple(builtins.tuple(self) + builtins.tuple(other))

    def __radd__(self, other: Any) -> "tuple":
        return tuple(builtins.tuple(other) + builtins.tuple(self))

    def __mul__(self, count: Any) -> "tuple":
        return tuple(builtins.tuple(self) * getattr(count, "value", count))

    def __repr__(self) -> str:
        return "(" + ", ".join(repr(v) for v in self) + ("," if len(self) == 1 else "") + ")"


class tuple_type:
    """The type of a :class:`tuple`: its elements' types (``fields`` for namedtuples)."""

    def __init__(self, types: Iterable[Any], fields: Optional[Iterable[str]] = None) -> None:
        self.types = list(types)
        self.fields = list(fields) if fields is not None else [""] * len(self.types)

    def __iter__(self):
        return iter(self.types)

    def __getitem__(self, index: int) -> Any:
        return self.types[index]

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, tuple_type) and self.types == other.types
                and self.fields == other.fields)

    def __hash__(self) -> int:
        return hash(builtins.tuple(str(t) for t in self.types))

    def __str__(self) -> str:
        return "[" + ",".join(f"{f}:{t}" for f, t in zip(self.fields, self.types)) + "]"


class slice:
    """Triton's ``tl.slice(start, stop, step)``: the value a kernel's ``x[a:b:c]`` builds
    (compile-time bounds). Used as an index, it slices a tuple as Python's slice does.

    Example::

        s = tl.slice(1, None, None)   # t[s] == t[1:]
    """

    def __init__(self, start: Any, stop: Any, step: Any) -> None:
        self.start = start
        self.stop = stop
        self.step = step

    def as_python(self) -> builtins.slice:
        unwrap = lambda v: getattr(v, "value", v)  # noqa: E731 - tl.constexpr bounds
        return builtins.slice(unwrap(self.start), unwrap(self.stop), unwrap(self.step))

    def __repr__(self) -> str:
        return f"tl.slice({self.start!r}, {self.stop!r}, {self.step!r})"


class const:
    """Triton's ``tl.const``: an annotation marking a pointer parameter read-only
    (``def kernel(x_ptr: tl.const, ...)``): its pointer type is const (``is_const()``), and
    a store or atomic through it (or a pointer computed from it) fails to compile, as Triton.

    Example::

        @tessera.jit
        def copy(src: tl.const, dst, n): ...
    """


class constexpr_type:
    """Triton's ``tl.constexpr_type(value)``: the type of a compile-time value (what
    ``tl.tuple([x, 2]).type[1]`` is). Equal when the values are equal.

    Example::

        >>> constexpr_type(4) == constexpr_type(4)
        True
    """

    def __init__(self, value: Any) -> None:
        self.value = getattr(value, "value", value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, constexpr_type) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"constexpr_type[{self.value}]"


class _void_type(dtype):
    """Triton's ``tl.void``: the dtype of no value (``is_void()``); no tensor has it."""

    def __init__(self) -> None:  # not an IR element type: dtype's table has no entry
        self.name = "void"
        self.primitive_bitwidth = 0

    def is_void(self) -> bool:
        return True

    def is_int(self) -> bool:
        return False

    def is_floating(self) -> bool:
        return False

    def to_ir(self, builder: Any = None):
        raise TypeError("tl.void is the type of no value: no tensor or parameter can have it")


void = _void_type()
"""``tl.void``: ``tl.void.is_void()`` is True; the dtype of no value."""

pi32_t = pointer_type(int32)
"""``tl.pi32_t``: ``tl.pointer_type(tl.int32)``, as Triton names it."""


class condition:
    """Triton's ``tl.condition(cond, disable_licm=False)``: the condition of a ``while``
    with compiler hints. ``disable_licm=True`` keeps loop-invariant code inside the loop (the
    licm pass skips the loop), which shortens live ranges.

    Example::

        while tl.condition(i < n, disable_licm=True):
            i += 1
    """

    def __init__(self, arg1: Any, disable_licm: bool = False) -> None:
        self.condition = arg1
        self.disable_licm = bool(getattr(disable_licm, "value", disable_licm))
