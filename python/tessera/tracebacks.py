"""Short tracebacks for kernel errors, in scripts and notebooks.

A compile error or an interpreter fault happens deep inside Tessera (the front end's AST
visitor, the language's builders, the interpreter's evaluator); the kernel author needs the
line of *their* code that launched the kernel and the kernel's own source line (which the
error's message already shows, with a caret). :func:`api_boundary` wraps the public entry
points (a launch, ``compile``): when a :class:`~tessera.errors.TesseraError` leaves them it
drops Tessera's internal frames, so the traceback is the caller's frames, one line of the
boundary and the message. IPython hides the boundary frame too (``__tracebackhide__``).

The underlying error stays chained as ``error.__cause__`` (as Triton's ``CompilationError``
does: code that catches the error reads it), but the display leaves it out: the uncaught-error
hooks (``sys.excepthook``, IPython's handler) print a Tessera error without its "direct cause"
section. ``TESSERA_FULL_TRACEBACK=1`` keeps and shows everything, to debug Tessera itself.

Example::

    @tessera.jit(interpret=True)
    def kernel(x_ptr): ...
    kernel[(1,)](x)   # CompilationError: kernel: Cell In[7], line 3, col 9: ...
"""
from __future__ import annotations

import functools
import os
import sys
import sysconfig
from types import TracebackType
from typing import Callable, Optional, TypeVar

from .errors import TesseraError

F = TypeVar("F", bound=Callable)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIRS = tuple(os.path.abspath(p) + os.sep for p in
                     {sysconfig.get_paths().get("stdlib", ""),
                      sysconfig.get_paths().get("platstdlib", "")} if p)


def is_internal(filename: str) -> bool:
    """True for frames of Tessera's own package or of the standard library (``ast.py``,
    ``functools.py`` between two Tessera frames say nothing to a kernel author)."""
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE_DIR) or path.startswith(_STDLIB_DIRS)


def filter_traceback(tb: Optional[TracebackType]) -> Optional[TracebackType]:
    """The traceback without internal frames (user code called from inside Tessera, such as a
    grid function or a ``tl.constexpr_function``, stays)."""
    kept = []
    while tb is not None:
        if not is_internal(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    result = None
    for entry in reversed(kept):
        result = TracebackType(result, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return result


def _filtering() -> bool:
    from .config import knobs
    return not knobs.full_traceback


def api_boundary(fn: F) -> F:
    """Wraps a public entry point: Tessera errors leaving it carry a short traceback."""
    @functools.wraps(fn)
    def boundary(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841  (read by IPython and pytest)
        try:
            return fn(*args, **kwargs)
        except TesseraError as error:
            if not _filtering():
                raise
            error.__suppress_context__ = True
            _install_display_hooks()
            raise error.with_traceback(filter_traceback(error.__traceback__))  # noqa: B904

    _BOUNDARY_CODES.add(boundary.__code__)
    return boundary  # type: ignore[return-value]


_BOUNDARY_CODES: set = set()


def _without_boundaries(tb: Optional[TracebackType]) -> Optional[TracebackType]:
    kept = []
    while tb is not None:
        if tb.tb_frame.f_code not in _BOUNDARY_CODES:
            kept.append(tb)
        tb = tb.tb_next
    result = None
    for entry in reversed(kept):
        result = TracebackType(result, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return result


class _CauseHidden:
    """Within the block, a Tessera error (and each Tessera error it chains) shows no chained
    cause; the causes are put back afterwards, so code that keeps the error still reads them."""

    def __init__(self, error: BaseException) -> None:
        self.saved = []
        seen = set()
        while isinstance(error, TesseraError) and id(error) not in seen:
            seen.add(id(error))
            self.saved.append((error, error.__cause__))
            error = error.__cause__  # type: ignore[assignment]

    def __enter__(self) -> None:
        if _filtering():
            for error, _ in self.saved:
                error.__cause__ = None
                error.__suppress_context__ = True

    def __exit__(self, *exc: object) -> None:
        for error, cause in self.saved:
            error.__cause__ = cause


_HOOK_INSTALLED = False


def _install_display_hooks() -> None:
    """Installs, once, the display of uncaught Tessera errors without their chained cause:
    around ``sys.excepthook`` (whatever hook is set, which still prints) and in IPython."""
    global _HOOK_INSTALLED
    if not _HOOK_INSTALLED:
        _HOOK_INSTALLED = True
        previous = sys.excepthook

        def excepthook(etype, value, tb):
            with _CauseHidden(value):
                previous(etype, value, tb)

        sys.excepthook = excepthook
    _hide_in_ipython()


def _hide_in_ipython() -> None:
    """In IPython, shows Tessera errors without the boundary's own frame (IPython's
    ``__tracebackhide__`` never hides the innermost frame, which the boundary's is). Installed
    the first time an error passes, and only where no other custom handler is set."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - an IPython without a shell: nothing to do
        return
    if shell is None or getattr(shell, "custom_exceptions", None) != () \
            or not hasattr(shell, "set_custom_exc"):
        return

    def show(shell, etype, value, tb, tb_offset=None):
        # IPython's handler shows the error itself (what it returns is not displayed).
        with _CauseHidden(value):
            shell.showtraceback((etype, value, _without_boundaries(tb)), tb_offset=tb_offset,
                                running_compiled_code=True)

    shell.set_custom_exc((TesseraError,), show)
