"""Kernel sources: parsing a @jit function, its parameters and name lookup.

The front end reads a kernel's Python source (not its bytecode): ``parse_function`` keeps the
AST plus what maps AST positions back to file:line:col. source_key.py gathers the sources and
values a kernel's code depends on, for the compilation cache.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import re
import textwrap
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..language import core as tl
from ..language.core import is_jit as is_jit  # the front end's name for it too
from . import source_extent, source_index

_MISSING = object()


def is_constexpr_annotation(annotation: Any) -> bool:
    if annotation is tl.constexpr:
        return True
    # `from __future__ import annotations` leaves annotations as strings ("tl.constexpr").
    return isinstance(annotation, str) and annotation.split(".")[-1] == "constexpr"


@dataclass(frozen=True)
class KernelParameter:
    """One parameter of a kernel: its name, whether it is annotated ``tl.constexpr`` and its
    default (``inspect.Parameter.empty`` when it has none)."""
    name: str
    index: int
    is_constexpr: bool
    default: Any = inspect.Parameter.empty
    kind: Any = inspect.Parameter.POSITIONAL_OR_KEYWORD

    @property
    def has_default(self) -> bool:
        return self.default is not inspect.Parameter.empty


def kernel_parameters(fn: Callable) -> List[KernelParameter]:
    """The parameters of ``fn`` in order, with which are constexpr and their defaults."""
    fn = fn.fn if is_jit(fn) else fn
    params = inspect.signature(fn).parameters.values()
    return [KernelParameter(p.name, i, is_constexpr_annotation(p.annotation), p.default, p.kind)
            for i, p in enumerate(params)]


@dataclass
class ParsedFunction:
    """A function's AST and the offsets that map AST positions to its file."""
    fn: Callable
    tree: ast.FunctionDef
    filename: str
    line_offset: int  # file line = node.lineno + line_offset
    col_offset: int   # file column (0-based) = node.col_offset + col_offset
    lines: List[str] = field(default_factory=list)  # the function's source lines, as in the file

    def position(self, node: ast.AST) -> Tuple[int, int]:
        """1-based (line, column) of ``node`` in the file."""
        return (node.lineno + self.line_offset,  # type: ignore[attr-defined]
                node.col_offset + self.col_offset + 1)  # type: ignore[attr-defined]

    def source_line(self, lineno: int) -> str:
        index = lineno - self.line_offset - 1
        return self.lines[index].rstrip("\n") if 0 <= index < len(self.lines) else ""


# Source text given for a function (JITFunction._unsafe_update_src, or a function made with
# exec whose text inspect cannot find): used instead of the file's.
_GIVEN_SOURCES: "weakref.WeakKeyDictionary[Callable, str]" = weakref.WeakKeyDictionary()


def set_function_source(fn: Callable, text: str) -> None:
    """Compile ``fn`` from ``text`` (a ``def`` of the same name) from now on."""
    if not isinstance(text, str):
        raise TypeError(f"the source of {fn.__name__} must be a str, got {type(text).__name__}")
    _GIVEN_SOURCES[fn] = text


# code object -> (the file's lines as linecache held them, getsourcelines' answer). The
# source key and the front end both read each function's source, and finding a function's
# extent tokenizes its file (milliseconds per function): a launch in a fresh process reads
# each source once. An answer is reused only while linecache holds the very same lines
# (checkcache drops them when the file changes on disk, as inspect itself would see).
_SOURCE_LINES: Dict[Any, Tuple[List[str], Tuple[List[str], int]]] = {}


def _file_lines(fn: Callable) -> Optional[List[str]]:
    filename = fn.__code__.co_filename
    linecache.checkcache(filename)
    return linecache.getlines(filename, getattr(fn, "__globals__", None)) or None


def function_source(fn: Callable) -> Tuple[List[str], int]:
    """(source lines, first line number) of ``fn``: the given text, else the file's."""
    text = _GIVEN_SOURCES.get(fn)
    if text is not None:
        return text.splitlines(True), fn.__code__.co_firstlineno
    try:
        code = getattr(fn, "__code__", None)
        lines = _file_lines(fn) if code is not None else None
        known = _SOURCE_LINES.get(code) if lines is not None else None
        if known is not None and known[0] is lines:
            return list(known[1][0]), known[1][1]
        found = source_index.block(fn, lines) if lines is not None else None
        if found is None:  # not in the disk index: find the function's extent
            found = source_extent.getsourcelines(fn, lines)
            if lines is not None and code is not None and found[1] == code.co_firstlineno:
                source_index.remember_block(fn, len(found[0]))
        if lines is not None and lines is _file_lines(fn):
            _SOURCE_LINES[code] = (lines, (list(found[0]), found[1]))
        return found
    except (OSError, TypeError) as error:
        raise OSError(f"cannot read the source of {fn!r}: {error}. A function made with exec "
                      f"needs its text: kernel._unsafe_update_src(text), or register it in "
                      f"linecache under the filename given to compile()") from error


def function_source_text(fn: Callable) -> str:
    """The dedented source of ``fn`` from its ``def`` line (decorators left out), as
    Triton's ``JITFunction.src``."""
    lines, _ = function_source(fn)
    text = textwrap.dedent("".join(lines))
    match = re.search(r"^def\s+\w+\s*\(", text, re.MULTILINE)
    return text[match.start():] if match else text


def parse_function(fn: Callable) -> ParsedFunction:
    try:
        lines, start = function_source(fn)
    except OSError as error:
        raise ValueError(str(error)) from error
    source = "".join(lines)
    dedented = textwrap.dedent(source)
    removed = len(lines[0]) - len(dedented.splitlines(True)[0])
    module = ast.parse(dedented)
    tree = module.body[0] if module.body else None
    if not isinstance(tree, ast.FunctionDef):
        raise ValueError(f"{fn!r} is not a plain function definition (def ...)")
    filename = fn.__code__.co_filename
    return ParsedFunction(fn, tree, filename, start - 1, removed, lines)


def lookup_global(fn: Callable, name: str) -> Any:
    """``name`` as ``fn`` sees it from outside its body: a closure cell, then a global.
    Returns the module-private ``_MISSING`` marker when there is none."""
    code = fn.__code__
    if name in code.co_freevars and fn.__closure__:
        try:
            return fn.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:  # an empty cell: the variable is not assigned yet
            return _MISSING
    return fn.__globals__.get(name, _MISSING)


def is_missing(value: Any) -> bool:
    return value is _MISSING
