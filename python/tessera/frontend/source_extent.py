"""Where a function's source ends, from an AST of its file instead of ``inspect``'s tokenizer.

``inspect.getsourcelines`` finds a function's last line by tokenizing its file from the
``def`` with the pure-Python ``tokenize`` module: about 5 ms per function plus ~13 ms to
compile tokenize's regular expressions once per process, most of a cold compile's source
reading (docs/perf/compile_time.md). ``ast.parse`` (C) gives every statement's last line in
a fraction of that. :func:`getsourcelines` returns exactly what ``inspect.getsourcelines``
returns for a top-level or nested ``def`` (inspect's ``BlockFinder`` rules below), and falls
back to inspect for anything else (lambdas, text that does not parse, a ``def`` not found at
the function's first line): tests/python/frontend/test_source_extent.py compares the two on
every function of the package.
"""
from __future__ import annotations

import ast
import inspect
from typing import Callable, Dict, List, Optional, Tuple

# id of the file's line list (linecache's) -> (the list, {first line: last line of the def})
_ENDS: Dict[int, Tuple[List[str], Dict[int, Optional[int]]]] = {}


def _defs_by_first_line(lines: List[str]) -> Dict[int, Optional[int]]:
    """{first line (its first decorator's, as co_firstlineno): last line of its body (None:
    inspect must decide)} for every ``def`` of the text."""
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return {}
    ends: Dict[int, Optional[int]] = {}
    # A def is a statement: walk the statement lists only (ast.walk would visit every
    # expression node too, several times the work).
    stack: List[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            ends[first] = None if first in ends else _block_end(lines, node)
        for name in _BODIES:
            stack.extend(getattr(node, name, ()))
    return ends


# The fields of a statement that hold statements (or, for try/match, their handlers and
# cases, which hold statements in their own ``body``).
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _block_end(lines: List[str], node: ast.AST) -> Optional[int]:
    """The last line inspect's BlockFinder gives the ``def``: its last statement's last line,
    then any comment lines after it (before the next code) indented at least as far as the
    body's first line. None where the body shares the ``def``'s line (inspect decides)."""
    body = node.body  # type: ignore[attr-defined]
    end = node.end_lineno  # type: ignore[attr-defined]
    if body[0].lineno == node.lineno:  # type: ignore[attr-defined]
        return None
    first_body = lines[body[0].lineno - 1]
    body_col = len(first_body) - len(first_body.lstrip(" \t"))
    if "\t" in first_body[:body_col] or "\f" in first_body[:body_col]:
        return None  # tokenize's tab columns differ from characters: let inspect count
    last = end
    for number in range(end + 1, len(lines) + 1):
        text = lines[number - 1]
        stripped = text.lstrip(" \t\f")
        if not stripped.strip():
            continue
        if not stripped.startswith("#"):
            break
        column = len(text) - len(stripped)
        if "\t" in text[:column] or "\f" in text[:column]:
            return None
        if column >= body_col:
            last = number
    return last


def _ends_of(lines: List[str]) -> Dict[int, Optional[int]]:
    known = _ENDS.get(id(lines))
    if known is not None and known[0] is lines:
        return known[1]
    ends = _defs_by_first_line(lines)
    if len(_ENDS) > 64:  # a process reads few kernel files; keep the latest
        _ENDS.clear()
    _ENDS[id(lines)] = (lines, ends)
    return ends


def _top_level_end(lines: List[str], first: int) -> Optional[int]:
    """The last line of a top-level ``def`` starting at line ``first``, from a parse of its
    lines alone (up to the next line that starts with code at column 0): parsing a whole
    file costs ~1 ms per 30 lines. None when that text does not parse by itself (the next
    column-0 line was inside a string or brackets) or holds no such def."""
    if not lines[first - 1][:1].isalpha() and not lines[first - 1].startswith("@"):
        return None  # an indented def: the whole file is parsed
    stop = first - 1  # past the decorators and the def line
    while stop < len(lines) and not lines[stop].startswith(("def ", "async ")):
        stop += 1
    stop += 1
    while stop < len(lines):
        head = lines[stop][:1]
        if head and head not in " \t\f\r\n#":
            break
        stop += 1
    try:  # blank lines in front keep the file's line numbers
        tree = ast.parse("\n" * (first - 1) + "".join(lines[first - 1:stop]))
    except (SyntaxError, ValueError):
        return None
    if not tree.body or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    node = tree.body[0]
    if min([node.lineno] + [d.lineno for d in node.decorator_list]) != first:
        return None
    return _block_end(lines, node)


def getsourcelines(fn: Callable, lines: Optional[List[str]]) -> Tuple[List[str], int]:
    """``inspect.getsourcelines(fn)`` for a function whose file's text is ``lines`` (as
    linecache holds it); inspect itself where the AST cannot say."""
    code = getattr(fn, "__code__", None)
    if (lines and code is not None and code.co_name != "<lambda>"
            and not hasattr(fn, "__wrapped__")):  # inspect reads the wrapped function
        first = code.co_firstlineno
        end = _top_level_end(lines, first) if 1 <= first <= len(lines) else None
        if end is None:
            end = _ends_of(lines).get(first)
        if end is not None and 1 <= first <= end <= len(lines):
            return lines[first - 1:end], first
    return inspect.getsourcelines(fn)
