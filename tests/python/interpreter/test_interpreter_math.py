# The math ops through the interpreter against references computed independently of it:
# mpmath at 60 digits rounded once to the type (so the exact function), exact rationals for
# fma and division, Python integers for mulhiui and absi. Fresh random inputs over wide
# ranges, plus special values, as tensors and as scalars.
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from interpreter_ir import round_exact, run_elementwise

import tessera
import tessera.language as tl

mpmath = pytest.importorskip("mpmath")
mpmath.mp.dps = 60
N = 256

# op -> (reference on an mpmath number, input sampler name)
UNARY = {
    "exp": (mpmath.exp, "exp"), "exp2": (lambda x: mpmath.power(2, x), "exp"),
    "log": (mpmath.log, "positive"), "log2": (lambda x: mpmath.log(x, 2), "positive"),
    "sqrt": (mpmath.sqrt, "positive"), "precise_sqrt": (mpmath.sqrt, "positive"),
    "rsqrt": (lambda x: 1 / mpmath.sqrt(x), "positive"), "sin": (mpmath.sin, "wide"),
    "cos": (mpmath.cos, "wide"), "tanh": (mpmath.tanh, "wide"), "erf": (mpmath.erf, "wide"),
    "floor": (mpmath.floor, "wide"), "ceil": (mpmath.ceil, "wide"),
}


def sample(rng, kind: str, dtype) -> np.ndarray:
    if kind == "exp":  # no overflow: |x| < 80
        values = rng.uniform(-80, 80, N)
    elif kind == "positive":  # magnitudes from 1e-30 to 1e30
        values = np.exp(rng.uniform(-69, 69, N))
    else:
        values = rng.standard_normal(N) * np.exp(rng.uniform(-5, 5, N))
    return values.astype(dtype)


def reference(fn, x: np.ndarray, dtype) -> np.ndarray:
    """fn at 60 digits, rounded to the type (through a double: exact enough for f32, and
    within half an f64 ulp for f64); IEEE's signed zeros (ceil(-0.5) = -0.0) kept."""
    out = []
    for v in x:
        value = float(fn(mpmath.mpf(float(v))))
        out.append(np.copysign(value, v) if value == 0 else value)
    return np.array(out, dtype=np.float64).astype(dtype)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units of the last place (same-sign finite floats)."""
    bits = {4: np.int32, 8: np.int64}[a.dtype.itemsize]
    return np.abs(a.view(bits).astype(np.int64) - b.view(bits).astype(np.int64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_math_is_the_rounded_function(rng, op, dtype):
    fn, kind = UNARY[op]
    x = sample(rng, kind, dtype)
    out = run_elementwise(op, [x], "f32" if dtype == np.float32 else "f64")
    distance = ulp_distance(out, reference(fn, x, dtype))
    where = int(np.argmax(distance))
    if dtype == np.float32:  # a double within an f64 ulp, rounded once: the exact f32 result
        assert distance.max() == 0, (op, x[where], out[where])
    else:  # NumPy's (and Python's) f64 functions are within 2 ulp
        assert distance.max() <= 2, (op, x[where], out[where])


@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "precise_sqrt", "rsqrt", "sin", "floor"])
def test_special_values(op):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0], np.float32)
    out = run_elementwise(op, [x], "f32")
    fn = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "precise_sqrt": np.sqrt,
          "rsqrt": lambda v: 1 / np.sqrt(v), "sin": np.sin, "floor": np.floor}[op]
    with np.errstate(all="ignore"):
        expected = fn(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(out, expected)  # NaN == NaN here
    np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))


@pytest.mark.parametrize("scalar", [False, True])
def test_scalar_and_tensor_agree(rng, scalar):
    x = sample(rng, "positive", np.float32)[:8]
    out = run_elementwise("log2", [x], "f32", scalar=scalar)
    assert ulp_distance(out, reference(UNARY["log2"][0], x, np.float32)).max() == 0


@pytest.mark.parametrize("name,dtype", [("f16", np.float16), ("f32", np.float32),
                                        ("f64", np.float64)])
def test_absf_clears_the_sign_bit(rng, name, dtype):
    x = (rng.standard_normal(N) * 100).astype(dtype)
    x[:4] = np.array([-0.0, np.nan, -np.inf, -np.nan], dtype)
    out = run_elementwise("absf", [x], name)
    assert not np.any(np.signbit(out))
    np.testing.assert_array_equal(out, np.abs(x))


@pytest.mark.parametrize("name,dtype,bits", [("i8", np.int8, 8), ("i32", np.int32, 32),
                                             ("i64", np.int64, 64)])
def test_absi_wraps_the_minimum(rng, name, dtype, bits):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    x[0] = info.min
    out = run_elementwise("absi", [x], name)
    expected = [abs(int(v)) if abs(int(v)) <= info.max else int(v) for v in x]
    np.testing.assert_array_equal(out.astype(object), np.array(expected, dtype=object))


def test_fma_rounds_once_f32(rng):
    # a * b cancels c almost exactly in half the lanes: one rounding differs from two there.
    a = (rng.standard_normal(N) * 1e3).astype(np.float32)
    b = (rng.standard_normal(N) * 1e3).astype(np.float32)
    c = rng.standard_normal(N).astype(np.float32)
    c[::2] = -(a[::2].astype(np.float64) * b[::2]).astype(np.float32)
    out = run_elementwise("fma", [a, b, c], "f32")
    exact = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
             for x, y, z in zip(a, b, c)]
    expected = np.array([round_exact(v, "f32") for v in exact], np.float32)
    np.testing.assert_array_equal(out, expected)
    twice = (a * b + c).astype(np.float32)
    assert np.any(twice != expected)  # the test can tell one rounding from two


def test_fma_rounds_once_f64(rng):
    a, b = rng.standard_normal(N) * 1e8, rng.standard_normal(N) * 1e8
    c = rng.standard_normal(N)
    c[::2] = -(a[::2] * b[::2])
    out = run_elementwise("fma", [a, b, c], "f64")
    exact = [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(out, np.array([float(v) for v in exact]))


def test_fast_divf_is_exactly_rounded_in_the_interpreter(rng):
    a = rng.standard_normal(N).astype(np.float32)
    b = (rng.standard_normal(N) * 10).astype(np.float32)
    out = run_elementwise("fast_divf", [a, b], "f32")
    expected = [round_exact(Fraction(float(x)) / Fraction(float(y)), "f32") for x, y in zip(a, b)]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


@pytest.mark.parametrize("name,dtype,bits", [("i32", np.int32, 32), ("i64", np.int64, 64)])
def test_mulhiui_is_the_high_half_of_the_unsigned_product(rng, name, dtype, bits):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    a[0], b[0] = -1, -1  # (2^N - 1)^2: the largest product
    out = run_elementwise("mulhiui", [a, b], name)
    mask = (1 << bits) - 1
    expected = [((int(x) & mask) * (int(y) & mask)) >> bits for x, y in zip(a, b)]
    np.testing.assert_array_equal(out.view(np.uint32 if bits == 32 else np.uint64).astype(object),
                                  np.array(expected, dtype=object))


# --- fp16 / bf16 through the front end: extf, the op in f32, truncf ----------------------------

@tessera.jit
def narrow_kernel(x_ptr, y_ptr, NAME: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, getattr(tl.math, NAME)(tl.load(x_ptr + offs)))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "erf", "tanh", "rsqrt", "floor"])
def test_narrow_floats_compute_in_f32(rng, name, dtype):
    fn, kind = UNARY[name]
    if kind == "positive":  # within fp16's range
        x = np.exp(rng.uniform(-9, 9, N))
    else:
        x = rng.standard_normal(N) * np.exp(rng.uniform(-2, 2, N))
    x = x.astype(dtype)
    y = np.zeros_like(x)
    tessera.config.knobs.interpret = True
    try:
        narrow_kernel[(1,)](x, y, NAME=name, BLOCK=N)
    finally:
        tessera.config.knobs.reset("interpret")
    # The f32 result, rounded once more to the narrow type (as truncf after the f32 op).
    with np.errstate(over="ignore"):  # exp past fp16's range is inf on both sides
        expected = reference(fn, x.astype(np.float32), np.float32).astype(dtype)
    np.testing.assert_array_equal(y.astype(np.float32), expected.astype(np.float32))
