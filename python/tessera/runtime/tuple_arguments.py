"""Tuple kernel arguments: their specialization and their expansion (as Triton 3.x).

A runtime parameter may be given a tuple (nested tuples too) of tensors, scalars, ``None``
and ``tl.constexpr(...)`` values. Each element is specialized as a parameter of its own would
be (dtype, 16-byte alignment, an int's divisibility by 16 and equality to 1); ``None`` and
``tl.constexpr`` elements are compile-time values of the kernel. The kernel sees one value,
the tuple; the compiled function takes one parameter per runtime element, depth first.

Elements are named by their path: ``t.0``, ``t.1.0``, ... These names are the signature's
keys (runtime elements), the constexpr dictionary's keys (``None``, constexpr and empty-tuple
elements) and the launch's argument names; the front end (frontend/__init__.py) rebuilds the
tuple from them. Namedtuple classes are kept: their fields read by name in the kernel.

The C++ fast launch path does not take tuples: a launch with a tuple argument always takes
the Python path (JITFunction.run never registers it there).

Example::

    >>> from tessera.runtime import specialization, tuple_arguments
    >>> key = tuple_arguments.key((7, None), specialization.argument_key)
    >>> [(p, k[0]) for p, k, _ in tuple_arguments.leaves("t", key, (7, None))]
    [('t.0', 'int'), ('t.1', 'none')]
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, List, Sequence, Tuple

from ..frontend.tuple_parameters import CLASS_SUFFIX  # noqa: F401  (the front end's name format)

_NO_VALUE = object()


def key(value: tuple, argument_key: Callable[[Any], tuple]) -> tuple:
    """``("tuple", class, element keys)``: each element as `argument_key` says (the caller's,
    specialization.argument_key, which comes back here for nested tuples), a ``tl.constexpr``
    element as ``("constexpr", value)``."""
    from ..language.core import constexpr
    items = []
    for item in value:
        if isinstance(item, constexpr):
            items.append(("constexpr", item.value))
        else:
            items.append(argument_key(item))
    return ("tuple", type(value), tuple(items))


def masked(key: tuple, flags: int, mask: Callable[[tuple, int], tuple]) -> tuple:
    """``key`` with @jit(do_not_specialize...)'s flags applied to every element."""
    return ("tuple", key[1], tuple(masked(k, flags, mask) if k[0] == "tuple" else mask(k, flags)
                                   for k in key[2]))


def is_compile_time(key: tuple) -> bool:
    """Elements the compiled kernel has no parameter for."""
    return key[0] in ("none", "constexpr") or (key[0] == "tuple" and not key[2])


def leaves(name: str, key: tuple, value: Any = _NO_VALUE) -> Iterator[Tuple[str, tuple, Any]]:
    """(path name, key, value) of each leaf, depth first; an empty tuple is a leaf."""
    if key[0] != "tuple" or not key[2]:
        yield name, key, value
        return
    for index, item_key in enumerate(key[2]):
        item = _NO_VALUE if value is _NO_VALUE else value[index]
        yield from leaves(f"{name}.{index}", item_key, item)


def compile_time_value(key: tuple) -> Any:
    """The value in the kernel of a compile-time leaf (see :func:`is_compile_time`)."""
    if key[0] == "none":
        return None
    if key[0] == "constexpr":
        return key[1]
    return key[1]._make(()) if hasattr(key[1], "_make") else key[1](())  # an empty tuple


def classes(name: str, key: tuple) -> Iterator[Tuple[str, type]]:
    """(path name, class) of every tuple that is not a plain tuple (namedtuples)."""
    if key[0] != "tuple":
        return
    if key[1] is not tuple:
        yield name, key[1]
    for index, item_key in enumerate(key[2]):
        yield from classes(f"{name}.{index}", item_key)


def leaf_values(values: Sequence[Any]) -> List[Any]:
    """``values`` with tuples replaced by their elements, depth first (to find a device)."""
    out: List[Any] = []
    for value in values:
        if isinstance(value, tuple):
            out += leaf_values(value)
        else:
            out.append(value)
    return out


def flatten(names: Sequence[str], keys: Sequence[tuple], values: Sequence[Any]
            ) -> Tuple[List[str], List[Any]]:
    """Names and values of what the compiled kernel takes: tuples expanded to their runtime
    leaves (parameters passed None, compile-time leaves, are left out)."""
    out_names: List[str] = []
    out_values: List[Any] = []
    for name, item_key, value in zip(names, keys, values, strict=True):
        for path, leaf_key, leaf in leaves(name, item_key, value):
            if not is_compile_time(leaf_key):
                out_names.append(path)
                out_values.append(leaf)
    return out_names, out_values
