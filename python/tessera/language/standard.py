"""The rest of Triton's standard library: flip, sort, topk, bitonic_merge, swizzle2d,
reduce_or, and the functional add / sub / mul.

flip, sort, topk and bitonic_merge run Triton's networks (shape_semantic.py) step for step, so
their results match Triton's bit for bit: sort is a bitonic network (not stable: equal keys
may trade places, as in Triton), NaNs compare false and stay where the network leaves them,
and topk returns the k largest in descending order (computed, as Triton's, through tl.max:
bf16 and types narrower than 32 bits come back as fp32 / int32 when k < the dim's size).
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Dict, Optional, Tuple

from .core import _unwrap, builtin, tensor

TRITON_MAX_TENSOR_NUMEL = 1 << 20


@builtin
def flip(x: tensor, dim: Optional[int] = None, _semantic=None) -> tensor:
    """Reverses ``x`` along ``dim`` (the last dim when None; its size a power of 2), moving
    bits exactly. Example: ``tl.flip(x, 0)``."""
    return _semantic.flip(_unwrap(x), _unwrap(dim))


@builtin
def sort(x: tensor, dim: Optional[int] = None, descending: bool = False,
         _semantic=None) -> tensor:
    """Sorts ``x`` along its last dim (the only ``dim`` supported, as Triton's), ascending
    or ``descending``, with Triton's bitonic network. Example: ``s = tl.sort(keys)``."""
    return _semantic.sort_impl(_unwrap(x), None, _unwrap(dim), _unwrap(descending))


@builtin
def topk(x: tensor, k: int, dim: Optional[int] = None, _semantic=None) -> tensor:
    """The ``k`` largest elements along the last dim, in descending order (``k`` a power of
    2); the result's last dim is ``k``. Example: ``best = tl.topk(scores, 8)``."""
    return _semantic.sort_impl(_unwrap(x), _unwrap(k), _unwrap(dim), True)


@builtin
def bitonic_merge(x: tensor, dim: Optional[int] = None, descending: bool = False,
                  _semantic=None) -> tensor:
    """Merges the bitonic sequences along the last dim (the final stages of a bitonic sort):
    each row that rises then falls (bitonic) comes out sorted. Example:
    ``merged = tl.bitonic_merge(rows)``."""
    return _semantic.bitonic_merge(_unwrap(x), _unwrap(dim), _unwrap(descending))


def _arith(semantic: Any, op: str, a: Any, b: Any) -> Any:
    """``a op b`` in Python when both are compile-time numbers, else through the IR."""
    if not isinstance(a, tensor) and not isinstance(b, tensor):
        return _PY_ARITH[op](a, b)
    return getattr(semantic, op)(a, b)


_PY_ARITH: Dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "floordiv": operator.floordiv, "mod": operator.mod, "minimum": min}


@builtin
def swizzle2d(i: Any, j: Any, size_i: Any, size_j: Any, size_g: Any,
              _semantic=None) -> Tuple[Any, Any]:
    """Maps the row-major index (i, j) of a ``size_i x size_j`` grid to the column-major
    order within groups of ``size_g`` rows (the last group may be shorter), as Triton's:
    for 4x4 and groups of 2, row 0 becomes ``0, 2, 4, 6``. Used to order matmul tiles for L2
    reuse. Example: ``pid_m, pid_n = tl.swizzle2d(pid_m, pid_n, grid_m, grid_n, 8)``."""
    i, j, size_i, size_j, size_g = (_unwrap(v) for v in (i, j, size_i, size_j, size_g))
    ij = _arith(_semantic, "add", _arith(_semantic, "mul", i, size_j), j)
    size_gj = _arith(_semantic, "mul", size_g, size_j)
    off_i = _arith(_semantic, "mul", _arith(_semantic, "floordiv", ij, size_gj), size_g)
    size_g = _arith(_semantic, "minimum", _arith(_semantic, "sub", size_i, off_i), size_g)
    ij = _arith(_semantic, "mod", ij, size_gj)
    new_i = _arith(_semantic, "add", off_i, _arith(_semantic, "mod", ij, size_g))
    new_j = _arith(_semantic, "floordiv", ij, size_g)
    return new_i, new_j


@builtin
def reduce_or(input: tensor, axis: Optional[int], keep_dims: bool = False,
              _semantic=None) -> tensor:
    """The bitwise OR of the integers along ``axis`` (every axis when None). Example:
    ``any_set = tl.reduce_or(flags, 0)``."""
    input = _unwrap(input)
    if not isinstance(input, tensor) or not input.dtype.is_int():
        raise TypeError(f"reduce_or only supports integers, got {input}")
    return _semantic.reduce([input], _unwrap(axis),
                            lambda v: _semantic.bitwise("ori", v[0], v[1]),
                            bool(_unwrap(keep_dims)))[0]


@builtin
def add(x: Any, y: Any, sanitize_overflow: bool = True, _semantic=None) -> tensor:
    """``x + y`` with the operator's promotion rules (integers wrap; ``sanitize_overflow``
    is accepted for Triton's signature: its checks exist only in Triton's debug mode).
    Example: ``tl.add(x, 1)``."""
    return _semantic.add(_unwrap(x), _unwrap(y))


@builtin
def sub(x: Any, y: Any, sanitize_overflow: bool = True, _semantic=None) -> tensor:
    """``x - y`` (see ``add``). Example: ``tl.sub(x, y)``."""
    return _semantic.sub(_unwrap(x), _unwrap(y))


@builtin
def mul(x: Any, y: Any, sanitize_overflow: bool = True, _semantic=None) -> tensor:
    """``x * y`` (see ``add``). Example: ``tl.mul(x, 2.0)``."""
    return _semantic.mul(_unwrap(x), _unwrap(y))
