"""Kernel parameters given a tuple: one value in the body, one block argument per runtime
element (runtime/tuple_arguments.py says how a launch specializes and expands them).

The signature and the constexpr dictionary name a tuple's elements by path (``t.0``,
``t.1.0``); runtime elements are block arguments in depth-first order (the order of their
paths), compile-time ones (None, tl.constexpr, empty tuples) are constants, and
``t.__class__`` entries give namedtuple classes. :func:`group` finds them per parameter;
:func:`assemble` builds the tuple from the elements' values.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..language import compat_types

# The constexpr dictionary's key of a namedtuple element's class: its path + this suffix
# (``t.__class__``, ``t.1.__class__``), as the launch writes it (runtime/tuple_arguments.py).
CLASS_SUFFIX = ".__class__"


def _path(name: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in name.split(".")[1:])


def group(signature: Dict[str, Any], constexprs: Dict[str, Any]
          ) -> Dict[str, Tuple[List[str], List[str], Dict[str, type]]]:
    """parameter -> (runtime element names in block-argument order, compile-time element
    names, namedtuple classes by path name), for every parameter given as a tuple."""
    out: Dict[str, Tuple[List[str], List[str], Dict[str, type]]] = {}
    for name in list(signature) + list(constexprs):
        if "." not in name:
            continue
        param = name.split(".", 1)[0]
        runtime, constant, classes = out.setdefault(param, ([], [], {}))
        if name.endswith(CLASS_SUFFIX):
            classes[name[:-len(CLASS_SUFFIX)]] = constexprs[name]
        elif name in signature:
            runtime.append(name)
        else:
            constant.append(name)
    for runtime, _, _ in out.values():
        runtime.sort(key=_path)
    return out


def assemble(param: str, leaves: Dict[str, Any], classes: Dict[str, type]) -> Any:
    """The tuple whose leaves (by path name) are ``leaves``."""
    tree: Dict[Tuple[int, ...], Any] = {_path(name): value for name, value in leaves.items()}

    def build(prefix: Tuple[int, ...], name: str) -> Any:
        if prefix in tree:
            return tree[prefix]
        indices = sorted({path[len(prefix)] for path in tree
                          if len(path) > len(prefix) and path[:len(prefix)] == prefix})
        if indices != list(range(len(indices))):
            raise ValueError(f"tuple parameter '{name}' lacks elements: got {indices}")
        items = [build(prefix + (i,), f"{name}.{i}") for i in indices]
        cls = classes.get(name)
        if cls is not None and hasattr(cls, "_make"):
            return cls._make(items)
        return compat_types.tuple(items)

    return build((), param)
