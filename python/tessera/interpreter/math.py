"""Interpreter handlers of the math ops (ops.def, "math"): exact results, rounded once.

Each function is evaluated in float64 (NumPy; erf through Python's math.erf) and rounded to
the op's type, so an f32 result is the correctly rounded value (up to f64's own last-bit
error, about 2**-29 of an f32 ulp); f64 results are NumPy's, within 2 ulp. The GPU
approximates some of these (exp, exp2, sqrt, rsqrt, fast_divf, and libdevice's within 2 ulp):
how far it may be from this reference is a tolerance of the GPU tests, not a property of the
interpreter. fma rounds once (round to odd in f64, then to f32; exact rationals for f64);
mulhiui computes the full 2N-bit product.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from . import numerics as nm
from .handlers import handles
from .plan import OpInfo, PlanError

_ERF = np.frompyfunc(math.erf, 1, 1)

_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "precise_sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "cos": np.cos,
    "erf": lambda x: _ERF(x).astype(nm.F64), "tanh": np.tanh, "floor": np.floor,
    "ceil": np.ceil,
}


def _float_type(info: OpInfo) -> np.dtype:
    dtype = info.results[0].dtype
    if dtype not in (nm.F32, nm.F64):
        raise PlanError(f"{info.name} takes f32 or f64, got {info.results[0].text}")
    return dtype


@handles(*_UNARY)
def _unary(info: OpInfo):
    dtype = _float_type(info)
    fn = _UNARY[info.name]
    return lambda state, x: np.asarray(fn(np.asarray(x, dtype=nm.F64))).astype(dtype)


@handles("absf")
def _absf(info: OpInfo):
    def absf(state, x):  # clears the sign bit: exact for every value, NaN included
        x = np.asarray(x)
        unsigned = nm.unsigned_of(x.dtype)
        mask = unsigned.type((1 << (x.dtype.itemsize * 8 - 1)) - 1)
        return (x.view(unsigned) & mask).view(x.dtype)

    return absf


@handles("absi")
def _absi(info: OpInfo):
    dtype = info.results[0].dtype
    # Two's complement: the minimum value negates to itself, as LLVM's abs(x, false).
    return lambda state, x: nm.from_bits(np.where(np.asarray(x) < 0, 0 - np.asarray(x), x), dtype)


def _round_to_odd(s, err):
    """The f64 s + err (|err| <= half an ulp of s) rounded to odd: truncated toward zero, with
    the last bit set when inexact; one more rounding to f32 then rounds s + err correctly."""
    toward_zero = np.where(err * s < 0, np.nextafter(s, 0.0), s)
    return (toward_zero.view(np.uint64) | (err != 0).astype(np.uint64)).view(nm.F64)


def _fma_f32(a, b, c):
    p = a.astype(nm.F64) * b.astype(nm.F64)  # exact: 24 + 24 bits fit in 53
    c = c.astype(nm.F64)
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)  # TwoSum: s + err == p + c exactly
    finite = np.isfinite(s)
    odd = _round_to_odd(np.where(finite, s, 0.0), np.where(finite, err, 0.0))
    return np.where(finite, odd, s).astype(nm.F32)


def _fma_f64_element(a: float, b: float, c: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c  # inf/NaN: the same as the rounded expression
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        result = float(exact)  # int / int true division rounds correctly in CPython
    except OverflowError:
        return math.copysign(math.inf, exact)
    return result if result != 0 or exact != 0 else math.copysign(0.0, a * b + c)


_FMA_F64 = np.frompyfunc(_fma_f64_element, 3, 1)


@handles("fma")
def _fma(info: OpInfo):
    dtype = _float_type(info)
    if dtype == nm.F32:
        return lambda state, a, b, c: _fma_f32(np.asarray(a), np.asarray(b), np.asarray(c))
    return lambda state, a, b, c: np.asarray(_FMA_F64(a, b, c)).astype(nm.F64)


@handles("fast_divf")
def _fast_divf(info: OpInfo):
    dtype = _float_type(info)  # the exact quotient; the GPU's div.full.f32 is within 2 ulp
    return lambda state, a, b: np.asarray(np.divide(a, b)).astype(dtype)


@handles("mulhiui")
def _mulhiui(info: OpInfo):
    dtype = info.results[0].dtype
    if dtype.itemsize == 4:
        def high32(state, a, b):
            product = nm.as_unsigned(a).astype(np.uint64) * nm.as_unsigned(b).astype(np.uint64)
            return nm.from_bits((product >> np.uint64(32)).astype(np.uint32), dtype)
        return high32
    if dtype.itemsize != 8:
        raise PlanError(f"mulhiui takes i32 or i64, got {info.results[0].text}")

    def high64(state, a, b):  # 32-bit limbs: no partial sum overflows 64 bits
        a, b = nm.as_unsigned(a), nm.as_unsigned(b)
        low, shift = np.uint64(0xFFFFFFFF), np.uint64(32)
        a_lo, a_hi, b_lo, b_hi = a & low, a >> shift, b & low, b >> shift
        lo_hi = a_lo * b_hi
        hi_lo = a_hi * b_lo
        cross = ((a_lo * b_lo) >> shift) + (hi_lo & low) + lo_hi
        return nm.from_bits((a_hi * b_hi) + (hi_lo >> shift) + (cross >> shift), dtype)

    return high64
