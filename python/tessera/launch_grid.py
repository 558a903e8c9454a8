"""The grid of a launch, ``kernel[grid](...)``: an int, a tuple/list of 1 to 3 ints, or a
callable taking the launch's arguments by name (``META``) and returning one; and kernel
parameters that share a name with run()'s own keywords ``grid`` and ``warmup``.

Example::

    kernel[lambda META: (tessera.cdiv(n, META["BLOCK"]),)](x, n, BLOCK=256)
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, Sequence, Tuple, Union

Grid = Union[Sequence[int], Callable[[Dict[str, Any]], Sequence[int]]]

# JITFunction.run()'s own keywords (Triton's): the launch grid and "compile only".
RUN_KEYWORDS = ("grid", "warmup")


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


def as_run_call(kernel: str, signature: inspect.Signature, args: tuple,
                kwargs: Dict[str, Any]) -> Tuple[tuple, Dict[str, Any]]:
    """(args, kwargs) to pass to ``run(*args, grid=..., **kwargs)`` from ``kernel[grid](...)``,
    where every keyword is the kernel's: a kernel parameter named ``grid`` or ``warmup`` given
    by keyword (run() would read it as its own; Triton's launch fails with "got multiple
    values for keyword argument 'grid'") moves to its position, the parameters before it
    taken from the keywords or their defaults."""
    params = list(signature.parameters.values())
    names = [p.name for p in params]
    clash = [name for name in RUN_KEYWORDS if name in kwargs and name in names]
    if not clash:
        return args, kwargs
    for name in clash:
        if names.index(name) < len(args):
            raise TypeError(f"{kernel}: got multiple values for argument '{name}' (signature: "
                            f"{kernel}{signature})")
    positional, kwargs = list(args), dict(kwargs)
    for param in params[len(args):max(names.index(name) for name in clash) + 1]:
        if param.name in kwargs:
            positional.append(kwargs.pop(param.name))
        elif param.default is not inspect.Parameter.empty:
            positional.append(param.default)
        else:
            raise TypeError(f"{kernel}: missing argument '{param.name}' (signature: "
                            f"{kernel}{signature})")
    return tuple(positional), kwargs


def run_keyword_hint(kernel: str, names: Sequence[str], error: Exception) -> str:
    """What to add to a binding error about a parameter named ``grid`` or ``warmup``: in
    kernel.run() / kernel.warmup() those keywords are the launch's."""
    own = [name for name in RUN_KEYWORDS if name in names]
    if not own or not any(repr(name) in str(error) for name in own):
        return ""
    return (f"; in kernel.run() and kernel.warmup() the keywords grid= and warmup= are the "
            f"launch's own (as Triton's): pass the kernel's {' and '.join(map(repr, own))} by "
            f"position, or launch with {kernel}[grid](...), where every keyword is the kernel's")
