# fp8 dtypes through the front end and the interpreter, against ml_dtypes and exact rational
# rounding: x.to(fp8) with "rtne" (one rounding, saturating as PTX's cvt.rn.satfinite) and
# "rtz", fp8 -> wider floats exactly, fp8 arithmetic in fp32 rounded once, Triton's fp8e4b15.
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import tessera
import tessera.language as tl

FORMATS = {  # dtype: (ml_dtypes type, largest finite)
    "float8e4nv": (ml_dtypes.float8_e4m3fn, 448.0),
    "float8e5": (ml_dtypes.float8_e5m2, 57344.0),
    "float8e4b8": (ml_dtypes.float8_e4m3fnuz, 240.0),
    "float8e5b16": (ml_dtypes.float8_e5m2fnuz, 57344.0),
}
SOURCES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16,
           "fp64": np.float64}


@tessera.jit(interpret=True)
def convert_kernel(x_ptr, out_ptr, n, DST: tl.constexpr, ROUNDING: tl.constexpr,
                   BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x.to(DST, fp_downcast_rounding=ROUNDING), mask=offs < n)


@tessera.jit(interpret=True)
def widen_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty), mask=offs < n)


@tessera.jit(interpret=True)
def fp8_arith_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.load(y_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * y + 1.5, mask=offs < n)


def spread(rng, n, limit, dtype):
    """Values from far below the smallest fp8 subnormal to past the largest finite, both
    signs, ties of every binade included, plus zeros, infinities and NaN."""
    values = np.exp2(rng.uniform(-22, np.log2(limit) + 2, n)) * rng.choice([-1.0, 1.0], n)
    values[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, limit, -limit * 3, 1.0]
    with np.errstate(over="ignore"):  # -3 * limit overflows fp16 to -inf: a case too
        return values.astype(dtype)


def round_fraction(value: Fraction, fmt, toward_zero: bool) -> float:
    """`value` rounded to the fp8 format by exhaustive search of its finite values (exact)."""
    table = np.arange(256, dtype=np.uint8).view(fmt)
    finite = np.unique(table[np.isfinite(table.astype(np.float64))].astype(np.float64))
    fracs = [Fraction(v) for v in finite]
    below = max((f for f in fracs if f <= value), default=fracs[0])
    above = min((f for f in fracs if f >= value), default=fracs[-1])
    if toward_zero:
        pick = below if value >= 0 else above
    elif value - below != above - value:
        pick = below if value - below < above - value else above
    else:  # a tie: the even code
        pick = below if int(np.float64(float(below)).astype(fmt).view(np.uint8)) % 2 == 0 \
            else above
    return float(pick)


def expected_fp8(x: np.ndarray, fmt, limit: float, toward_zero: bool) -> np.ndarray:
    out = []
    for v in x.astype(np.float64):
        if np.isnan(v):
            out.append(np.nan)
            continue
        clamped = max(-limit, min(limit, v))
        r = round_fraction(Fraction(clamped), fmt, toward_zero)
        out.append(-0.0 if r == 0 and np.signbit(v) else r)
    return np.array(out, np.float64)


def assert_fp8_equal(actual, expected, fnuz: bool):
    actual = np.asarray(actual).astype(np.float64)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    np.testing.assert_array_equal(actual[~nan], expected[~nan])
    if not fnuz:  # fnuz formats have no negative zero
        np.testing.assert_array_equal(np.signbit(actual[~nan]), np.signbit(expected[~nan]))


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("name", list(FORMATS))
def test_to_fp8_rounds_once_and_saturates(rng, name, source, rounding):
    fmt, limit = FORMATS[name]
    n = 389  # not a multiple of the block
    x = spread(rng, n, limit, SOURCES[source])
    out = np.zeros(n, fmt)
    convert_kernel[(tessera.cdiv(n, 128),)](x, out, n, DST=getattr(tl, name),
                                            ROUNDING=rounding, BLOCK=128)
    expected = expected_fp8(x, fmt, limit, rounding == "rtz")
    assert_fp8_equal(out, expected, fnuz=name in ("float8e4b8", "float8e5b16"))


@pytest.mark.parametrize("dest", ["fp32", "fp16", "bf16", "fp64"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_from_fp8_is_exact_for_every_code(name, dest):
    fmt, _ = FORMATS[name]
    codes = np.arange(256, dtype=np.uint8).view(fmt)
    out = np.zeros(256, SOURCES[dest])
    widen_kernel[(2,)](codes, out, 256, BLOCK=128)
    expected = codes.astype(np.float64)
    nan = np.isnan(expected)
    got = out.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan], expected[~nan])
    np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(expected[~nan]))


@pytest.mark.parametrize("name", ["float8e4nv", "float8e5"])
def test_fp8_arithmetic_rounds_once_from_fp32(rng, name):
    fmt, limit = FORMATS[name]
    n = 300
    x = spread(rng, n, limit / 4, np.float64).astype(fmt)
    y = spread(rng, n, 4.0, np.float64).astype(fmt)
    out = np.zeros(n, fmt)
    fp8_arith_kernel[(3,)](x, y, out, n, BLOCK=128)
    # x * y rounds to fp8 (saturating), then + 1.5 in fp8 (1.5 is an fp8 constant).
    product = expected_fp8(x.astype(np.float64) * y.astype(np.float64), fmt, limit, False)
    with np.errstate(invalid="ignore"):
        expected = expected_fp8(product + 1.5, fmt, limit, False)
    assert_fp8_equal(out, expected, fnuz=False)


def e4b15_values() -> np.ndarray:
    """The value of each fp8e4b15 code: bias 15, 3 mantissa bits, no NaN or infinity."""
    codes = np.arange(256)
    exponent, fraction = (codes >> 3) & 0xF, codes & 7
    value = np.where(exponent == 0, fraction * 2.0**-17, (8 + fraction) * 2.0**(exponent - 18.0))
    return np.where(codes & 0x80, -value, value)


def test_fp8e4b15_round_trips_with_tritons_rounding(rng):
    n = 389
    x = np.concatenate([rng.uniform(-2.5, 2.5, n - 40), np.exp2(rng.uniform(-20, 0, 34)),
                        [0.0, -0.0, np.nan, 1.8, -7.0, 1e-9]]).astype(np.float32)
    codes = np.zeros(n, np.uint8)
    convert_kernel[(4,)](x, tessera.reinterpret(codes, tl.float8e4b15), n, DST=tl.float8e4b15,
                         ROUNDING=None, BLOCK=128)
    # Triton's software conversion: to f16 toward zero, clamp |x| to 1.75 (NaN too), round
    # the magnitude half away from zero to 3 mantissa bits, copy the sign.
    values = e4b15_values()
    half = np.abs(x).astype(np.float64)
    expected = []
    for v, sign in zip(half, np.signbit(x)):
        h = Fraction(1.75) if np.isnan(v) else min(Fraction(float(np.float16(v))) if
                                                   float(np.float16(v)) <= v else
                                                   Fraction(float(np.nextafter(np.float16(v),
                                                                              np.float16(0)))),
                                                   Fraction(1.75))
        grid = [Fraction(float(c)) for c in values[:128]]
        best = min(range(128), key=lambda c: (abs(grid[c] - h), -c))  # ties: larger code
        expected.append(best | (0x80 if sign else 0))
    np.testing.assert_array_equal(codes, np.array(expected, np.uint8))
    out = np.zeros(n, np.float32)
    widen_kernel[(4,)](tessera.reinterpret(codes, tl.float8e4b15), out, n, BLOCK=128)
    np.testing.assert_array_equal(out.astype(np.float64), values[codes])


def test_rounding_mode_errors_match_triton():
    x = np.zeros(16, np.float32)
    with pytest.raises(tessera.CompilationError, match="Invalid rounding mode: rtp"):
        convert_kernel[(1,)](x, np.zeros(16, np.float16), 16, DST=tl.float16, ROUNDING="rtp",
                             BLOCK=16)
    with pytest.raises(tessera.CompilationError, match="only for truncating fp conversions"):
        convert_kernel[(1,)](x, np.zeros(16, np.float64), 16, DST=tl.float64, ROUNDING="rtz",
                             BLOCK=16)
