"""Matrix products and transposes: ``tl.dot`` and ``tl.trans`` (and ``x.T``), as Triton's.

The builtins check their arguments here and build the IR ops ``dot`` and ``trans`` through the
front end's ``Semantic`` (its ``create``). The type rules follow triton.language.dot: 2-D or
3-D (batched) operands whose extents are powers of two >= 16 (K >= 32 for 8-bit operands);
float16 / bfloat16 / float32 / float64 operands of one dtype, any two fp8 dtypes, or int8;
accumulation in float32 (float16 for 16-bit or fp8 inputs with ``out_dtype=tl.float16``),
float64 for float64, int32 for int8. For float32 inputs ``input_precision`` is "tf32" (the
default, as Triton's), "tf32x3", "ieee", "bf16x3" or "bf16x6" (bfloat16 parts of each
operand: 3 or 6 bfloat16 products).

How each runs: float16/bfloat16 (and tf32) on tensor cores (wgmma on sm_90a, mma.sync
elsewhere); fp8 operands are widened to float16 (exact) and take that path, except on sm_90a,
where e4m3/e5m2 operands (any mix) into float32 run on wgmma's native fp8 kinds; int8 (exact int32
sums, wrapping as Triton's) on tensor cores too; float64 and "ieee" float32 on the FMA units.
A 3-D dot is unrolled over its batch dim: each batch's operands are picked out of the tiles
by masked sums (exact), multiplied by one 2-D dot (tensor cores) and placed in the result;
B 2-D dots plus O(B^2 (MK + KN + MN)) selects and adds, so it suits small batches.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import core as tl
from .core import builtin, dtype, tensor

INPUT_PRECISIONS = ("tf32", "tf32x3", "ieee", "bf16x3", "bf16x6")
# float32 operands split into bfloat16 parts x = hi + mid + lo (each the bfloat16 rounding of
# what is left): the bf16 products summed, small ones first, as Triton's "bf16x3"/"bf16x6".
_BF16_SPLIT_PRODUCTS = {"bf16x3": ((1, 0), (0, 1), (0, 0)),
                        "bf16x6": ((2, 0), (0, 2), (1, 1), (1, 0), (0, 1), (0, 0))}
DEFAULT_F32_PRECISION = "tf32"
_FLOAT_INPUTS = (tl.float16, tl.bfloat16, tl.float32, tl.float64)


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, tl.constexpr) else value


def _check_operand(x: Any, name: str, rank: int | None, min_size: tuple | None = None) -> tensor:
    if not isinstance(x, tensor) or len(x.shape) not in (2, 3) or (rank and len(x.shape) != rank):
        shape = getattr(x, "shape", None)
        raise ValueError(f"Both inputs must be either 2D or 3D: dot's {name} must be a 2-D "
                         f"tile (or 3-D for a batched dot, both operands alike), got {x!r}"
                         + (f" of shape {shape}" if shape is not None else ""))
    if min_size is not None:  # the interpreter's target: any extents (Triton's (1, 1, 1))
        return x
    min_k = 32 if x.dtype.primitive_bitwidth == 8 else 16
    for index, size in enumerate(x.shape[-2:]):
        is_k = index == (1 if name.startswith("a") else 0)
        least = min_k if is_k else 16
        if size < least or size & (size - 1):
            raise ValueError(f"Input shapes should have M >= 16, N >= 16 and K >= {min_k}: dot "
                             f"needs M and N to be powers of two >= 16 and K >= {min_k}, got "
                             f"{name} of shape {x.shape}")
    return x


def _check_dtypes(a: tensor, b: tensor) -> None:
    if a.dtype.is_fp8() and b.dtype.is_fp8():
        return  # any two fp8 formats, as Triton
    for x, name in ((a, "a (first operand)"), (b, "b (second operand)")):
        if x.dtype not in (*_FLOAT_INPUTS, tl.int8, tl.uint8):
            raise TypeError(f"dot's {name} has unsupported dtype {x.dtype}: dot takes int8, "
                            "fp8, float16, bfloat16, float32 or float64 operands")
    if a.dtype != b.dtype:
        raise TypeError(f"Both operands must be same dtype. Got {a.dtype} and {b.dtype}")
    if a.dtype == tl.uint8:
        raise TypeError("only int8 supported! (dot on uint8 operands: cast them to int8)")


def _result_dtype(a: tensor, acc: tensor | None, out_dtype: Any) -> dtype:
    """Triton's rule: int8 -> int32, float32/bfloat16 -> float32, float64 -> float64, float16
    and fp8 -> out_dtype (float32 or float16); bfloat16 out_dtype is refused."""
    if a.dtype.is_int():  # int8 accumulates in int32 whatever out_dtype says, as Triton's
        out_dtype = tl.int32
    if not isinstance(out_dtype, dtype) or out_dtype not in (tl.float32, tl.float16, tl.int32,
                                                             tl.float64, tl.bfloat16):
        raise TypeError(f"dot's out_dtype must be a dtype (tl.float32 or tl.float16), got "
                        f"{out_dtype!r}")
    if a.dtype.is_int():
        result = tl.int32
    elif out_dtype == tl.bfloat16:
        raise ValueError("out_dtype=bfloat16 is unsupported. Please use out_dtype=float32/"
                         "float16 and cast with `.to(tl.bfloat16)`")
    elif a.dtype in (tl.float32, tl.bfloat16):
        result = tl.float32
    elif a.dtype == tl.float64:
        result = tl.float64
    elif out_dtype in (tl.float16, tl.float32):
        result = out_dtype
    else:
        raise TypeError(f"dot accumulates in float32 or float16 for {a.dtype} operands, got "
                        f"out_dtype {out_dtype}")
    if acc is not None and acc.dtype != result:
        raise TypeError(f"dot's acc must be {result} for {a.dtype} operands (out_dtype "
                        f"{out_dtype}), got {acc.dtype}")
    return result


def build_dot(semantic: Any, a: tensor, b: tensor, acc: tensor | None,
              input_precision: str | None, out_dtype: dtype,
              max_num_imprecise_acc: int | None = None) -> tensor:
    """The ``dot`` op for ``a @ b + acc`` (see :func:`dot`)."""
    # The smallest extents are the target's, as Triton's min_dot_size: the GPU's tensor-core
    # and FMA lowerings need 16 (32 for 8-bit K); the interpreter takes any (1, 1, 1).
    min_size = getattr(semantic, "min_dot_size", None)
    a = _check_operand(a, "a (first operand)", None, min_size)
    b = _check_operand(b, "b (second operand)", len(a.shape), min_size)
    if a.shape[-1] != b.shape[-2] or a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"First input shape ({a.shape}) and second input shape {b.shape} are "
                         "not compatible for matmul (need [M, K] x [K, N], or [B, M, K] x "
                         "[B, K, N])")
    _check_dtypes(a, b)
    shape = [*a.shape[:-1], b.shape[-1]]
    if acc is not None and (not isinstance(acc, tensor) or acc.shape != shape):
        raise ValueError(f"dot's acc must be a tile of shape {shape}, got {acc!r}")
    result = _result_dtype(a, acc, out_dtype)
    if input_precision not in (None, *INPUT_PRECISIONS):
        raise ValueError(f"input_precision must be one of {', '.join(INPUT_PRECISIONS)}, got "
                         f"{input_precision!r}")
    if max_num_imprecise_acc is not None and a.dtype.is_fp8() \
            and max_num_imprecise_acc > a.shape[-1]:
        raise ValueError(f"max_num_imprecise_acc ({max_num_imprecise_acc}) must be <= K "
                         f"({a.shape[-1]})")
    attrs: dict[str, Any] = {}
    if a.dtype.is_fp8() or b.dtype.is_fp8():
        # Every fp8 value is exact in float16 and every product of two is exact in float32:
        # the float16 tensor-core product gives the fp8 product's value. On sm_90a the
        # compiler multiplies e4m3/e5m2 tiles natively instead (wgmma k32, accelerate_matmul),
        # whose accumulator keeps fewer bits than float32 unless max_num_imprecise_acc (<= K)
        # asks for the sums to be added into float32 every that many products (Triton's
        # rule; without it, Hopper's default 2**30: never). The f16 path always sums in f32.
        if max_num_imprecise_acc is not None and len(shape) == 2:
            attrs["max_num_imprecise_acc"] = max_num_imprecise_acc
        a, b = semantic.cast(a, tl.float16), semantic.cast(b, tl.float16)
    if acc is None:
        acc = semantic.full(shape, 0, result)
    if len(shape) == 3:
        return _batched_dot(semantic, a, b, acc, result, input_precision)
    if a.dtype == tl.float32:
        attrs["input_precision"] = DEFAULT_F32_PRECISION if input_precision is None \
            else input_precision
    if attrs.get("input_precision") in _BF16_SPLIT_PRODUCTS:
        return _bf16_split_dot(semantic, a, b, acc, attrs["input_precision"])
    return semantic.create("dot", [a, b, acc], result, shape, **attrs)


def _bf16_parts(semantic: Any, x: tensor, count: int) -> list:
    parts, rest = [], x
    for _ in range(count):
        part = semantic.cast(rest, tl.bfloat16)
        parts.append(part)
        rest = semantic.sub(rest, semantic.cast(part, tl.float32))
    return parts


def _bf16_split_dot(semantic: Any, a: tensor, b: tensor, acc: tensor, precision: str) -> tensor:
    """float32 ``a @ b + acc`` as bfloat16 tensor-core products of a's and b's parts."""
    products = _BF16_SPLIT_PRODUCTS[precision]
    count = 1 + max(max(pair) for pair in products)
    a_parts, b_parts = _bf16_parts(semantic, a, count), _bf16_parts(semantic, b, count)
    for i, j in products:
        acc = semantic.create("dot", [a_parts[i], b_parts[j], acc], tl.float32, acc.shape)
    return acc


def _batched_dot(semantic: Any, a: tensor, b: tensor, acc: tensor, result: dtype,
                 input_precision: str | None) -> tensor:
    """[B, M, K] x [B, K, N]: per batch index i (unrolled), a[i] and b[i] picked out by a masked
    sum over the batch dim (exact: the other terms are 0), one 2-D dot (tensor cores, the
    precision rules of 2-D dots), and its result placed at out[i]."""
    batch = a.shape[0]
    index = semantic.arange(0, batch)
    out = acc
    for i in range(batch):
        picked = []
        for x in (a, b):
            here = semantic.compare("eq", semantic.reshape(index, [batch, 1, 1]), i)
            zero = semantic.full(x.shape, 0, x.dtype)
            kept = semantic.where(semantic.broadcast_to(here, x.shape), x, zero)
            picked.append(semantic.reduce([kept], 0, semantic.sum_combine, False)[0])
        acc_i = semantic.reduce([semantic.where(
            semantic.broadcast_to(semantic.compare("eq", semantic.reshape(index, [batch, 1, 1]),
                                                   i), acc.shape),
            acc, semantic.full(acc.shape, 0, result))], 0, semantic.sum_combine, False)[0]
        product = build_dot(semantic, picked[0], picked[1], acc_i, input_precision, result)
        here = semantic.compare("eq", semantic.reshape(index, [batch, 1, 1]), i)
        out = semantic.where(semantic.broadcast_to(here, acc.shape),
                             semantic.expand_dims(product, 0), out)
    return out


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
    """The matrix product ``input @ other + acc`` of two 2-D tiles, or of two 3-D tiles
    ([B, M, K] x [B, K, N], one product per leading index).

    Operands: float16, bfloat16, float32 or float64 (one dtype), int8, or any two fp8 dtypes;
    M, N and K powers of two >= 16 (K >= 32 for 8-bit operands). The result (and ``acc``,
    which is added) is int32 for int8, float64 for float64, float32 for float32 and bfloat16,
    and ``out_dtype`` (float32 or float16) for float16 and fp8. For float32 inputs
    ``input_precision`` picks the arithmetic: "tf32" (default: inputs rounded to 10 mantissa
    bits), "tf32x3" (three tf32 products, about float32 accuracy), "ieee" (exact float32
    products, FMA units), "bf16x3" / "bf16x6" (each operand split into 2 / 3 bfloat16 parts,
    3 / 6 bfloat16 tensor-core products); ``allow_tf32=False`` is the old spelling of "ieee".
    ``max_num_imprecise_acc`` (fp8 only, <= K): on sm_90a's native fp8 products, the number
    of products summed in the tensor core's narrower accumulator before each addition into
    float32 (default: no such additions, as Triton's on Hopper); elsewhere the sums are
    always full float32.

    Example::

        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
    """
    precision = _unwrap(input_precision)
    if precision is None and _unwrap(allow_tf32) is False:
        precision = "ieee"
    imprecise = _unwrap(max_num_imprecise_acc)
    if imprecise is not None and not isinstance(imprecise, int):
        raise TypeError(f"max_num_imprecise_acc must be a constexpr int, got {imprecise!r}")
    return build_dot(_semantic, input, other, _unwrap(acc), precision, _unwrap(out_dtype),
                     imprecise)


@builtin
def trans(input: tensor, *dims: int, _semantic=None) -> tensor:
    """Permutes the dims of ``input``: the last two swap by default (the transpose of a 2-D
    tile, batched for 3-D), or to ``dims``. No data moves until a layout needs it; as a dot
    operand the transposed tile is read from shared memory in the other order.
    Example: ``bt = tl.trans(b)`` or ``b.T``."""
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
