"""Matrix products and transposes: ``tl.dot`` and ``tl.trans`` (and ``x.T``), as Triton's.

The builtins check their arguments here and build the IR ops ``dot`` and ``trans`` through the
front end's ``Semantic`` (its ``create``). The type rules follow triton.language.dot: 2-D
operands of one float dtype whose extents are powers of two >= 16, accumulation in float32
(or float16 for float16 inputs), and for float32 inputs an ``input_precision`` of "tf32"
(the default, as Triton's), "tf32x3" or "ieee".
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import core as tl
from .core import builtin, dtype, tensor

INPUT_PRECISIONS = ("tf32", "tf32x3", "ieee")
DEFAULT_F32_PRECISION = "tf32"


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, tl.constexpr) else value


def _check_operand(x: Any, name: str) -> tensor:
    if not isinstance(x, tensor) or len(x.shape) != 2:
        shape = getattr(x, "shape", None)
        raise ValueError(f"dot's {name} must be a 2-D tile, got {x!r}"
                         + (f" of shape {shape}" if shape is not None else ""))
    for size in x.shape:
        if size < 16 or size & (size - 1):
            raise ValueError(f"dot needs every dimension to be a power of two >= 16, got {name} "
                             f"of shape {x.shape}")
    return x


def _result_dtype(a: tensor, acc: tensor | None, out_dtype: dtype) -> dtype:
    result = acc.dtype if acc is not None else out_dtype
    if not isinstance(result, dtype) or result not in (tl.float32, tl.float16):
        raise TypeError(f"dot accumulates in float32 (or float16), got out_dtype {result}")
    if result == tl.float16 and a.dtype != tl.float16:
        raise TypeError(f"a float16 accumulator needs float16 inputs, got {a.dtype}")
    return result


def build_dot(semantic: Any, a: tensor, b: tensor, acc: tensor | None,
              input_precision: str | None, out_dtype: dtype) -> tensor:
    """The ``dot`` op for ``a @ b + acc`` (see :func:`dot`)."""
    a, b = _check_operand(a, "a (first operand)"), _check_operand(b, "b (second operand)")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"dot's inner dimensions differ: a is {a.shape}, b is {b.shape}")
    if a.dtype != b.dtype:
        raise TypeError(f"dot's operands must have one dtype, got {a.dtype} and {b.dtype}")
    if a.dtype not in (tl.float16, tl.bfloat16, tl.float32):
        raise TypeError(f"dot supports float16, bfloat16 and float32 operands, got {a.dtype}")
    shape = [a.shape[0], b.shape[1]]
    if acc is not None and (not isinstance(acc, tensor) or acc.shape != shape):
        raise ValueError(f"dot's acc must be a tile of shape {shape}, got {acc!r}")
    result = _result_dtype(a, acc, out_dtype)
    if acc is None:
        acc = semantic.full(shape, 0, result)
    attrs = {}
    if a.dtype == tl.float32:
        precision = DEFAULT_F32_PRECISION if input_precision is None else input_precision
        if precision not in INPUT_PRECISIONS:
            raise ValueError(f"input_precision must be one of {', '.join(INPUT_PRECISIONS)}, got "
                             f"{precision!r}")
        attrs["input_precision"] = precision
    elif input_precision not in (None, *INPUT_PRECISIONS):
        raise ValueError(f"input_precision must be one of {', '.join(INPUT_PRECISIONS)}, got "
                         f"{input_precision!r}")
    return semantic.create("dot", [a, b, acc], result, shape, **attrs)


def build_trans(semantic: Any, x: tensor, dims: Sequence[int]) -> tensor:
    """The ``trans`` op permuting ``x``'s dims to ``dims``; when empty, the last two dims
    swap (Triton's batched transpose; a 0-D or 1-D tile is an error)."""
    if not isinstance(x, tensor) or not x.shape:
        raise ValueError(f"trans needs a tile, got {x!r}")
    rank = len(x.shape)
    if not dims and rank < 2:
        raise ValueError(f"trans without dims swaps the last two dims, but the tensor has "
                         f"rank {rank}")
    order = list(dims) if dims else list(range(rank - 2)) + [rank - 1, rank - 2]
    if len(order) != rank:
        raise ValueError(f"trans dims {order} must have one entry per dim (rank {rank})")
    if sorted(order) != list(range(rank)):
        raise ValueError(f"trans dims {order} are not a permutation of 0..{rank - 1}")
    if order == list(range(rank)):
        return x
    return semantic.create("trans", [x], x.dtype, [x.shape[d] for d in order], order=order)


@builtin
def dot(input: tensor, other: tensor, acc: tensor | None = None,
        input_precision: str | None = None, allow_tf32: bool | None = None,
        max_num_imprecise_acc: int | None = None, out_dtype: dtype = tl.float32,
        _semantic=None) -> tensor:
    """The matrix product ``input @ other + acc`` of two 2-D tiles, on tensor cores.

    ``input`` is [M, K] and ``other`` [K, N], both float16, bfloat16 or float32, with M, N and K
    powers of two >= 16. Products accumulate in ``out_dtype`` (float32, or float16 for float16
    inputs); ``acc`` (of that dtype) is added and fixes the result's dtype. For float32 inputs
    ``input_precision`` picks the arithmetic: "tf32" (default: inputs rounded to 10 mantissa
    bits), "tf32x3" (three tf32 products, about float32 accuracy) or "ieee" (exact float32
    products, FMA units). ``allow_tf32=False`` is the old spelling of "ieee".

    Example::

        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
    """
    precision = _unwrap(input_precision)
    if precision is None and _unwrap(allow_tf32) is False:
        precision = "ieee"
    if _unwrap(max_num_imprecise_acc) not in (None, 0):
        raise ValueError("max_num_imprecise_acc applies to fp8 dots, which Tessera does not "
                         "support yet")
    return build_dot(_semantic, input, other, _unwrap(acc), precision, _unwrap(out_dtype))


@builtin
def trans(input: tensor, *dims: int, _semantic=None) -> tensor:
    """Permutes the dims of ``input``: the last two swap by default (the transpose of a 2-D
    tile, batched for 3-D), or to ``dims``. No data moves until a layout needs it; as a dot operand the transposed tile
    is read from shared memory in the other order. Example: ``bt = tl.trans(b)`` or ``b.T``."""
    if len(dims) == 1 and isinstance(_unwrap(dims[0]), (list, tuple)):
        dims = tuple(_unwrap(dims[0]))
    return build_trans(_semantic, input, [_unwrap(d) for d in dims])


@builtin
def permute(input: tensor, *dims: int, _semantic=None) -> tensor:
    """Permutes the dims of ``input`` to ``dims`` (as ``trans`` with explicit dims).
    Example: ``tl.permute(x, (1, 0))``."""
    if len(dims) == 1 and isinstance(_unwrap(dims[0]), (list, tuple)):
        dims = tuple(_unwrap(dims[0]))
    if not dims:
        raise ValueError("permute needs the new order of the dims")
    return build_trans(_semantic, input, [_unwrap(d) for d in dims])
