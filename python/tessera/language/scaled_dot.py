"""``tl.dot_scaled``: the matrix product of two tiles in OCP microscaling (MX) formats
(Triton 3.6).

Each operand is e2m1 (fp4, two per uint8, the first element in the low nibble), e4m3,
e5m2 (uint8 or the fp8 dtype), bf16 or fp16 (uint16 or the dtype); a scale tile gives one
factor per 32 elements along K: an e8m0 code (uint8, the factor 2**(code - 127); 255 is
NaN), or an fp8e4nv value per 16 elements (NVFP4). ``lhs_scale`` is [M, K // 32],
``rhs_scale`` is [N, K // 32] (not transposed). Both scales may be None (factor 1).

Lowering, on every target (as Triton's software emulation where there is no native MX
instruction): decode each operand to float32, multiply by its expanded scale, then one
``tl.dot``: in bfloat16 on tensor cores when every format fits bfloat16 exactly (e2m1, e4m3,
e5m2, bf16: a scaled value is then exact up to bfloat16's range), else in float32 with exact
products ("ieee"). Sums are float32; the result is float32, ``acc`` added.

Example::

    a = tl.load(a_ptrs)                        # [M, K // 2] uint8: e2m1 pairs
    a_scale = tl.load(a_scale_ptrs)            # [M, K // 32] uint8: e8m0
    b = tl.load(b_ptrs)                        # [K, N] float8e4nv
    acc = tl.dot_scaled(a, a_scale, "e2m1", b, None, "e4m3", acc)
"""
from __future__ import annotations

from typing import Any, List, Optional

from . import core as tl
from .core import _unwrap, builtin, tensor
from .matrix import build_dot, build_trans

_FORMATS = {"e2m1": (None, tl.uint8), "e4m3": (tl.float8e4nv, tl.uint8),
            "e5m2": (tl.float8e5, tl.uint8), "bf16": (tl.bfloat16, tl.uint16),
            "fp16": (tl.float16, tl.uint16)}
_BF16_EXACT = ("e2m1", "e4m3", "e5m2", "bf16")


def _bits_to_f32(s: Any, bits: tensor) -> tensor:
    return s.bitcast(s.cast(bits, tl.int32), tl.float32)


def _decode_e2m1(s: Any, nibble: tensor) -> tensor:
    """float32 of 4-bit e2m1 codes (sign, 2 exponent bits with bias 1, 1 mantissa bit):
    0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives."""
    nibble = s.cast(nibble, tl.int32)
    sign = s.bitwise("andi", s.shr(nibble, 3, False), 1)
    exponent = s.bitwise("andi", s.shr(nibble, 1, False), 3)
    mantissa = s.bitwise("andi", nibble, 1)
    # normal: 2**(e - 1) * (1 + m / 2) -> float32 exponent e + 126, top mantissa bit m;
    # e == 0: m * 0.5 -> 0.5 is exponent 126, mantissa 0
    normal = s.bitwise("ori", s.bitwise("shli", s.add(exponent, 126), 23),
                       s.bitwise("shli", mantissa, 22))
    half = s.mul(mantissa, 126 << 23)
    magnitude = s.where(s.compare("eq", exponent, 0), half, normal)
    return _bits_to_f32(s, s.bitwise("ori", magnitude, s.bitwise("shli", sign, 31)))


def _interleave(s: Any, low: tensor, high: tensor, axis: int) -> tensor:
    """[..., X, ...] low/high -> [..., 2X, ...], low first, along ``axis`` of a 2-D tile."""
    joined = s.join(low, high)  # [R, C, 2]
    if axis == 1:
        return s.reshape(joined, [low.shape[0], 2 * low.shape[1]])
    swapped = build_trans(s, joined, (0, 2, 1))  # [R, 2, C]
    return s.reshape(swapped, [2 * low.shape[0], low.shape[1]])


def _operand(s: Any, x: tensor, fmt: str, packed_axis: int, name: str) -> tensor:
    """The operand as float32 values (fp4 pairs unpacked along ``packed_axis``)."""
    if fmt not in _FORMATS:
        raise ValueError(f"dot_scaled: {name}_format must be one of {', '.join(_FORMATS)}, "
                         f"got {fmt!r}")
    if not isinstance(x, tensor) or len(x.shape) != 2:
        raise ValueError(f"dot_scaled: {name} must be a 2-D tile, got {x!r}")
    typed, storage = _FORMATS[fmt]
    if fmt == "e2m1":
        if x.dtype != tl.uint8:
            raise TypeError(f"dot_scaled: e2m1 {name} must be packed as uint8, got {x.dtype}")
        low = _decode_e2m1(s, s.bitwise("andi", x, 15))
        high = _decode_e2m1(s, s.shr(x, 4, False))
        return _interleave(s, low, high, packed_axis)
    if x.dtype != typed:
        if x.dtype != storage:
            raise TypeError(f"dot_scaled: {fmt} {name} must be {typed} or {storage}, got "
                            f"{x.dtype}")
        x = s.bitcast(x, typed)
    return s.cast(x, tl.float32)


def _scale_factors(s: Any, scale: tensor, rows: int, k: int, name: str) -> tensor:
    """[rows, K] float32 factors from a [rows, K // group] scale tile."""
    group = 16 if scale.dtype == tl.float8e4nv else 32
    if not isinstance(scale, tensor) or list(scale.shape) != [rows, k // group]:
        raise ValueError(f"dot_scaled: {name} must be a tensor of shape [{rows}, "
                         f"{k // group}], got {scale!r}")
    if scale.dtype == tl.float8e4nv:
        factors = s.cast(scale, tl.float32)
    elif scale.dtype == tl.uint8:  # e8m0: 2**(code - 127), 0 -> 2**-127, 255 -> NaN
        code = s.cast(scale, tl.int32)
        bits = s.where(s.compare("eq", code, 0), 1 << 22, s.bitwise("shli", code, 23))
        bits = s.where(s.compare("eq", code, 255), 0x7FC00000, bits)
        factors = _bits_to_f32(s, bits)
    else:
        raise TypeError(f"dot_scaled: {name} must be uint8 (e8m0) or float8e4nv, got "
                        f"{scale.dtype}")
    wide = s.broadcast_to(s.expand_dims(factors, 2), [rows, k // group, group])
    return s.reshape(wide, [rows, k])


@builtin
def dot_scaled(lhs: tensor, lhs_scale: Optional[tensor], lhs_format: str, rhs: tensor,
               rhs_scale: Optional[tensor], rhs_format: str, acc: Optional[tensor] = None,
               fast_math: bool = False, lhs_k_pack: bool = True, rhs_k_pack: bool = True,
               out_dtype: Any = tl.float32, _semantic=None) -> tensor:
    """``(lhs * lhs_scale) @ (rhs * rhs_scale) + acc`` in float32, for MX-format tiles (see
    the module docstring). ``lhs_k_pack=False`` / ``rhs_k_pack=False``: e2m1 pairs packed
    along M / N instead of K. ``fast_math`` is accepted (results are always exact here).

    Example::

        c = tl.dot_scaled(a, a_scale, "e4m3", b, b_scale, "e5m2")
    """
    s = _semantic
    lhs_format, rhs_format = str(_unwrap(lhs_format)), str(_unwrap(rhs_format))
    lhs_k_pack, rhs_k_pack = bool(_unwrap(lhs_k_pack)), bool(_unwrap(rhs_k_pack))
    if _unwrap(out_dtype) != tl.float32:
        raise ValueError("dot_scaled: only float32 is supported for out_dtype (as Triton)")
    for fmt, packed, name in ((lhs_format, lhs_k_pack, "lhs"), (rhs_format, rhs_k_pack, "rhs")):
        if not packed and fmt != "e2m1":
            raise ValueError(f"dot_scaled: only e2m1 {name} can be packed along a dimension "
                             "other than K")
    a = _operand(s, lhs, lhs_format, 1 if lhs_k_pack else 0, "lhs")
    b = _operand(s, rhs, rhs_format, 0 if rhs_k_pack else 1, "rhs")
    (m, k), (k_rhs, n) = a.shape, b.shape
    if k != k_rhs:
        raise ValueError(f"dot_scaled: the reduction dimension must hold the same number of "
                         f"elements (lhs {lhs.shape}, rhs {rhs.shape} give K = {k} and {k_rhs})")
    lhs_scale, rhs_scale = _unwrap(lhs_scale), _unwrap(rhs_scale)
    if lhs_scale is not None:
        a = s.mul(a, _scale_factors(s, lhs_scale, m, k, "lhs_scale"))
    if rhs_scale is not None:
        factors = _scale_factors(s, rhs_scale, n, k, "rhs_scale")  # [N, K]
        b = s.mul(b, build_trans(s, factors, (1, 0)))
    acc = _unwrap(acc)
    if acc is not None and (not isinstance(acc, tensor) or acc.dtype != tl.float32):
        raise TypeError(f"dot_scaled: acc must be a float32 tile of shape [{m}, {n}]")
    if lhs_format in _BF16_EXACT and rhs_format in _BF16_EXACT:
        return build_dot(s, s.cast(a, tl.bfloat16), s.cast(b, tl.bfloat16), acc, None,
                         tl.float32)
    return build_dot(s, a, b, acc, "ieee", tl.float32)


__all__: List[str] = ["dot_scaled"]
