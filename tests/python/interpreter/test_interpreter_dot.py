# tl.dot, tl.trans and x.T through the front end and the interpreter, against references
# computed here independently: exact sums (math.fsum) of exact products for f16/bf16, tf32
# rounding re-derived from frexp, the tf32x3 split, and the front end's type errors.
import math

import ml_dtypes
import numpy as np
import pytest
import tessera.language as tl
from tessera import errors, frontend, interpreter
from tessera.interpreter.matrix import round_to_tf32

BF16 = np.dtype(ml_dtypes.bfloat16)


def dot_kernel(a_ptr, b_ptr, c_ptr, acc_ptr, M: tl.constexpr, N: tl.constexpr,
               K: tl.constexpr, PRECISION: tl.constexpr, OUT: tl.constexpr,
               TRANSPOSE_B: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    if TRANSPOSE_B:  # b is stored [N, K]
        b = tl.load(b_ptr + rn[:, None] * K + rk[None, :]).T
    else:
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.load(acc_ptr + rm[:, None] * N + rn[None, :])
    c = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=OUT)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


TYPES = {np.dtype(np.float16): "fp16", BF16: "bf16", np.dtype(np.float32): "fp32"}


def run_dot(a, b, acc, precision=None, transpose_b=False):
    m, k = a.shape
    n = b.shape[0] if transpose_b else b.shape[1]
    out_dtype = tl.float16 if acc.dtype == np.float16 else tl.float32
    signature = {"a_ptr": "*" + TYPES[a.dtype], "b_ptr": "*" + TYPES[b.dtype],
                 "c_ptr": "*" + TYPES[acc.dtype], "acc_ptr": "*" + TYPES[acc.dtype]}
    module = frontend.build_module(dot_kernel, signature,
                                   {"M": m, "N": n, "K": k, "PRECISION": precision,
                                    "OUT": out_dtype, "TRANSPOSE_B": transpose_b})
    c = np.full((m, n), np.nan, acc.dtype)
    interpreter.run(module, grid=(1,), args=[a, b, c, acc])
    return c


def exact_reference(a, b, acc):
    """Per element: fsum (exact) of the exact products and the accumulator, in float64."""
    a64, b64, acc64 = (x.astype(np.float64) for x in (a, b, acc))
    out = np.empty(acc.shape, np.float64)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            out[i, j] = math.fsum([*(a64[i] * b64[:, j]), acc64[i, j]])
    return out


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_f16_and_bf16_sum_exactly_then_round_once(rng, dtype):
    a = rng.standard_normal((32, 64)).astype(dtype)
    b = rng.standard_normal((64, 16)).astype(dtype)
    acc = rng.standard_normal((32, 16)).astype(np.float32)
    c = run_dot(a, b, acc)
    ref = exact_reference(a, b, acc)
    # float64 partial sums of at most 65 terms: within a few float64 ulps of the exact sum,
    # so after rounding to float32 at most one float32 ulp away.
    np.testing.assert_array_less(np.abs(c - ref),
                                 np.spacing(np.abs(ref).astype(np.float32)) + 1e-30)


def test_f16_accumulator(rng):
    a = rng.standard_normal((16, 32)).astype(np.float16)
    b = rng.standard_normal((32, 16)).astype(np.float16)
    acc = rng.standard_normal((16, 16)).astype(np.float16)
    c = run_dot(a, b, acc)
    assert c.dtype == np.float16
    ref = exact_reference(a, b, acc)
    assert np.all(np.abs(c.astype(np.float64) - ref) <= np.spacing(np.abs(ref).astype(np.float16)))


def tf32_by_frexp(x: float) -> float:
    """x rounded to 11 significant bits, ties away from zero (cvt.rna.tf32.f32)."""
    if x == 0 or not math.isfinite(x):
        return x
    mantissa, exponent = math.frexp(abs(x))          # |x| = mantissa * 2**exponent, in [0.5, 1)
    scaled = mantissa * 2 ** 11
    rounded = math.floor(scaled + 0.5)                # ties away from zero (on |x|)
    return math.copysign(rounded * 2.0 ** (exponent - 11), x)


def test_tf32_rounding_matches_frexp(rng):
    values = rng.standard_normal(2000).astype(np.float32) * np.float32(1e3)
    bits = values.view(np.uint32)
    ties = ((bits & np.uint32(0xFFFFE000)) | np.uint32(0x1000)).view(np.float32)  # exact halves
    values = np.concatenate([values, ties, np.float32([0.0, -0.0, 1.0, np.inf, -np.inf])])
    rounded = round_to_tf32(values)
    expected = np.array([tf32_by_frexp(float(v)) for v in values], np.float64)
    np.testing.assert_array_equal(rounded.astype(np.float64), expected)
    assert np.isnan(round_to_tf32(np.float32([np.nan])))[0]


def test_f32_precisions(rng):
    a = rng.standard_normal((16, 32)).astype(np.float32)
    b = rng.standard_normal((32, 16)).astype(np.float32)
    acc = np.zeros((16, 16), np.float32)
    exact = exact_reference(a, b, acc)
    ieee = run_dot(a, b, acc, "ieee")
    tf32 = run_dot(a, b, acc, "tf32")
    tf32x3 = run_dot(a, b, acc, "tf32x3")
    default = run_dot(a, b, acc, None)
    np.testing.assert_array_equal(default, tf32)  # tf32 is the default, as Triton's
    # tf32: the exact product of the rounded inputs.
    np.testing.assert_allclose(tf32, exact_reference(round_to_tf32(a), round_to_tf32(b), acc),
                               rtol=1e-6, atol=1e-6)
    rel = lambda c: np.linalg.norm(c - exact) / np.linalg.norm(exact)
    assert rel(ieee) < 1e-7
    assert 1e-5 < rel(tf32) < 3e-3
    assert rel(tf32x3) < 1e-6


def test_transposed_operand(rng):
    a = rng.standard_normal((16, 32)).astype(np.float16)
    bt = rng.standard_normal((64, 32)).astype(np.float16)  # [N, K]
    acc = np.zeros((16, 64), np.float32)
    c = run_dot(a, bt, acc, transpose_b=True)
    np.testing.assert_allclose(c, exact_reference(a, bt.T, acc), rtol=1e-6, atol=1e-6)


def bad_dot(a_ptr, c_ptr, M: tl.constexpr, K: tl.constexpr, OUT: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    tl.store(c_ptr + tl.arange(0, M)[:, None] * M + tl.arange(0, M)[None, :],
             tl.dot(a, tl.trans(a), out_dtype=OUT))


@pytest.mark.parametrize("m,k,ptr,out,message", [
    (16, 8, "*fp16", tl.float32, "powers of two >= 16"),
    (16, 16, "*fp16", tl.float64, "accumulates in float32 or float16"),
    (16, 16, "*bf16", tl.bfloat16, "out_dtype=bfloat16 is unsupported"),
    (16, 16, "*i32", tl.float32, "int8, fp8, float16, bfloat16, float32 or float64"),
])
def test_front_end_rejects_bad_dots(m, k, ptr, out, message):
    with pytest.raises(errors.CompilationError, match=message):
        frontend.build_module(bad_dot, {"a_ptr": ptr, "c_ptr": "*fp32"},
                              {"M": m, "K": k, "OUT": out})
