"""Exact arithmetic with a rounding mode, for the libdevice references (libdevice_ref.py).

libdevice has every basic operation in four IEEE rounding modes (``__nv_fadd_rz``,
``__nv_fdiv_ru``, ``__nv_double2float_rd``, ``__nv_float2int_ru``, ...). NumPy computes only
round-to-nearest, so these are computed per element on exact rationals (``fractions``): the
exact value, then one rounding to the target format in the requested mode.

Modes: "rn" (to nearest, ties to even), "rz" (toward zero), "rd" (toward -inf), "ru" (toward
+inf). Example: ``round_rational(Fraction(1, 3), F32, "ru")`` is the fp32 just above 1/3.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional

import numpy as np

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

# precision (significand bits), minimum normal exponent, maximum exponent
_FORMATS = {F32: (24, -126, 127), F64: (53, -1022, 1023)}
MODES = ("rn", "rz", "rd", "ru")


def _round_integer(q: Fraction, mode: str) -> int:
    """q rounded to an integer in ``mode``."""
    if mode == "rn":
        return round(q)  # ties to even
    if mode == "rz":
        return math.trunc(q)
    return math.floor(q) if mode == "rd" else math.ceil(q)


def round_rational(q: Fraction, dtype: np.dtype, mode: str, negative: Optional[bool] = None):
    """The float of ``dtype`` nearest to ``q`` in ``mode`` (overflow: inf or the largest
    finite value, as IEEE says for the mode). ``negative`` gives the sign of an exact zero."""
    precision, emin, emax = _FORMATS[np.dtype(dtype)]
    if q == 0:
        return dtype.type(-0.0 if negative else 0.0)
    sign = -1 if q < 0 else 1
    magnitude = abs(q)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1  # now 2**exponent <= magnitude < 2**(exponent + 1)
    quantum = max(exponent, emin) - (precision - 1)  # the weight of the last significand bit
    scaled = magnitude / Fraction(2) ** quantum
    # Round the magnitude: toward zero for rz, and for rd/ru by the direction of the sign.
    magnitude_mode = {"rn": "rn", "rz": "rz", "rd": "ru" if sign < 0 else "rz",
                      "ru": "rz" if sign < 0 else "ru"}[mode]
    significand = _round_integer(scaled, magnitude_mode)
    largest = (2 ** precision - 1) * Fraction(2) ** (emax - precision + 1)
    value = significand * Fraction(2) ** quantum
    if value > largest:
        to_infinity = mode == "rn" or (mode == "ru" and sign > 0) or (mode == "rd" and sign < 0)
        return dtype.type(sign * math.inf if to_infinity else sign * float(largest))
    result = math.ldexp(significand, quantum) if significand else 0.0
    return dtype.type(math.copysign(result, sign))


def sqrt_rational(q: Fraction, precision: int = 60) -> Fraction:
    """A rational that rounds like sqrt(q) in every mode to ``precision - 2`` bits: sqrt(q)
    itself when exact, else a value strictly inside the same interval of precision bits."""
    if q == 0:
        return Fraction(0)
    exponent = q.numerator.bit_length() - q.denominator.bit_length()
    shift = precision - exponent // 2  # sqrt(q) * 2**shift has about `precision` bits
    scaled = q * Fraction(4) ** shift
    root = math.isqrt(math.floor(scaled))
    if root * root == scaled:
        return Fraction(root) / Fraction(2) ** shift
    return Fraction(2 * root + 1) / Fraction(2) ** (shift + 1)


def to_integer(x: float, bits: int, signed: bool, mode: str) -> int:
    """cvt of a float to an integer in ``mode``: saturating to the range; NaN gives 0 for 32
    bits and the bit pattern 0x8000000000000000 for 64 bits (what PTX's cvt gives)."""
    if math.isnan(x):
        return 0 if bits == 32 else -(1 << 63)
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if math.isinf(x):
        return high if x > 0 else low
    return min(max(_round_integer(Fraction(x), mode), low), high)
