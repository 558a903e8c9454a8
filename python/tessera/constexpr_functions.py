"""Python functions kernels may call on compile-time values, as Triton's ``constexpr_function``
(``triton.next_power_of_2`` is one): on the host they are plain functions; inside a kernel the
front end calls them while compiling, on constexpr arguments only, and uses the result as a
constexpr.

Example::

    @tessera.constexpr_function
    def block_for(n):
        return min(1024, tessera.next_power_of_2(n))

    @tessera.jit
    def kernel(x_ptr, N: tl.constexpr):
        BLOCK: tl.constexpr = block_for(N)
"""
from __future__ import annotations

import functools
from typing import Callable


class ConstexprFunction:
    """A Python function a kernel may call on compile-time values (``triton.constexpr_function``):
    the front end calls it while compiling and uses its result as a constexpr; on the host it
    is the plain function. Example::

        @tessera.constexpr_function
        def block_for(n):
            return min(1024, tessera.next_power_of_2(n))
    """

    __tessera_constexpr_function__ = True

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __get__(self, obj, objclass=None):
        return self if obj is None else functools.partial(self, obj)


def constexpr_function(fn: Callable) -> ConstexprFunction:
    """Decorator: ``fn`` may be called inside kernels on compile-time values (see
    :class:`ConstexprFunction`)."""
    return ConstexprFunction(fn)


def next_power_of_2(n: int) -> int:
    """The smallest power of 2 >= ``n``, exactly as ``triton.next_power_of_2``: the bits of
    ``n - 1`` smeared right over 64 bits, plus one; so 0 gives 0, 1 gives 1, 5 gives 8.

    Example: ``BLOCK = tessera.next_power_of_2(n_cols)``.
    """
    n -= 1
    for shift in (1, 2, 4, 8, 16, 32):
        n |= n >> shift
    return n + 1
