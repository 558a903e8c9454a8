"""Errors of the tile-IR interpreter.

KernelRuntimeError is what users see: it names the kernel, the program id and the op's source
location ("file:line:col"), like a GPU fault would if GPUs reported them. OpFault is internal:
op handlers raise it and the evaluator turns it into a KernelRuntimeError with that context.
"""
from __future__ import annotations

from typing import Optional, Tuple

from ..errors import InterpreterError


class KernelRuntimeError(RuntimeError, InterpreterError):
    """A kernel did something undefined while interpreted (out-of-bounds access, division by
    zero, ...), or could not be interpreted at all.

    Also ``triton.InterpreterError``, which Triton's interpreter raises for the same failures.
    Attributes: kernel (name), pid (the program id tuple, None before any program ran),
    op (the op's name), location ("file:line:col", may be empty), reason (the message alone).
    """

    def __init__(self, reason: str, kernel: str = "", pid: Optional[Tuple[int, ...]] = None,
                 op: str = "", location: str = "") -> None:
        self.reason = reason
        self.kernel = kernel
        self.pid = pid
        self.op = op
        self.location = location
        where = []
        if kernel:
            where.append(f"kernel '{kernel}'")
        if pid is not None:
            where.append(f"program {pid}")
        if location or op:
            shown = _shown_location(location) if location else '<unknown location>'
            where.append(f"at {shown}" + (f" ({op})" if op else ""))
        super().__init__((", ".join(where) + ": " + reason if where else reason)
                         + _source_excerpt(location))


def _shown_location(location: str) -> str:
    """"file:line:col", or "Cell In[N], line L, col C" for a notebook cell's code."""
    from ..errors import display_location, parse_location
    parsed = parse_location(location + ": ")
    return display_location(*parsed[:3]) if parsed else location


def _source_excerpt(location: str) -> str:
    """The kernel's source line at ``location`` with a caret under the column (as compile
    errors show it), or "" when the source is not available."""
    import linecache
    from ..errors import parse_location
    parsed = parse_location(location + ": ") if location else None
    if parsed is None:
        return ""
    line = linecache.getline(parsed[0], parsed[1]).rstrip("\n")
    return f"\n{line}\n{' ' * max(parsed[2] - 1, 0)}^" if line.strip() else ""


class KernelAssertionError(KernelRuntimeError, AssertionError):
    """A ``tl.device_assert`` failed: the reason holds its message and the first failing
    index. Also an AssertionError, as Triton's interpreter raises."""


class OpFault(Exception):
    """Raised by an op handler: the op's semantics are undefined for these operands."""


class AssertionFault(OpFault):
    """Raised by the `assert` handler; the evaluator turns it into a KernelAssertionError."""
