"""``@tessera.heuristics``: meta-parameters computed from the other arguments at launch, as
``triton.heuristics``; stacks above @jit, below or above @autotune.

    @tessera.heuristics({"EVEN_N": lambda args: args["n"] % args["BLOCK"] == 0})
    @tessera.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN_N: tl.constexpr): ...
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Sequence

from ..tracebacks import api_boundary


def decorator_chain(fn) -> List[Any]:
    """The decorators from ``fn`` down to (and including) the JITFunction."""
    chain = [fn]
    while not getattr(chain[-1], "__tessera_jit__", False):
        inner = getattr(chain[-1], "fn", None)
        if inner is None:
            raise TypeError(f"@autotune/@heuristics go above @tessera.jit, got {fn!r}")
        chain.append(inner)
    return chain


class Heuristics:
    """``@tessera.heuristics({"EVEN_N": lambda args: args["n"] % args["BLOCK"] == 0})``: each
    value is computed from the arguments (by name, earlier heuristics included) at launch."""

    def __init__(self, fn, values: Dict[str, Callable[[Dict[str, Any]], Any]]) -> None:
        self.fn = fn
        self.values = dict(values)
        self.jit_fn = decorator_chain(fn)[-1]
        self.arg_names = [p.name for p in self.jit_fn.params]
        self.__name__ = self.jit_fn.__name__
        functools.update_wrapper(self, self.jit_fn.fn)

    def apply(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> Dict[str, Any]:
        kwargs = dict(kwargs)
        for name, rule in self.values.items():
            kwargs[name] = rule({**dict(zip(self.arg_names, args)), **kwargs})
        return kwargs

    @api_boundary
    def run(self, *args, grid, **kwargs):
        return self.fn.run(*args, grid=grid, **self.apply(args, kwargs))

    def warmup(self, *args, grid=None, **kwargs):
        """Compiles for these arguments (heuristic values filled in) without launching."""
        return self.fn.warmup(*args, grid=grid, **self.apply(args, kwargs))

    def __getitem__(self, grid):
        @api_boundary
        def launch(*args, **kwargs):
            # Every keyword of kernel[grid](...) is the kernel's, even one named grid.
            args, kwargs = self.jit_fn._as_run_call(args, kwargs)
            return self.run(*args, grid=grid, **kwargs)
        return launch


def heuristics(values: Dict[str, Callable[[Dict[str, Any]], Any]]):
    """Decorator: meta-parameters computed from the other arguments (as ``triton.heuristics``).

    Example::

        @tessera.heuristics({"EVEN_N": lambda args: args["n"] % args["BLOCK"] == 0})
        @tessera.jit
        def kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN_N: tl.constexpr): ...
    """
    return lambda fn: Heuristics(fn, values)
