"""tessera.ops' softmax, RMSNorm and LayerNorm on the GPU, against
float64 references on fresh random inputs, with outputs poisoned (NaN) before each launch.

Softmax: rows of 1 to 32768 columns, mostly not powers of two. RMSNorm / LayerNorm, forward
and backward (dx, dw, db): every (B, T, H) of docs/benchmarks.md in fp32 (B in {512, 1024, 2048},
T in {64, 77, 91, 96, 128}, H in {128, 256, 512}), a spread of them in fp16 and bf16, and an H
that is not a power of two. Bounds (docs/benchmarks.md): ||out - ref|| / ||ref|| below 1e-5 in
fp32, 5e-3 in fp16, 1e-2 in bf16. Every kernel compiles without register spills.
"""
import itertools

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera.ops.fused_softmax as softmax_ops  # noqa: E402  (after the skips)
import tessera.ops.norms as norm_ops  # noqa: E402
from tessera.ops import (layer_norm, layer_norm_backward, rms_norm,  # noqa: E402
                         rms_norm_backward, softmax)

BOUNDS = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 1e-2}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    out = out.double()
    if not torch.isfinite(out).all():
        return float("inf")
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


def nans(shape, dtype):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


# --- softmax ---------------------------------------------------------------------------------

SOFTMAX_COLUMNS = [1, 2, 3, 17, 100, 127, 128, 129, 781, 1000, 2047, 3000, 4097, 8191, 12345,
                   16384, 20000, 32767, 32768]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_cols", SOFTMAX_COLUMNS)
def test_softmax(n_cols, dtype):
    n_rows = max(3, min(1823, (1 << 22) // n_cols))  # a few million elements, odd row counts
    x = (torch.randn((n_rows, n_cols), device="cuda") * 4).to(DTYPES[dtype])
    out = softmax(x, out=nans(x.shape, x.dtype))
    ref = torch.softmax(x.double(), dim=1)
    assert relative_error(out, ref) < BOUNDS[x.dtype], (n_rows, n_cols, dtype)


def test_softmax_strided_rows():
    base = torch.randn((300, 1200), device="cuda")
    x = base[:, 100:1100]  # rows 1200 apart, 1000 columns each
    out = softmax(x, out=nans((300, 1000), torch.float32))
    assert relative_error(out, torch.softmax(x.double(), dim=1)) < 1e-5


# --- RMSNorm and LayerNorm -------------------------------------------------------------------

BENCHMARK_SHAPES = list(itertools.product([512, 1024, 2048], [64, 77, 91, 96, 128],
                                          [128, 256, 512]))
NARROW_SHAPES = [(512, 77, 128), (1024, 91, 256), (2048, 96, 512), (512, 64, 512),
                 (7, 33, 1000)]


def by_memory(shapes):
    """Shapes of 2**25 or more elements need several GiB (float64 references of each tensor):
    they run one after another on one pytest-xdist worker (--dist loadgroup), so that eight
    workers never hold them all at once."""
    return [pytest.param(shape, marks=pytest.mark.xdist_group("large_memory"))
            if shape[0] * shape[1] * shape[2] >= 2 ** 25 else shape for shape in shapes]


def inputs(shape, dtype):
    x = torch.randn(shape, device="cuda").to(dtype)
    dy = torch.randn(shape, device="cuda").to(dtype)
    w = (1 + 0.5 * torch.randn(shape[-1], device="cuda")).to(dtype)
    b = (0.5 * torch.randn(shape[-1], device="cuda")).to(dtype)
    return x, dy, w, b


def rms_norm_reference(x, w, dy, eps):
    x, w, dy = x.double(), w.double(), dy.double()
    rstd = torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)
    x_hat, g = x * rstd, dy * w
    dx = rstd * (g - x_hat * (g * x_hat).mean(-1, keepdim=True))
    return x_hat * w, dx, (dy * x_hat).reshape(-1, x.shape[-1]).sum(0)


def layer_norm_reference(x, w, b, dy, eps):
    x, w, b, dy = x.double(), w.double(), b.double(), dy.double()
    centered = x - x.mean(-1, keepdim=True)
    rstd = torch.rsqrt((centered * centered).mean(-1, keepdim=True) + eps)
    x_hat, g = centered * rstd, dy * w
    dx = rstd * (g - x_hat * (g * x_hat).mean(-1, keepdim=True) - g.mean(-1, keepdim=True))
    rows = (dy * x_hat).reshape(-1, x.shape[-1])
    return x_hat * w + b, dx, rows.sum(0), dy.reshape(-1, x.shape[-1]).sum(0)


def check_rms_norm(shape, dtype):
    x, dy, w, _ = inputs(shape, dtype)
    y = rms_norm(x, w, 1e-6, out=nans(shape, dtype))
    dx, dw = rms_norm_backward(dy, x, w, 1e-6, dx=nans(shape, dtype))
    for name, out, ref in zip(("y", "dx", "dw"), (y, dx, dw), rms_norm_reference(x, w, dy, 1e-6)):
        assert relative_error(out, ref) < BOUNDS[dtype], (shape, dtype, name)


def check_layer_norm(shape, dtype):
    x, dy, w, b = inputs(shape, dtype)
    y = layer_norm(x, w, b, 1e-5, out=nans(shape, dtype))
    dx, dw, db = layer_norm_backward(dy, x, w, 1e-5, dx=nans(shape, dtype))
    references = layer_norm_reference(x, w, b, dy, 1e-5)
    for name, out, ref in zip(("y", "dx", "dw", "db"), (y, dx, dw, db), references):
        assert relative_error(out, ref) < BOUNDS[dtype], (shape, dtype, name)


@pytest.mark.parametrize("shape", by_memory(BENCHMARK_SHAPES), ids=str)
def test_rms_norm_fp32(shape):
    check_rms_norm(shape, torch.float32)


@pytest.mark.parametrize("shape", by_memory(BENCHMARK_SHAPES), ids=str)
def test_layer_norm_fp32(shape):
    check_layer_norm(shape, torch.float32)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("shape", by_memory(NARROW_SHAPES), ids=str)
def test_norms_fp16_bf16(shape, dtype):
    check_rms_norm(shape, DTYPES[dtype])
    check_layer_norm(shape, DTYPES[dtype])


def test_norms_match_pytorch():
    x, dy, w, b = inputs((64, 91, 384), torch.float32)
    xg, wg, bg = (t.clone().requires_grad_() for t in (x, w, b))
    y = torch.nn.functional.rms_norm(xg, (384,), wg, 1e-6)
    y.backward(dy)
    assert relative_error(rms_norm(x, w, 1e-6), y.detach().double()) < 1e-5
    dx, dw = rms_norm_backward(dy, x, w, 1e-6)
    assert relative_error(dx, xg.grad.double()) < 1e-5
    assert relative_error(dw, wg.grad.double()) < 1e-5
    xg.grad = wg.grad = None  # else LayerNorm's dw reference would add RMSNorm's onto it
    y = torch.nn.functional.layer_norm(xg, (384,), wg, bg, 1e-5)
    y.backward(dy)
    dx, dw, db = layer_norm_backward(dy, x, w, 1e-5)
    for out, ref in ((dx, xg.grad), (dw, wg.grad), (db, bg.grad)):
        assert relative_error(out, ref.double()) < 1e-5


# --- resources -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_cols", [128, 256, 512, 1000])
def test_no_spills(n_cols, dtype):
    t = DTYPES[dtype]
    x = torch.zeros((64, n_cols), device="cuda", dtype=t)
    w = torch.zeros(n_cols, device="cuda", dtype=t)
    partials = torch.zeros((8, n_cols), device="cuda", dtype=torch.float32)
    m = norm_ops
    forward = m.tile_config(n_cols)
    rms_backward = m.backward_config(n_cols, reductions_per_row=2)
    ln_backward = m.backward_config(n_cols, reductions_per_row=4)
    compiled = [
        m.rms_norm_fwd.compile(x, w, x, 64, n_cols, 1e-6, **forward),
        m.rms_norm_bwd.compile(x, x, w, x, partials, 64, n_cols, 1e-6, **rms_backward),
        m.layer_norm_fwd.compile(x, w, w, x, 64, n_cols, 1e-5, **forward),
        m.layer_norm_bwd.compile(x, x, w, x, partials, partials, 64, n_cols, 1e-5, **ln_backward),
        softmax_ops.softmax_kernel.compile(x, x, n_cols, n_cols, 64, n_cols,
                                           **softmax_ops.softmax_config(n_cols)),
    ]
    for kernel in compiled:
        if "spill_stores" not in kernel.metadata:
            pytest.skip("ptxas not found: no resource report")
        assert kernel.metadata["spill_stores"] == 0, (kernel.name, kernel.metadata)


def test_long_softmax_rows_do_not_spill():
    for n_cols in (8192, 16384, 32768):
        for dtype in (torch.float32, torch.float16):
            x = torch.zeros((4, n_cols), device="cuda", dtype=dtype)
            kernel = softmax_ops.softmax_kernel.compile(
                x, x, n_cols, n_cols, 4, n_cols, **softmax_ops.softmax_config(n_cols))
            assert kernel.metadata.get("spill_stores", 0) == 0, (n_cols, dtype)

