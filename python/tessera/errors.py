"""Errors the front end raises while compiling a @tessera.jit kernel to tile IR.

Every error names the kernel and points at file:line:col of the kernel's source, followed by
the source line and a caret under the column, so that a message reads like a compiler's:

    add_kernel: /src/kernels.py:12:11: invalid operands of type pointer<fp32> and fp32
        out = x_ptr + 1.5
              ^
"""
from __future__ import annotations

import sys
from typing import Dict, Optional, Sequence


class TritonError(Exception):
    """Base class of every error Tessera raises for a kernel (``triton.TritonError``), so that
    Triton code catching it keeps working with ``import tessera as triton``."""


class TesseraError(TritonError):
    """Base class of Tessera's own errors; the same class as :class:`TritonError` for callers."""


class CompilationError(TesseraError):
    """A kernel could not be compiled: a type or shape error, an unsupported construct, ...

    Attributes: ``kernel_name``, ``filename``, ``lineno`` (1-based), ``col`` (1-based),
    ``message`` (the bare message), ``source_line`` (the kernel's source line, may be empty).
    """

    def __init__(self, kernel_name: str, filename: str, lineno: int, col: int, message: str,
                 source_line: str = "", notes: Sequence[str] = ()) -> None:
        self.kernel_name = kernel_name
        self.filename = filename
        self.lineno = lineno
        self.col = col
        self.message = message
        self.source_line = source_line.rstrip("\n")
        self.notes = list(notes)
        super().__init__(self._format())

    def _format(self) -> str:
        where = display_location(self.filename, self.lineno, self.col)  # or "Cell In[N], ..."
        text = f"{self.kernel_name}: {where}: {self.message}"
        if self.source_line:
            text += "\n" + self.source_line + "\n" + " " * max(self.col - 1, 0) + "^"
        for note in self.notes:
            text += "\n" + note
        return text

    def with_note(self, note: str) -> "CompilationError":
        """Adds a trailing line (e.g. where an inlined @jit function was called from)."""
        self.notes.append(note)
        self.args = (self._format(),)
        return self

    @classmethod
    def from_core_error(cls, kernel_name: str, error: Exception) -> "CompilationError":
        """Wraps an error of the C++ core (``tessera._tessera.ir.CompileError``, whose message
        starts with the op's "file:line:col: "), reading the source line from the file."""
        import linecache

        where = parse_location(str(error))
        if where is None:
            return cls(kernel_name, "<unknown>", 0, 0, str(error))
        filename, line, col, message = where
        return cls(kernel_name, filename, line, col, message, linecache.getline(filename, line))

    @property
    def location(self) -> str:
        return f"{self.filename}:{self.lineno}:{self.col}"

    def __str__(self) -> str:
        return self._format()


class UnsupportedLanguageConstruct(CompilationError):
    """Python syntax or a call the kernel language does not support (break, print, ...)."""


class CompileTimeAssertionFailure(CompilationError):
    """A ``tl.static_assert`` whose condition is false."""


class StaticAssertionError(Exception):
    """Raised by ``tl.static_assert`` itself; the front end turns it into a
    :class:`CompileTimeAssertionFailure` at the call's location."""


class UnsupportedError(Exception):
    """Raised by language builtins for valid Python that Tessera does not support; the front end
    turns it into an :class:`UnsupportedLanguageConstruct` at the call's location."""


class TritonAPINotSupported(AttributeError, UnsupportedError):
    """A name of Triton's public API that Tessera does not provide yet (``tl.xxx``,
    ``triton.xxx``). An AttributeError, so ``hasattr`` and ``getattr(m, name, default)`` keep
    working; inside a kernel the front end reports it at the source line that uses it."""

    def __init__(self, qualified_name: str, note: str = "") -> None:
        self.qualified_name = qualified_name
        text = f"{qualified_name} is a Triton API that Tessera does not support yet"
        super().__init__(text + (f" ({note})" if note else ""))


class OutOfResources(TesseraError):
    """A kernel needs more of a resource (shared memory, registers, threads) than the device
    has, as ``triton.OutOfResources``: ``required``, ``limit``, ``name``."""

    def __init__(self, required: int, limit: int, name: str) -> None:
        self.required = required
        self.limit = limit
        self.name = name
        super().__init__(required, limit, name)

    def __str__(self) -> str:
        return (f"out of resource: {self.name}, Required: {self.required}, Hardware limit: "
                f"{self.limit}. Reducing block sizes or `num_stages` may help.")

    def __reduce__(self):
        return type(self), (self.required, self.limit, self.name)


class InterpreterError(TesseraError):
    """``triton.InterpreterError``: Triton's interpreter raises it for errors in a kernel run on
    the CPU. Tessera's interpreter raises KernelRuntimeError (a subclass) instead."""

    def __init__(self, error_message: Optional[str] = None) -> None:
        self.error_message = error_message
        super().__init__(error_message or "")

    def __str__(self) -> str:
        message = getattr(self, "error_message", None)  # unset in subclasses with their own init
        return message if message is not None else Exception.__str__(self)


class PTXASError(TesseraError):
    """``triton.runtime.errors.PTXASError``: ptxas refused the generated PTX."""


class AutotunerError(TesseraError):
    """``triton.runtime.errors.AutotunerError``: no config of an autotuned kernel could run."""


def display_location(filename: str, lineno: int, col: int = 0) -> str:
    """``file:line:col``, or IPython's own name of a cell ("Cell In[7], line 3, col 9") when
    the file is a cell's code (IPython names cells' code with temporary file names)."""
    ipython = sys.modules.get("IPython")
    if ipython is not None:
        try:
            shell = ipython.get_ipython()
            named = shell.compile.format_code_name(filename) if shell is not None else None
        except Exception:  # an IPython without the caching compiler: the plain form below
            named = None
        if named:
            label, name = named
            return f"{label} {name}, line {lineno}" + (f", col {col}" if col else "")
    return f"{filename}:{lineno}" + (f":{col}" if col else "")


def parse_location(text: str) -> Optional[tuple[str, int, int, str]]:
    """Splits "file:line:col: message" (the form of the C++ core's errors) into its parts."""
    import re

    match = re.match(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*)$", text, re.S)
    if not match:
        return None
    return match["file"], int(match["line"]), int(match["col"]), match["msg"]


_INTERPRETED: Dict[type, type] = {}


def interpreted(error: CompilationError) -> CompilationError:
    """``error`` as raised by a kernel launched in the interpreter: also an
    :class:`InterpreterError`, as Triton's interpreter raises every error of a kernel it runs
    (so code catching either class works). The class keeps its name and module, so tracebacks
    and ``except CompilationError`` read as before.

    Example::

        try:
            kernel[(1,)](x)          # TESSERA_INTERPRET=1
        except tessera.InterpreterError as error:
            print(error.__cause__)   # the language's error, e.g. a ValueError
    """
    if isinstance(error, InterpreterError):
        return error
    cls = type(error)
    both = _INTERPRETED.get(cls)
    if both is None:
        both = type(cls.__name__, (cls, InterpreterError),
                    {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                     "__doc__": cls.__doc__})
        _INTERPRETED[cls] = both
    copy: CompilationError = Exception.__new__(both)
    copy.__dict__.update(error.__dict__)
    copy.args = error.args
    return copy
