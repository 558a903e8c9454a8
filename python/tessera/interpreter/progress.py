"""A sign of life for long interpreted launches: after ``DELAY_S`` seconds, one line on stderr,
redrawn in place, says how many programs of the grid have run.

Short runs print nothing. Shown when stderr redraws lines in place (a terminal, or a Jupyter
kernel's stream), or always/never as ``TESSERA_INTERPRET_PROGRESS`` says::

    interpret add_kernel: program 40960/65536 (62%) 3.1s
"""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

from ..config import knobs
from ..terminal import redraws_in_place

DELAY_S = 2.0      # runs shorter than this stay silent
INTERVAL_S = 0.25  # redraw at most this often
CHECK_EVERY = 64   # programs between clock reads (a program takes ~0.1 ms at least)


class GridProgress:
    def __init__(self, name: str, total: int, stream: Optional[TextIO] = None) -> None:
        self.name = name
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        setting = knobs.interpret_progress
        self.in_place = redraws_in_place(self.stream)
        self.enabled = (self.in_place if setting is None else bool(setting)) \
            and total > CHECK_EVERY
        self.start = time.perf_counter()
        self._next = self.start + DELAY_S
        self._drawn = False

    def tick(self, done: int) -> None:
        """Called every CHECK_EVERY programs with the number run so far."""
        now = time.perf_counter()
        if now < self._next:
            return
        self._next = now + INTERVAL_S
        self._draw(done, now)

    def _draw(self, done: int, now: float) -> None:
        line = (f"interpret {self.name}: program {done}/{self.total} "
                f"({100 * done // self.total}%) {now - self.start:.1f}s")
        self.stream.write(("\r" + line) if self.in_place else (line + "\n"))
        self.stream.flush()
        self._drawn = True

    def close(self, done: int) -> None:
        """The final count, then a newline, when a line was drawn."""
        if self._drawn:
            self._draw(done, time.perf_counter())
            if self.in_place:
                self.stream.write("\n")
                self.stream.flush()
