"""Progress lines on stderr: whether a stream redraws a line in place.

The autotuner's line (autotuner/progress.py) and the interpreter's for long launches
(interpreter/progress.py) redraw one line with a carriage return where the stream honours it,
and print a line per step elsewhere (a log file).
"""
from __future__ import annotations

from typing import TextIO


def redraws_in_place(stream: TextIO) -> bool:
    """True for a terminal or a Jupyter kernel's output stream: "\\r" redraws a line there."""
    if bool(getattr(stream, "isatty", lambda: False)()):
        return True
    return type(stream).__module__.startswith("ipykernel")
