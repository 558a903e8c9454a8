"""The grid of a launch, ``kernel[grid](...)``: an int, a tuple/list of 1 to 3 ints, or a
callable taking the launch's arguments by name (``META``) and returning one.

Example::

    kernel[lambda META: (tessera.cdiv(n, META["BLOCK"]),)](x, n, BLOCK=256)
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Sequence, Union

Grid = Union[Sequence[int], Callable[[Dict[str, Any]], Sequence[int]]]


class GridKeyError(KeyError):
    """A grid callable read a key that the launch's arguments do not have. A KeyError (code
    catching one still does), whose text reads as a sentence (KeyError's own quotes it)."""

    def __init__(self, message: str, key: Any) -> None:
        super().__init__(message)
        self.key = key

    def __str__(self) -> str:
        return str(self.args[0])


def check_grid(kernel: str, grid: Any, what: str) -> None:
    """A grid is an int or a tuple/list of 1 to 3 ints (their values are checked at launch)."""
    if isinstance(grid, bool) or not isinstance(grid, (int, tuple, list)) and \
            not hasattr(grid, "__index__"):
        raise TypeError(f"{kernel}: the grid must be an int or a tuple of 1 to 3 ints (or a "
                        f"callable returning one); {what} {type(grid).__name__} {grid!r}")


def call_grid(kernel: str, grid: Callable, meta: Dict[str, Any]) -> Any:
    """``grid(meta)``; a KeyError for a key ``meta`` lacks names the kernel, the key and the
    keys there are (the kernel's parameters, constexprs and autotuner config values included).
    The C++ fast path leaves a launch whose grid raised a KeyError here, to be told so."""
    try:
        return grid(meta)
    except KeyError as error:
        key = error.args[0] if len(error.args) == 1 else None
        if isinstance(error, GridKeyError) or not isinstance(key, str) or key in meta:
            raise  # not a read of meta (another dict of the grid's own, say)
        there = ", ".join(meta) or "none"
        raise GridKeyError(f"{kernel}: the grid callable reads META[{key!r}], which is not a "
                           f"parameter of the kernel; META holds the kernel's parameters by name "
                           f"(an autotuner config's values among them): {there}", key) from error
