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
            where.append(f"at {location or '<unknown location>'}" + (f" ({op})" if op else ""))
        super().__init__(", ".join(where) + ": " + reason if where else reason)


class KernelAssertionError(KernelRuntimeError, AssertionError):
    """A ``tl.device_assert`` failed: the reason holds its message and the first failing
    index. Also an AssertionError, as Triton's interpreter raises."""


class OpFault(Exception):
    """Raised by an op handler: the op's semantics are undefined for these operands."""


class AssertionFault(OpFault):
    """Raised by the `assert` handler; the evaluator turns it into a KernelAssertionError."""
