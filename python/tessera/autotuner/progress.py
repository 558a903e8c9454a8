"""The autotuner's progress line: configs compiled i/n, then timed i/n, best so far; then a
summary of the chosen config and its time.

Shown when stderr is a terminal or a Jupyter kernel's stream (ipykernel), or always/never as
``TESSERA_AUTOTUNE_PROGRESS`` says. On a terminal or in a notebook one line is redrawn in place
(a carriage return, which Jupyter's output area honours too); elsewhere (a log file) each step
is its own line.

    bar = Progress("add_kernel")
    bar.update("compiled", 3, 8)
    bar.update("timed", 1, 7, best="0.0123 ms (BLOCK: 1024, num_warps: 4, num_stages: 3)")
    bar.close("best (BLOCK: 1024, num_warps: 4, num_stages: 3): 0.0123 ms")
"""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

from ..config import knobs
from ..terminal import redraws_in_place

_WIDTH = 20


class Progress:
    def __init__(self, title: str, stream: Optional[TextIO] = None) -> None:
        self.title = title
        self.stream = stream if stream is not None else sys.stderr
        self.tty = redraws_in_place(self.stream)
        setting = knobs.autotune_progress
        self.enabled = self.tty if setting is None else bool(setting)
        self.start = time.perf_counter()
        self._drawn = False
        self._width = 0

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
            # Pad over a longer previous line (no ANSI erase: notebooks may not honour it).
            self.stream.write("\r" + line.ljust(self._width))
            self._width = max(self._width, len(line))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._drawn = True

    def close(self, summary: str = "") -> None:
        """Ends the redrawn line; then prints ``summary`` (the chosen config) on its own."""
        if not self.enabled:
            return
        if self.tty and self._drawn:
            self.stream.write("\n")
        if summary:
            self.stream.write(f"autotune {self.title}: {summary}\n")
        self.stream.flush()
