"""The autotuner's progress bar on stderr: configs compiled i/n, then timed i/n, best so far.

Shown when stderr is a terminal, or always/never as ``TESSERA_AUTOTUNE_PROGRESS`` says. On a
terminal one line is redrawn in place; elsewhere (a log file) each step is its own line.

    bar = Progress("add_kernel")
    bar.update("compiled", 3, 8)
    bar.update("timed", 1, 7, best="0.0123 ms (BLOCK: 1024, num_warps: 4, num_stages: 3)")
    bar.close()
"""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

from ..config import knobs

_WIDTH = 20


class Progress:
    def __init__(self, title: str, stream: Optional[TextIO] = None) -> None:
        self.title = title
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        setting = knobs.autotune_progress
        self.enabled = self.tty if setting is None else bool(setting)
        self.start = time.perf_counter()
        self._drawn = False

    def update(self, phase: str, done: int, total: int, best: Optional[str] = None) -> None:
        """Shows "``phase`` ``done``/``total``" (configs compiled, or timed) and the best."""
        if not self.enabled:
            return
        filled = _WIDTH * done // max(total, 1)
        bar = "#" * filled + "." * (_WIDTH - filled)
        line = (f"autotune {self.title}: [{bar}] {phase} {done}/{total}"
                f" {time.perf_counter() - self.start:.1f}s")
        if best:
            line += f" | best {best}"
        if self.tty:
            self.stream.write("\r\x1b[2K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
