"""The source key of a kernel: everything outside its arguments that decides its code.

It is the text of the kernel and of every function the front end runs while compiling it
(@jit callees, ``tessera.constexpr_function`` helpers, an aggregate's ``__init__`` and @jit
methods), plus the value of every other name those read that the code depends on:
``tl.constexpr`` globals, dtypes, enum members and ``None``, and in the Python bodies of
constexpr functions and aggregate constructors plain numbers, strings and tuples too (they are
ordinary Python, run at compile time). Such a name may be a module global, a module attribute
(``cfg.BLOCK``), a class attribute (``Cfg.BLOCK``) or a variable of an enclosing function
(a closure cell, which the enclosing function may rebind).

With the key come the places it was read from: (namespace, name, value), the namespace a
module's dict, a class's mapping or a closure cell. While each still holds the very same
object the key is unchanged, so the launch paths (jit.py; the C++ fast path,
cpp/bindings/launch_dispatcher.h) check those instead of rebuilding the key on every launch;
a rebound name (a notebook cell run again) makes them read the key again and compile anew.

Names reached through Tessera's own modules (``tl.float16``, ``tl.load``) are constants of
the language: neither keyed nor watched.
"""
from __future__ import annotations

import ast
import enum
import textwrap
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..language import core as tl
from ..language.aggregate import is_aggregate
from . import source_index
from .source import function_source, is_jit

Watched = Tuple[Tuple[Any, str, Any], ...]

_MISSING = object()
# Plain data whose repr is its value: keyed where Python code (not the DSL) reads it.
_PLAIN = (int, float, complex, str, bytes, bool)


def dotted_names(tree: ast.AST) -> List[List[str]]:
    """Every ``a`` and ``a.b.c`` read in ``tree``, as lists of parts, in source order."""
    out: List[List[str]] = []
    for node in ast.walk(tree):
        parts: List[str] = []
        while isinstance(node, ast.Attribute):
            parts.insert(0, node.attr)
            node = node.value
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.append([node.id] + parts)
    return out


def _is_tessera_module(value: Any) -> bool:
    name = getattr(value, "__name__", "") if isinstance(value, types.ModuleType) else ""
    return name == "tessera" or name.startswith("tessera.")


def _namespace_of(owner: Any, part: str) -> Optional[Any]:
    """Where ``owner.part`` lives when rebinding it is plausible: a module's dict, or the
    mapping of the class that defines it (not one it inherits from)."""
    if isinstance(owner, types.ModuleType):
        return vars(owner)
    if isinstance(owner, type) and part in vars(owner):
        return vars(owner)
    return None


def _resolve(fn: Callable, dotted: List[str]) -> Tuple[Any, List[Tuple[Any, str, Any]]]:
    """The value of ``a.b.c`` as ``fn`` sees it, and the (namespace, name, value) places it
    was read from; (missing, []) for a builtin, a local-only name or a path through anything
    but modules and classes (no user code runs for the key)."""
    code = fn.__code__
    head = dotted[0]
    if head in code.co_freevars and fn.__closure__:
        cell = fn.__closure__[code.co_freevars.index(head)]
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: the variable is not assigned yet
            return _MISSING, []
        places: List[Tuple[Any, str, Any]] = [(cell, head, value)]
    elif head in fn.__globals__:
        value = fn.__globals__[head]
        places = [(fn.__globals__, head, value)]
    else:
        return _MISSING, []
    for part in dotted[1:]:
        if _is_tessera_module(value):
            return _MISSING, []  # the language's own names: constants
        namespace = _namespace_of(value, part)
        if namespace is None:
            return _MISSING, []
        value = namespace.get(part, _MISSING)
        places.append((namespace, part, value))
    return value, places


def _value_text(value: Any, python: bool) -> Optional[str]:
    """How ``value`` enters the key, or None when it does not decide the code. ``python``:
    read by Python code run at compile time (a constexpr function), where any plain value
    counts; the DSL itself reads only compile-time-stable kinds (ast_to_ir.check_global)."""
    if isinstance(value, tl.constexpr):
        return repr(value.value)
    if value is None or isinstance(value, (tl.dtype, enum.Enum)):
        return repr(value)
    if python and isinstance(value, _PLAIN):
        return repr(value)
    if python and isinstance(value, (tuple, frozenset)) and \
            all(_value_text(item, True) is not None for item in value):
        return repr(value)
    return None


def kernel_source_and_globals(fn: Callable) -> Tuple[str, Watched]:
    """The source key of ``fn`` (see the module docstring) and the places it was read from."""
    fn = fn.fn if is_jit(fn) else fn  # type: ignore[attr-defined]
    seen: Dict[int, bool] = {}
    parts: List[str] = []
    watched: Dict[Tuple[int, str], Tuple[Any, str, Any]] = {}

    def watch(places: List[Tuple[Any, str, Any]]) -> None:
        for namespace, name, value in places:
            watched[(id(namespace), name)] = (namespace, name, value)

    def visit(f: Callable, python: bool) -> None:
        if id(f) in seen:
            return
        seen[id(f)] = True
        try:
            source = textwrap.dedent("".join(function_source(f)[0]))
        except OSError:
            if not python:
                raise
            # A compile-time helper without source (made by exec, a C function): its name.
            parts.append(f"# {getattr(f, '__qualname__', f)!s} (no source)\n")
            return
        parts.append(f"# {f.__module__}.{f.__qualname__}\n{source}")
        if not hasattr(f, "__code__"):
            return
        names = source_index.dotted_names(f, source)
        if names is None:
            names = dotted_names(ast.parse(source))
            source_index.remember_names(f, source, names)
        for dotted in names:
            value, places = _resolve(f, dotted)
            if value is _MISSING:
                continue
            if is_jit(value):
                watch(places)
                visit(value.fn, False)
            elif getattr(value, "__tessera_constexpr_function__", False):
                watch(places)
                visit(value.fn, True)
            elif is_aggregate(value):
                watch(places)
                visit_aggregate(value)
            else:
                text = _value_text(value, python)
                if text is not None:
                    watch(places)
                    kind = "constexpr" if isinstance(value, tl.constexpr) else "global"
                    parts.append(f"# {kind} {'.'.join(dotted)} = {text}\n")

    def visit_aggregate(cls: type) -> None:
        if id(cls) in seen:
            return
        seen[id(cls)] = True
        fields = ", ".join(f"{k}: {getattr(v, '__name__', v)}"
                           for k, v in getattr(cls, "__annotations__", {}).items())
        parts.append(f"# aggregate {cls.__module__}.{cls.__qualname__} ({fields})\n")
        constructor = getattr(cls, "__tessera_aggregate_init__", None)
        if constructor is not None and hasattr(constructor, "__code__"):
            visit(constructor, True)  # Python run at compile time on the fields
        for member in vars(cls).values():
            member = getattr(member, "function", member)  # a @jit method's descriptor
            if is_jit(member):
                visit(member.fn, False)

    visit(fn, False)
    source_index.flush()
    return "\n".join(parts), tuple(watched.values())


def kernel_source_key(fn: Callable) -> str:
    """The source key of ``fn`` (see the module docstring)."""
    return kernel_source_and_globals(fn)[0]


def current_value(namespace: Any, name: str) -> Any:
    """What ``namespace`` (a dict, a class's mapping or a closure cell) holds for ``name``
    now; a private marker when nothing."""
    if isinstance(namespace, types.CellType):
        try:
            return namespace.cell_contents
        except ValueError:
            return _MISSING
    return namespace.get(name, _MISSING)


def changed(watched: Watched) -> bool:
    """Whether any place a source key was read from no longer holds the same object."""
    return any(current_value(namespace, name) is not value
               for namespace, name, value in watched)
