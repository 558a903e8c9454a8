"""tessera.ops.matmul through the interpreter against float64: fresh random inputs, (M, N, K)
not multiples of any block, float16 and bfloat16, with and without the fused bias + leaky
ReLU epilogue, transposed (strided) operands, poisoned outputs."""
import ml_dtypes
import numpy as np
import pytest
from tessera.ops import matmul
from tessera.testing import relative_error

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
BOUNDS = {"float16": 5e-3, "bfloat16": 1e-2}


def reference(a, b, bias, activation):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if bias is not None:
        ref = ref + bias.astype(np.float64)[None, :]
    if activation == "leaky_relu":
        ref = np.where(ref >= 0, ref, 0.01 * ref)
    return ref


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("epilogue", [("", False), ("leaky_relu", True)],
                         ids=["plain", "bias-leaky-relu"])
@pytest.mark.parametrize("shape", [(70, 33, 45), (1, 65, 17)])
def test_matches_float64(interpret, shape, epilogue, dtype_name):
    M, N, K = shape
    activation, with_bias = epilogue
    rng = np.random.default_rng(M * N + K)
    dtype = DTYPES[dtype_name]
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    bias = rng.standard_normal(N).astype(dtype) if with_bias else None
    out = np.full((M, N), np.nan, dtype)
    assert matmul(a, b, bias, activation, out) is out
    assert relative_error(out.astype(np.float64), reference(a, b, bias, activation)) \
        < BOUNDS[dtype_name]


def test_transposed_operands_and_default_output(interpret):
    rng = np.random.default_rng(4)
    a_t = rng.standard_normal((40, 50)).astype(np.float16)  # a = a_t.T: (50, 40), column-major
    b_t = rng.standard_normal((30, 40)).astype(np.float16)  # b = b_t.T: (40, 30)
    out = matmul(a_t.T, b_t.T)
    assert out.shape == (50, 30) and out.dtype == np.float16
    assert relative_error(out.astype(np.float64), reference(a_t.T, b_t.T, None, "")) < 5e-3


def test_inner_dimensions_must_agree(interpret):
    a = np.zeros((4, 8), np.float16)
    with pytest.raises(ValueError, match=r"matmul: inner dimensions differ: a \(4, 8\) @ b"):
        matmul(a, np.zeros((9, 4), np.float16))
