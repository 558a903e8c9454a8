"""Source text of kernels whose ``def`` ran from a string (``exec(text)``), found when decorated.

The front end compiles a kernel from its Python source. A kernel built from a template at run
time (``exec(src, globals(), namespace)``, as Triton's own tests and code generators do) has no
file that ``inspect`` can read, and the string is gone once ``exec`` returns. While the
decorator runs, though, the code that called ``exec`` is still on the stack, usually with the
text in one of its local variables. Each candidate string is compiled under the same file name
and kept only if it yields exactly this function's code object (same bytecode, constants, names,
line table), so a wrong text is never taken. Text that cannot be found this way can still be
given with ``kernel._unsafe_update_src(text)``.

Example::

    src = template.replace("EXPR", "x * 2")
    namespace = {}
    exec(src, globals(), namespace)      # src defines `@tessera.jit def kernel(...)`
    namespace["kernel"][(1,)](...)       # compiles from `src`
"""
from __future__ import annotations

import __future__
import ast
import inspect
import sys
import types
from typing import Callable, Iterator, Optional

from .source import _GIVEN_SOURCES, set_function_source

# Frames above the decorator searched for the text (the exec'd code, then its callers).
_MAX_FRAMES = 12
# exec() compiles with its caller's __future__ flags; try without and with the common one.
_FUTURE_FLAGS = (0, __future__.annotations.compiler_flag)


def _nested_codes(code: types.CodeType) -> Iterator[types.CodeType]:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _nested_codes(const)


def _defines(text: str, filename: str, target: types.CodeType) -> bool:
    """Whether compiling ``text`` as ``filename`` yields ``target`` among its functions."""
    for flags in _FUTURE_FLAGS:
        try:
            module = compile(text, filename, "exec", flags=flags, dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
        if any(code == target for code in _nested_codes(module)):
            return True
    return False


def _function_text(text: str, fn: Callable) -> Optional[str]:
    """The lines of ``text`` holding ``fn``'s definition, decorators included."""
    first = fn.__code__.co_firstlineno
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn.__name__:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if start == first:
                lines = text.splitlines(True)
                return "".join(lines[start - 1:node.end_lineno])
    return None


def remember_exec_source(fn: Callable) -> None:
    """If ``fn`` was defined by code run from a string, find that string on the stack and keep
    ``fn``'s text for the front end (nothing happens for functions defined in files)."""
    code = getattr(fn, "__code__", None)
    if code is None or fn in _GIVEN_SOURCES:
        return
    filename = code.co_filename
    if not (filename.startswith("<") and filename.endswith(">")):
        return
    try:
        inspect.getsourcelines(fn)  # registered in linecache: nothing to do
        return
    except (OSError, TypeError):
        pass
    frame: Optional[types.FrameType] = sys._getframe(1)
    seen = set()
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return
        for value in list(frame.f_locals.values()):
            if (isinstance(value, str) and id(value) not in seen
                    and f"def {fn.__name__}" in value):
                seen.add(id(value))
                if _defines(value, filename, code):
                    text = _function_text(value, fn)
                    if text is not None:
                        set_function_source(fn, text)
                        return
        frame = frame.f_back
