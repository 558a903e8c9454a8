"""tessera.ops.softmax through the interpreter against float64 NumPy: fresh random rows with a
wide spread, lengths that are not powers of two (1 column, tiles of several rows, rows
longer than one tile's warp share), float32/float16/bfloat16, strided rows, poisoned outputs;
CPU torch tensors too."""
import ml_dtypes
import numpy as np
import pytest
from tessera.ops import softmax
from tessera.testing import relative_error

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
BOUNDS = {"float32": 1e-5, "float16": 5e-3, "bfloat16": 1e-2}


def reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", [(3, 1), (37, 100), (5, 1000), (2, 2049)])
def test_matches_float64(interpret, shape, dtype_name):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 4).astype(DTYPES[dtype_name])
    out = np.full(shape, np.nan, x.dtype)
    assert softmax(x, out=out) is out
    assert relative_error(out.astype(np.float64), reference(x.astype(np.float64))) \
        < BOUNDS[dtype_name]


def test_strided_rows_and_default_output(interpret):
    rng = np.random.default_rng(3)
    base = rng.standard_normal((20, 300)).astype(np.float32)
    x = base[::2, :250]  # row stride 600 elements, rows of 250
    out = softmax(x)
    assert out.shape == (10, 250) and out.dtype == np.float32
    assert relative_error(out.astype(np.float64), reference(x.astype(np.float64))) < 1e-5
    wide = np.full((10, 400), np.nan, np.float32)
    softmax(x, out=wide[:, :250])  # a strided output: the pad stays untouched
    assert np.isnan(wide[:, 250:]).all()
    assert relative_error(wide[:, :250].astype(np.float64), reference(x.astype(np.float64))) \
        < 1e-5


def test_cpu_torch_tensors(interpret):
    torch = pytest.importorskip("torch")
    x = torch.randn((9, 70), generator=torch.Generator().manual_seed(1)) * 3
    ref = torch.softmax(x.double(), dim=1)
    out = softmax(x)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-5
