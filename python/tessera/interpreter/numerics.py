"""Exact per-dtype numerics of the tile IR on NumPy: the interpreter's arithmetic ground truth.

Integers are two's complement of their bit width (i1 included: it is a 1-bit integer whose
signed value is 0 or -1); signedness belongs to the op, so unsigned ops reinterpret the bits.
Floats round to nearest even exactly once per op, including the conversions that NumPy and
ml_dtypes would round twice (int -> bf16, f64 -> bf16, f32 -> fp8), through a round-to-odd f32.
"""
from __future__ import annotations

from typing import Callable

import ml_dtypes
import numpy as np

DTYPES = {
    "i1": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "f8e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "f8e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "f8e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
    # Triton's fp8e4b15 (e4m3, bias 15, no NaN or inf) has no NumPy type: its codes, as uint8;
    # only extf / truncf read them (the front end computes fp8 arithmetic in f32).
    "f8e4m3b15": np.dtype(np.uint8),
}
POINTER_DTYPE = np.dtype(np.int64)  # pointers are 64-bit virtual addresses (see memory.py)

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
BOOL = np.dtype(np.bool_)
# Types narrower than f32: arithmetic happens in f32 and rounds back (see round_from_f32).
NARROW_FLOATS = {DTYPES[n] for n in ("f16", "bf16", "f8e4m3", "f8e5m2", "f8e4m3fnuz",
                                      "f8e5m2fnuz")}
# fp8 conversions saturate to the largest finite value, as PTX's cvt.rn.satfinite does.
SATURATING_MAX = {DTYPES["f8e4m3"]: 448.0, DTYPES["f8e5m2"]: 57344.0,
                  DTYPES["f8e4m3fnuz"]: 240.0, DTYPES["f8e5m2fnuz"]: 57344.0}
FNUZ = {DTYPES["f8e4m3fnuz"], DTYPES["f8e5m2fnuz"]}  # one NaN (0x80), no negative zero
_UNSIGNED = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
             8: np.dtype(np.uint64)}
_SIGNED = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32),
           8: np.dtype(np.int64)}


def is_float(dtype: np.dtype) -> bool:
    return dtype in NARROW_FLOATS or dtype in (F32, F64)


def bit_width(dtype: np.dtype) -> int:
    return 1 if dtype == BOOL else dtype.itemsize * 8


def unsigned_of(dtype: np.dtype) -> np.dtype:
    return _UNSIGNED[dtype.itemsize]


# --- integers -------------------------------------------------------------------------------

def as_signed(x):
    """The signed integer value of the bits (an i1 `true` is -1)."""
    if x.dtype == BOOL:
        return -np.asarray(x).astype(np.int8)
    return x


def as_unsigned(x):
    """The unsigned integer value of the bits (an i1 `true` is 1)."""
    if x.dtype == BOOL:
        return np.asarray(x).astype(np.uint8)
    return np.asarray(x).view(_UNSIGNED[x.dtype.itemsize])


def from_bits(r, dtype: np.dtype):
    """Wraps an integer result computed in a same-width (or, for i1, 8-bit) type to `dtype`."""
    if dtype == BOOL:
        return (np.asarray(r) & 1).astype(np.bool_)
    r = np.asarray(r)
    if r.dtype != dtype:
        r = r.astype(_UNSIGNED[dtype.itemsize]).view(dtype)
    return r


def wrap_int(value: int, dtype: np.dtype):
    """A Python int reduced modulo 2**width to a NumPy value of `dtype` (attribute constants)."""
    width = bit_width(dtype)
    bits = value & ((1 << width) - 1)
    if dtype == BOOL:
        return np.bool_(bits)
    if bits >= 1 << (width - 1):
        bits -= 1 << width
    return dtype.type(bits)


def int_cast(x, dtype: np.dtype, unsigned: bool):
    """extsi / extui / trunci: sign- or zero-extend, or keep the low bits."""
    if dtype == BOOL:
        return (np.asarray(x) & 1).astype(np.bool_)
    source = as_unsigned(x) if unsigned else as_signed(x)
    if unsigned and dtype.itemsize > source.dtype.itemsize:
        return source.astype(_UNSIGNED[dtype.itemsize]).view(dtype)
    return np.asarray(source).astype(dtype)


# --- floats ---------------------------------------------------------------------------------

def _round_to_odd_f64(x):
    """64-bit integers -> f64 rounded to odd (truncate, then set the last bit if inexact).

    x = hi * 2**32 + lo exactly, with both parts exact in f64; TwoSum gives the rounded sum and
    its exact error, whose sign says on which side of the rounded value x lies.
    """
    hi = (x >> 32).astype(F64) * 2.0**32
    lo = (x & x.dtype.type(0xFFFFFFFF)).astype(F64)
    s = hi + lo
    bb = s - hi
    err = (hi - (s - bb)) + (lo - bb)
    toward_zero = np.where(err * s < 0, np.nextafter(s, 0.0), s)
    odd = toward_zero.view(np.uint64) | (err != 0).astype(np.uint64)
    return odd.view(F64)


def _round_to_odd_f32(x):
    """Any numeric array -> f32 rounded to odd, so that one more rounding to a format of at most
    22 significand bits equals a single correct rounding of x (no double-rounding error)."""
    if x.dtype.itemsize <= 2 or x.dtype == F32:
        return np.asarray(x).astype(F32)  # exact: every 8/16-bit int and float fits in f32
    if x.dtype in (np.dtype(np.int64), np.dtype(np.uint64)):
        d = _round_to_odd_f64(np.asarray(x))
    else:
        d = np.asarray(x).astype(F64)  # exact for i32, u32, f64
    f = d.astype(F32)
    back = f.astype(F64)
    inexact = (back != d) & np.isfinite(d)
    toward_zero = np.where(np.abs(back) > np.abs(d), np.nextafter(f, np.float32(0)), f)
    odd = toward_zero.view(np.uint32) | inexact.astype(np.uint32)
    return odd.view(F32)


def round_from_f32(x, dtype: np.dtype):
    """An f32 (or f64) result rounded once to `dtype` (fp8 saturates to its largest finite)."""
    limit = SATURATING_MAX.get(dtype)
    if limit is not None:
        x = np.clip(x, -limit, limit)  # NaN stays NaN
    return np.asarray(x).astype(dtype)


def to_float(x, dtype: np.dtype, unsigned: bool = False):
    """sitofp / uitofp / extf / truncf: x's exact value rounded once to nearest even."""
    x = np.asarray(x)
    if x.dtype == BOOL:
        x = as_unsigned(x) if unsigned else as_signed(x)
    elif unsigned:
        x = as_unsigned(x)
    if dtype == F64:
        return x.astype(F64)  # correctly rounded by the hardware conversion
    if dtype == F32:
        if x.dtype.itemsize == 8 and x.dtype.kind in "iu":
            return _round_to_odd_f64(x).astype(F32)
        return x.astype(F32)
    return round_from_f32(_round_to_odd_f32(x), dtype)


def float_to_int(x, dtype: np.dtype, unsigned: bool):
    """fptosi / fptoui: truncate toward zero, saturate to the range, NaN -> 0 (as PTX's
    cvt.rzi.sat; LLVM calls out-of-range results poison, the GPU clamps)."""
    width = bit_width(dtype)
    lo, hi = (0, (1 << width) - 1) if unsigned else (-(1 << (width - 1)), (1 << (width - 1)) - 1)
    t = np.trunc(np.asarray(x).astype(F64))  # exact: every float type fits in f64
    nan = np.isnan(t)
    big = t >= float(hi + 1)  # hi + 1 is a power of two, exact in f64
    small = t < float(lo)
    work = np.dtype(np.uint64) if unsigned else np.dtype(np.int64)
    r = np.where(nan | big | small, 0.0, t).astype(work)
    r = np.where(big, work.type(hi), np.where(small, work.type(lo), r))
    if dtype == BOOL:
        return (r & 1).astype(np.bool_)
    if unsigned:
        return r.astype(_UNSIGNED[dtype.itemsize]).view(dtype)
    return r.astype(dtype)


def float_op(fn: Callable, dtype: np.dtype) -> Callable:
    """Wraps an f32/f64 NumPy function as an op on `dtype`: narrow types compute in f32 and
    round once, which equals IEEE arithmetic in the narrow type for + - * / since f32 has at
    least 2p+2 significand bits for every narrow p."""
    if dtype not in NARROW_FLOATS:
        return fn

    def narrow(*args):
        return round_from_f32(fn(*[np.asarray(a).astype(F32) for a in args]), dtype)

    return narrow


def _order_zeros(r, a, b, take_positive: bool):
    """IEEE 754-2019 orders -0 < +0 in max/min; NumPy returns either zero."""
    both_zero = (a == 0) & (b == 0)
    if not np.any(both_zero):
        return r
    positive_a = ~np.signbit(a)
    pick_a = positive_a if take_positive else ~positive_a
    return np.where(both_zero, np.where(pick_a, a, b), r)


def max_min(kind: str) -> Callable:
    """maxnumf/minnumf (a NaN operand loses) and maximumf/minimumf (NaN propagates)."""
    base = {"maxnumf": np.fmax, "minnumf": np.fmin,
            "maximumf": np.maximum, "minimumf": np.minimum}[kind]
    take_positive = kind.startswith("max")

    def compute(a, b):
        return _order_zeros(base(a, b), a, b, take_positive)

    return compute


def negate_float(x):
    """negf flips the sign bit (exact for every value, NaN included)."""
    x = np.asarray(x)
    unsigned = _UNSIGNED[x.dtype.itemsize]
    sign = unsigned.type(1 << (x.dtype.itemsize * 8 - 1))
    return (x.view(unsigned) ^ sign).view(x.dtype)


CMPF = {
    "oeq": lambda a, b: a == b,
    "one": lambda a, b: (a < b) | (a > b),
    "olt": lambda a, b: a < b,
    "ole": lambda a, b: a <= b,
    "ogt": lambda a, b: a > b,
    "oge": lambda a, b: a >= b,
    "ueq": lambda a, b: ~((a < b) | (a > b)),
    "une": lambda a, b: a != b,
    "ult": lambda a, b: ~(a >= b),
    "ule": lambda a, b: ~(a > b),
    "ugt": lambda a, b: ~(a <= b),
    "uge": lambda a, b: ~(a < b),
    "ord": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    "uno": lambda a, b: np.isnan(a) | np.isnan(b),
}


# --- rounding toward zero and Triton's fp8e4b15 ---------------------------------------------

def to_float_toward_zero(x, dtype: np.dtype):
    """truncf {rounding = "rtz"}: x's exact value truncated toward zero in `dtype` (overflow
    gives the largest finite value, as PTX's cvt.rz; fp8 saturates as to_float does)."""
    x = np.asarray(x)
    with np.errstate(over="ignore"):  # overflow rounds to inf here, then steps back to max
        nearest = np.asarray(to_float(x, dtype))
    exact = x.astype(F64)
    back = nearest.astype(F64)
    away = np.isfinite(exact) & (np.abs(back) > np.abs(exact))
    unsigned = _UNSIGNED[dtype.itemsize]
    bits = nearest.view(unsigned)
    # Sign-magnitude codes: one step toward zero is the magnitude's code minus one.
    stepped = np.where(away, bits - unsigned.type(1), bits).astype(unsigned)
    if dtype in FNUZ:  # -smallest steps to 0x80, which is NaN there: zero has one code
        stepped = np.where(away & (stepped == unsigned.type(0x80)), unsigned.type(0), stepped)
    return stepped.view(dtype)


E4B15 = DTYPES["f8e4m3b15"]


def from_e4b15(codes) -> np.ndarray:
    """The f32 values of fp8e4b15 codes: sign, 4 exponent bits (bias 15), 3 mantissa bits,
    every code finite (0x7f is 1.875)."""
    codes = np.asarray(codes).astype(np.uint32)
    exponent = ((codes >> 3) & 0xF).astype(np.int32)
    fraction = (codes & 0x7).astype(F64)
    value = np.where(exponent == 0, fraction * 2.0**-17,
                     (8 + fraction) * np.exp2(exponent.astype(F64) - 18))
    return np.where(codes & 0x80, -value, value).astype(F32)


def to_e4b15(x) -> np.ndarray:
    """Triton's fp8e4b15 encoding: x truncated toward zero to f16, |x| clamped to 1.75 (NaN
    too), rounded half away from zero to 3 mantissa bits, the sign copied."""
    x = np.asarray(x)
    half = x if x.dtype == np.float16 else to_float_toward_zero(x, np.dtype(np.float16))
    bits = np.asarray(half).view(np.uint16).astype(np.uint32)
    magnitude = np.minimum(bits & 0x7FFF, 0x3F00)
    code = (((magnitude << 1) + 0x80) >> 8) & 0x7F
    return (code | ((bits >> 8) & 0x80)).astype(np.uint8)
