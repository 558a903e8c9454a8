"""A fresh process's one-time compile set-up, started on a thread by ``import tessera``.

The first compile (or warm-cache load) of a process pays once for importing the compiler, the
front end's code generator and the launcher, for the compiler build id (a hash of the
compiler's Python sources) and, with an empty disk cache, for ``ptxas --version``: ~40 ms of
CPU on the development machine, ~10% of a cold compile (docs/perf/compile_time.md). A program
usually does other work between ``import tessera`` and its first launch (importing torch,
making tensors, initialising CUDA): this thread does the set-up meanwhile.

Rules that keep it invisible:

* It writes nothing: the disk cache is written by the launch that needs it, in the cache
  directory configured then (``ptxas.prefetch_version`` only reads).
* The compile path calls :func:`wait` before it does the same work (jit.py ``_prepare``,
  ``launcher.compiler_build_id``), so the two never run Tessera's code at once; a launch
  right after the import waits for the part still running, no longer than doing it itself.
* ``os.fork`` waits for it first (a child must not inherit a half-imported module's lock),
  and so does the interpreter's exit (its C++ parts must not outlive the interpreter).
* Failures are dropped: the compile path does the same work again and reports errors there.

``TESSERA_PREWARM=0`` turns it off (``knobs.prewarm``); under ``TESSERA_INTERPRET`` it does
not start (no compile will come).
"""
from __future__ import annotations

import atexit
import os
import threading
from typing import Dict, Optional

from ..config import knobs

_thread: Optional[threading.Thread] = None
# What the thread computed ahead of the first compile, taken once (launcher.compiler_build_id).
_PREWARMED: Dict[str, str] = {}
_hooks_installed = False


def _run() -> None:
    try:
        from ..compiler import compiler, ptxas  # the compiler, its C++ passes' binding
        from ..frontend import ast_to_ir  # noqa: F401  (the front end's code generator)
        from ..language import target_info  # noqa: F401  (compile_kernel's)
        from .sources_digest import python_sources_digest
        _PREWARMED["sources digest"] = python_sources_digest()
        assembler = ptxas.find_ptxas()
        if assembler:
            ptxas.prefetch_version(assembler)
        compiler.libdevice_path()
    except Exception:  # the compile path does it again and reports what is wrong
        pass


def start() -> None:
    """Starts the set-up thread once per process (``import tessera`` calls it)."""
    global _thread, _hooks_installed
    if _thread is not None or not knobs.prewarm or knobs.interpret:
        return
    if not _hooks_installed:
        _hooks_installed = True
        os.register_at_fork(before=wait)
        atexit.register(wait)
    _thread = threading.Thread(target=_run, name="tessera-prewarm", daemon=True)
    _thread.start()


def wait() -> None:
    """Returns once the set-up thread has finished (at once when there is none, or when
    called from that thread)."""
    thread = _thread
    if thread is not None and thread is not threading.current_thread():
        thread.join()


def take(name: str) -> Optional[str]:
    """What the thread computed for `name`, once (None if it did not, or it was taken)."""
    return _PREWARMED.pop(name, None)
