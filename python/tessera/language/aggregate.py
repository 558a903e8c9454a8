"""``tl.core._aggregate``: Triton's class decorator for a kernel-side record of tiles.

The decorated class lists its fields as annotations; a kernel builds an instance by calling
the class (its ``__init__`` must set every field, and only annotated fields may be set, each
an instance of its annotation), reads fields as attributes and calls its ``@jit`` methods
(``obj.method(x)`` inlines ``method(obj, x)``). Tessera inlines every ``@jit`` call, so an
instance passes to ``@jit`` functions and comes back from them as it is. Not supported yet:
an instance carried through a ``for``/``while`` loop or reassigned in an ``if`` (the front end
carries tiles and tuples of them there), nor an instance as a kernel argument.

Example::

    @tl.core._aggregate
    class Pair:
        lo: tl.tensor
        hi: tl.tensor

        def __init__(self, lo, hi):
            self.lo = lo
            self.hi = hi

        @tessera.jit
        def total(self):
            return self.lo + self.hi

    @tessera.jit
    def kernel(x_ptr, out_ptr):
        p = Pair(tl.load(x_ptr), tl.load(x_ptr + 1))
        tl.store(out_ptr, p.total())
"""
from __future__ import annotations

import inspect
from typing import Any, Dict, Type

from .core import is_jit  # core re-exports _aggregate at its end, after is_jit

_AGGREGATE = "__tessera_aggregate__"


class BoundMethod:
    """``obj.method`` for a ``@jit`` method of an aggregate: the front end inlines it with
    ``obj`` as its first argument."""

    __tessera_bound_jit__ = True

    def __init__(self, function: Any, instance: Any) -> None:
        self.function = function
        self.instance = instance


class _JitMethod:
    """A descriptor binding an aggregate's ``@jit`` method to the instance it is read from."""

    def __init__(self, function: Any) -> None:
        self.function = function

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self.function if instance is None else BoundMethod(self.function, instance)


def is_aggregate(value: Any) -> bool:
    """Whether ``value`` is a class made by :func:`_aggregate`."""
    return isinstance(value, type) and getattr(value, _AGGREGATE, False) is True


def _aggregate(cls: Type[Any]) -> Type[Any]:
    """Makes ``cls`` an aggregate (see the module docstring). Example::

        @tl.core._aggregate
        class State:
            acc: tl.tensor
            def __init__(self, acc):
                self.acc = acc
    """
    fields: Dict[str, Any] = dict(getattr(cls, "__annotations__", {}))
    original_init = cls.__init__

    def __init__(self: Any, *args: Any, _semantic: Any = None, **kwargs: Any) -> None:
        if "_semantic" in inspect.signature(original_init).parameters:
            kwargs["_semantic"] = _semantic
        original_init(self, *args, **kwargs)
        for name in fields:
            if not hasattr(self, name):
                raise AttributeError(f"constructor for {cls.__name__} did not initialize "
                                     f"attribute '{name}'")

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if name not in fields:
            raise AttributeError(f"{cls.__name__} has no attribute '{name}'")
        expected = fields[name]
        if isinstance(expected, type) and not isinstance(value, expected):
            raise TypeError(f"Expected {expected} for attribute '{name}', got {type(value)}")
        object.__setattr__(self, name, value)

    namespace: Dict[str, Any] = {"__init__": __init__, "__setattr__": __setattr__,
                                 _AGGREGATE: True, "__doc__": cls.__doc__,
                                 "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                 "__annotations__": fields,
                                 # the source key (frontend/source_key.py) reads its text
                                 "__tessera_aggregate_init__": original_init}
    for name, member in vars(cls).items():
        if name in namespace or name.startswith("__"):
            continue
        namespace[name] = _JitMethod(member) if is_jit(member) else member
    return type(cls.__name__, (), namespace)

