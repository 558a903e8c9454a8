"""tessera.ops' RMSNorm and LayerNorm, forward and backward, through the interpreter against
float64 NumPy references of the formulas: fresh random inputs, weights and biases, (B, T, H)
with T leaving partial row tiles and H not a power of two, float32/float16/bfloat16, outputs
poisoned; dw and db summed over every row (the partial-row reduction)."""
import ml_dtypes
import numpy as np
import pytest
from tessera.ops import layer_norm, layer_norm_backward, rms_norm, rms_norm_backward
from tessera.testing import relative_error

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
BOUNDS = {"float32": 1e-5, "float16": 5e-3, "bfloat16": 1e-2}


def rms_reference(x, w, dy, eps):
    rstd = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    x_hat, g = x * rstd, dy * w
    dx = rstd * (g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))
    return x_hat * w, dx, np.sum(dy * x_hat, axis=tuple(range(x.ndim - 1)))


def layer_reference(x, w, b, dy, eps):
    centered = x - np.mean(x, axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(np.mean(centered * centered, axis=-1, keepdims=True) + eps)
    x_hat, g = centered * rstd, dy * w
    dx = rstd * (g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True)
                 - np.mean(g, axis=-1, keepdims=True))
    rows = tuple(range(x.ndim - 1))
    return x_hat * w + b, dx, np.sum(dy * x_hat, axis=rows), np.sum(dy, axis=rows)


def inputs(shape, dtype_name, seed):
    rng = np.random.default_rng(seed)
    dtype = DTYPES[dtype_name]
    x, dy = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    w, b = ((1 + 0.5 * rng.standard_normal(shape[-1])).astype(dtype) for _ in range(2))
    return x, dy, w, b


def check(got, ref, dtype_name):
    for g, r in zip(got, ref, strict=True):
        assert relative_error(g.astype(np.float64), r) < BOUNDS[dtype_name]


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", [(2, 37, 96), (1, 13, 200), (3, 5, 7)])
def test_rms_norm_forward_backward(interpret, shape, dtype_name):
    x, dy, w, _ = inputs(shape, dtype_name, seed=shape[1])
    y = np.full(shape, np.nan, x.dtype)
    dx = np.full(shape, np.nan, x.dtype)
    assert rms_norm(x, w, 1e-6, out=y) is y
    got_dx, dw = rms_norm_backward(dy, x, w, 1e-6, dx=dx)
    assert got_dx is dx and dw.shape == w.shape and dw.dtype == w.dtype
    ref = rms_reference(*(a.astype(np.float64) for a in (x, w, dy)), 1e-6)
    check((y, dx, dw), ref, dtype_name)


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", [(2, 37, 96), (1, 13, 200), (3, 5, 7)])
def test_layer_norm_forward_backward(interpret, shape, dtype_name):
    x, dy, w, b = inputs(shape, dtype_name, seed=shape[1] + 1)
    y = np.full(shape, np.nan, x.dtype)
    dx = np.full(shape, np.nan, x.dtype)
    assert layer_norm(x, w, b, 1e-5, out=y) is y
    got_dx, dw, db = layer_norm_backward(dy, x, w, 1e-5, dx=dx)
    assert got_dx is dx and dw.shape == db.shape == w.shape
    ref = layer_reference(*(a.astype(np.float64) for a in (x, w, b, dy)), 1e-5)
    check((y, dx, dw, db), ref, dtype_name)


def test_default_outputs_are_allocated_like_x(interpret):
    x, dy, w, b = inputs((4, 50), "float16", seed=9)
    y = layer_norm(x, w, b)
    dx, dw, db = layer_norm_backward(dy, x, w)
    assert y.shape == dx.shape == x.shape and y.dtype == dx.dtype == np.float16
    ref = layer_reference(*(a.astype(np.float64) for a in (x, w, b, dy)), 1e-5)
    check((y, dx, dw, db), ref, "float16")
