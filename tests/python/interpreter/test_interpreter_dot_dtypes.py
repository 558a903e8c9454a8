# tl.dot beyond f16/bf16/f32, through the front end and the interpreter, on ragged shapes
# (M, N, K not multiples of the blocks) against references computed here: int8 with exact
# int32 sums (wrapping), any two fp8 formats against float64 of the fp8 values, float64, the
# 3-D (batched) dot, out_dtype, and Triton's type errors.
import math

import ml_dtypes
import numpy as np
import pytest

import tessera
import tessera.language as tl

FP8 = {"fp8e4nv": ml_dtypes.float8_e4m3fn, "fp8e5": ml_dtypes.float8_e5m2}


@tessera.jit(interpret=True)
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, OUT: tl.constexpr, IMPRECISE: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=c_ptr.dtype.element_ty)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0)
        acc = tl.dot(a, b, acc, out_dtype=OUT, max_num_imprecise_acc=IMPRECISE)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def run_matmul(a, b, out_dtype, blocks=(32, 16, 32), out=tl.float32, imprecise=None):
    m, k = a.shape
    n = b.shape[1]
    c = np.full((m, n), 7, out_dtype)
    bm, bn, bk = blocks
    matmul_kernel[(tessera.cdiv(m, bm), tessera.cdiv(n, bn))](
        a, b, c, m, n, k, BM=bm, BN=bn, BK=bk, OUT=out, IMPRECISE=imprecise)
    return c


def fsum_matmul(a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return np.array([[math.fsum(a64[i] * b64[:, j]) for j in range(b.shape[1])]
                     for i in range(a.shape[0])])


def test_int8_dot_sums_exactly_in_int32(rng):
    m, n, k = 45, 37, 150
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    c = run_matmul(a, b, np.int32)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("a_name,b_name", [("fp8e4nv", "fp8e4nv"), ("fp8e5", "fp8e5"),
                                           ("fp8e4nv", "fp8e5")])
def test_fp8_dot_is_the_exact_products_rounded_once(rng, a_name, b_name):
    m, n, k = 40, 33, 100
    a = rng.normal(0, 2, (m, k)).astype(FP8[a_name])
    b = rng.normal(0, 2, (k, n)).astype(FP8[b_name])
    c = run_matmul(a, b, np.float32, imprecise=32)
    expected = fsum_matmul(a, b)  # float64 of the fp8 values, summed exactly
    np.testing.assert_allclose(c, expected, rtol=2e-6, atol=1e-5)


def test_fp8_dot_into_float16(rng):
    a = rng.normal(0, 1, (32, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.normal(0, 1, (64, 16)).astype(ml_dtypes.float8_e4m3fn)
    c = run_matmul(a, b, np.float16, blocks=(32, 16, 64), out=tl.float16)
    np.testing.assert_allclose(c.astype(np.float64), fsum_matmul(a, b), rtol=2e-3, atol=2e-3)


def test_float64_dot(rng):
    a, b = rng.normal(size=(20, 50)), rng.normal(size=(50, 19))
    c = run_matmul(a, b, np.float64)
    np.testing.assert_allclose(c, fsum_matmul(a, b), rtol=1e-13, atol=1e-13)


@tessera.jit(interpret=True)
def batched_kernel(a_ptr, b_ptr, c_ptr, acc_ptr, B: tl.constexpr, M: tl.constexpr,
                   N: tl.constexpr, K: tl.constexpr, OUT: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, M)[None, :, None]
    rn = tl.arange(0, N)[None, None, :]
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rb * M * K + rm * K + rk[None, None, :])
    b = tl.load(b_ptr + rb * K * N + rk[None, :, None] * N + rn)
    acc = tl.load(acc_ptr + rb * M * N + rm * N + rn)
    tl.store(c_ptr + rb * M * N + rm * N + rn, tl.dot(a, b, acc, out_dtype=OUT))


@pytest.mark.parametrize("shape_b", [2, 8])
@pytest.mark.parametrize("kind", ["fp16", "fp32", "int8", "fp8e5"])
def test_batched_dot(rng, kind, shape_b):
    m, n, k = 16, 32, 32
    if kind == "int8":
        a = rng.integers(-128, 128, (shape_b, m, k)).astype(np.int8)
        b = rng.integers(-128, 128, (shape_b, k, n)).astype(np.int8)
        acc = rng.integers(-1000, 1000, (shape_b, m, n)).astype(np.int32)
    else:
        dtype = {"fp16": np.float16, "fp32": np.float32, "fp8e5": FP8["fp8e5"]}[kind]
        a = rng.normal(size=(shape_b, m, k)).astype(dtype)
        b = rng.normal(size=(shape_b, k, n)).astype(dtype)
        acc = rng.normal(size=(shape_b, m, n)).astype(np.float32)
    c = np.zeros_like(acc)
    batched_kernel[(1,)](a, b, c, acc, B=shape_b, M=m, N=n, K=k, OUT=tl.float32)
    if kind == "fp32":  # tf32 by default, as a 2-D dot (Triton's)
        from tessera.interpreter.matrix import round_to_tf32
        a, b = round_to_tf32(a), round_to_tf32(b)
    expected = np.stack([fsum_matmul(a[i], b[i]) for i in range(shape_b)]) + acc
    if kind == "int8":
        np.testing.assert_array_equal(c, expected.astype(np.int64))
    else:
        np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)


@tessera.jit(interpret=True)
def bad_dot_kernel(a_ptr, b_ptr, c_ptr, OUT: tl.constexpr, IMPRECISE: tl.constexpr,
                   K: tl.constexpr):
    r = tl.arange(0, 32)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + r[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * 32 + r[None, :])
    tl.store(c_ptr + r[:, None] * 32 + r[None, :],
             tl.dot(a, b, out_dtype=OUT, max_num_imprecise_acc=IMPRECISE))


@pytest.mark.parametrize("a,out,imprecise,k,message", [
    (np.uint8, tl.float32, None, 32, "only int8 supported"),
    (np.float16, tl.bfloat16, None, 32, "out_dtype=bfloat16 is unsupported"),
    (ml_dtypes.float8_e4m3fn, tl.float32, 64, 32, r"max_num_imprecise_acc \(64\) must be <= K"),
])
def test_dot_errors_name_the_kernel_and_line(a, out, imprecise, k, message):
    x = np.zeros((32, 32), a)
    with pytest.raises(tessera.CompilationError, match=message) as error:
        bad_dot_kernel[(1,)](x, x, np.zeros((32, 32), np.float32), OUT=out,
                             IMPRECISE=imprecise, K=k)
    assert "bad_dot_kernel" in str(error.value)


def test_int8_k_minimum_is_the_gpus_not_the_interpreters():
    # The GPU's int8 tensor-core dot needs K >= 32; the interpreter takes any K, as Triton's
    # interpreter (its min_dot_size is (1, 1, 1)), with exact int32 sums.
    from tessera import frontend
    signature = {"a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*i32"}
    constexprs = {"OUT": tl.int32, "IMPRECISE": None, "K": 16}
    with pytest.raises(tessera.CompilationError, match="K >= 32"):
        frontend.build_module(bad_dot_kernel, signature, constexprs)
    rng = np.random.default_rng()
    a = rng.integers(-128, 128, (32, 16)).astype(np.int8)
    b = rng.integers(-128, 128, (16, 32)).astype(np.int8)
    c = np.zeros((32, 32), np.int32)
    bad_dot_kernel[(1,)](a, b, c, OUT=tl.int32, IMPRECISE=None, K=16)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


@tessera.jit(interpret=True)
def precision_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                     PRECISION: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, input_precision=PRECISION))


@pytest.mark.parametrize("precision,bound", [("bf16x3", 1e-5), ("bf16x6", 1e-6),
                                             ("tf32", 1e-3)])
def test_split_bf16_precisions_approach_float32(rng, precision, bound):
    a = rng.normal(size=(32, 64)).astype(np.float32)
    b = rng.normal(size=(64, 16)).astype(np.float32)
    c = np.zeros((32, 16), np.float32)
    precision_kernel[(1,)](a, b, c, M=32, N=16, K=64, PRECISION=precision)
    expected = fsum_matmul(a, b)
    error = np.linalg.norm(c - expected) / np.linalg.norm(expected)
    assert error < bound
    # A single bfloat16 product is far worse: the parts really are summed.
    assert precision == "tf32" or error < 1e-2 * np.linalg.norm(
        a.astype(ml_dtypes.bfloat16).astype(np.float64) @ b.astype(ml_dtypes.bfloat16)
        .astype(np.float64) - expected) / np.linalg.norm(expected)
