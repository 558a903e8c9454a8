"""``tl.extra.cuda.convert_custom_float8_sm80`` / ``_sm70``: conversions to and from
``float8e4b15``, the FP8 format Triton converts in software (FP8E4M3 with exponent bias 15, no
infinities or NaNs: every bit pattern is a number).

Triton writes them as PTX inline assembly (the sm80 version clamps with ``min.f16x2``, the sm70
one with compares); both compute the same bits, which this module builds from integer tile ops,
so they run in the interpreter too and compile for every target:

* from float8e4b15: exact (each value is an fp16 value), then to float32 when asked;
* to float8e4b15: float32 is first rounded to float16 toward zero; then the magnitude is
  clamped to 1.75 (NaN and infinities too, their sign kept) and rounded to 3 mantissa bits,
  halfway cases away from zero.

Example::

    y8 = cuda.convert_custom_float8_sm80(x, tl.float8e4b15)   # x: float16 or float32
    x2 = cuda.convert_custom_float8_sm80(y8, tl.float32)
"""
from __future__ import annotations

from typing import Any, Optional

from ... import core
from ...core import _unwrap

_FP16_1_75 = 0x3F00  # the largest magnitude the conversion keeps (bit pattern of 1.75)


def _bits32(x: core.tensor, narrow: core.dtype, mask: int, _semantic) -> core.tensor:
    # The bit pattern of x as a non-negative int32.
    as_int = _semantic.cast(_semantic.bitcast(x, narrow), core.int32)
    return _semantic.bitwise("andi", as_int, mask)


def _from_e4b15(x: core.tensor, _semantic) -> core.tensor:
    bits = _bits32(x, core.int8, 0xFF, _semantic)
    magnitude = _semantic.bitwise("shli", _semantic.bitwise("andi", bits, 0x7F), 7)
    sign = _semantic.bitwise("shli", _semantic.bitwise("andi", bits, 0x80), 8)
    half = _semantic.cast(_semantic.bitwise("ori", magnitude, sign), core.int16)
    return _semantic.bitcast(half, core.float16)


def _to_e4b15(x: core.tensor, _semantic) -> core.tensor:
    if x.dtype == core.float32:
        x = _semantic.cast(x, core.float16, "rtz")
    bits = _bits32(x, core.int16, 0xFFFF, _semantic)
    sign = _semantic.bitwise("andi", bits, 0x8000)
    magnitude = _semantic.bitwise("andi", bits, 0x7FFF)
    # Bit patterns of non-negative fp16 order as their values; NaN and inf are above 1.75.
    too_big = _semantic.compare("gt", magnitude, _FP16_1_75)
    magnitude = _semantic.where(too_big, _FP16_1_75, magnitude)
    rounded = _semantic.add(_semantic.mul(magnitude, 2), 0x80)
    byte = _semantic.bitwise("andi", _semantic.shr(rounded, 8, signed=True), 0x7F)
    byte = _semantic.bitwise("ori", byte, _semantic.shr(sign, 8, signed=True))
    return _semantic.bitcast(_semantic.cast(byte, core.int8), core.float8e4b15)


def _convert(arg: Any, dst_ty: Any, _semantic) -> core.tensor:
    arg, dst_ty = _semantic.to_tensor(_unwrap(arg)), _unwrap(dst_ty)
    source = arg.dtype
    if source == core.float8e4b15:
        if dst_ty not in (core.float16, core.float32):
            raise TypeError(f"convert_custom_float8 converts float8e4b15 to float16 or float32, "
                            f"not {dst_ty}")
        half = _from_e4b15(arg, _semantic)
        return _semantic.cast(half, core.float32) if dst_ty == core.float32 else half
    if source not in (core.float16, core.float32):
        raise TypeError(f"convert_custom_float8 converts float16, float32 or float8e4b15, "
                        f"not {source}")
    return _to_e4b15(arg, _semantic)  # as Triton: dst_ty is float8e4b15 here, not checked


@core.builtin
def convert_custom_float8_sm80(arg: Any, dst_ty: Any, fp_downcast_rounding: Optional[str] = None,
                               _semantic=None) -> core.tensor:
    """float16/float32 -> float8e4b15, or float8e4b15 -> ``dst_ty`` (float16 or float32); see
    the module docstring for the rounding. ``fp_downcast_rounding`` is accepted and, as in
    Triton, not used (float32 rounds toward zero to float16 first).

    Example: ``y8 = cuda.convert_custom_float8_sm80(x, tl.float8e4b15)``
    """
    return _convert(arg, dst_ty, _semantic)


@core.builtin
def convert_custom_float8_sm70(arg: Any, dst_ty: Any, fp_downcast_rounding: Optional[str] = None,
                               _semantic=None) -> core.tensor:
    """The same conversion as ``convert_custom_float8_sm80`` (Triton's sm70 assembly differs
    only in how it clamps). Example: ``x = cuda.convert_custom_float8_sm70(y8, tl.float32)``
    """
    return _convert(arg, dst_ty, _semantic)
