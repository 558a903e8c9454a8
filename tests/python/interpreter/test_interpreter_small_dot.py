# tl.dot in the interpreter takes any extents, as Triton's interpreter (its min_dot_size is
# (1, 1, 1)); the GPU build keeps the tensor cores' rule (powers of two >= 16). int8 operands
# accumulate in int32 whatever out_dtype says, as Triton's.
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import CompilationError, frontend


@tessera.jit(interpret=True)
def dot_kernel(A, B, C, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               OUT: tl.constexpr):
    a = tl.load(A + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(B + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
    c = tl.dot(a, b, input_precision="ieee", out_dtype=OUT)
    tl.store(C + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


@tessera.jit(interpret=True)
def dot3d_kernel(A, B, C, BB: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    b_ = tl.arange(0, BB)[:, None, None]
    a = tl.load(A + b_ * M * K + tl.arange(0, M)[None, :, None] * K
                + tl.arange(0, K)[None, None, :])
    b = tl.load(B + b_ * K * N + tl.arange(0, K)[None, :, None] * N
                + tl.arange(0, N)[None, None, :])
    c = tl.dot(a, b, input_precision="ieee")
    tl.store(C + b_ * M * N + tl.arange(0, M)[None, :, None] * N
             + tl.arange(0, N)[None, None, :], c)


@pytest.mark.parametrize("M,N,K", [(1, 64, 16), (2, 2, 4), (64, 2, 8), (4, 8, 1), (8, 1, 32)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_small_float_dots(rng, M, N, K, dtype):
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    c = np.zeros((M, N), np.float32)
    dot_kernel[(1,)](a, b, c, M, N, K, tl.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("M,N,K", [(4, 8, 2), (16, 16, 32), (2, 32, 64)])
@pytest.mark.parametrize("out", [tl.int8, tl.int32, tl.float32])
def test_int8_dot_accumulates_in_int32_whatever_out_dtype(rng, M, N, K, out):
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    c = np.zeros((M, N), np.int32)
    dot_kernel[(1,)](a, b, c, M, N, K, out)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("BB,M,N,K", [(2, 1, 32, 16), (4, 8, 2, 4), (1, 2, 2, 2)])
def test_small_batched_dots(rng, BB, M, N, K):
    a = rng.standard_normal((BB, M, K)).astype(np.float32)
    b = rng.standard_normal((BB, K, N)).astype(np.float32)
    c = np.zeros((BB, M, N), np.float32)
    dot3d_kernel[(1,)](a, b, c, BB, M, N, K)
    np.testing.assert_allclose(c, np.matmul(a.astype(np.float64), b.astype(np.float64)),
                               rtol=1e-5, atol=1e-5)


def test_gpu_build_keeps_the_tensor_core_minimum():
    with pytest.raises(CompilationError, match="M >= 16"):
        frontend.build_module(dot_kernel, {"A": "*fp32", "B": "*fp32", "C": "*fp32"},
                              {"M": 2, "N": 16, "K": 16, "OUT": tl.float32})
    module = frontend.build_module(dot_kernel, {"A": "*fp32", "B": "*fp32", "C": "*fp32"},
                                   {"M": 2, "N": 16, "K": 16, "OUT": tl.float32}, interpreter=True)
    assert "dot" in module.str()
