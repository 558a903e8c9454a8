"""tessera.ops on tensors past 2**31 elements, where int32 offsets wrap: softmax, RMSNorm and
LayerNorm (forward and backward), matmul with each of A, B and C past 2**31 elements, and
attention forward and backward with more than 2**31 elements per tensor.

Their kernels compute offsets as Triton kernels do (program ids, aranges and int arguments
are int32); a launch with such a tensor compiles the specialization whose offsets the
widen_offsets pass computes in int64. Each case checks against a float64 torch reference on
the rows past the 2**31 mark (where a wrapped offset would read or write elsewhere), with
the error bounds of the other GPU tests (||out - ref|| / ||ref|| <= 5e-3 in fp16), outputs
poisoned with NaN first. fp16 tensors of 2**31 elements take 4 GiB each: the module runs on
one pytest-xdist worker (`--dist loadgroup`), frees its tensors after each case, and skips a
case when the GPU has too little free memory.
"""
import gc
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from tessera.ops import (attention_backward, attention_forward, layer_norm,  # noqa: E402
                         layer_norm_backward, matmul, rms_norm, rms_norm_backward, softmax)

pytestmark = pytest.mark.xdist_group("large_memory")

MARK = 2 ** 31
FP16_BOUND = 5e-3
GIB = 2 ** 30


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.detach()
    if not torch.isfinite(out).all():
        return float("inf")
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


@pytest.fixture(autouse=True)
def free_memory():
    """Each case starts and ends with the cached blocks of the last one given back."""
    gc.collect()
    torch.cuda.empty_cache()
    yield
    gc.collect()
    torch.cuda.empty_cache()


def need(gib: float) -> None:
    free, _ = torch.cuda.mem_get_info()
    if free < gib * GIB:
        pytest.skip(f"needs {gib:.0f} GiB of free GPU memory, {free / GIB:.1f} GiB free")


def randn(*shape) -> torch.Tensor:
    return torch.randn(shape, device="cuda", dtype=torch.float16)


def nans(*shape) -> torch.Tensor:
    return torch.full(shape, float("nan"), device="cuda", dtype=torch.float16)


# Rows of 4096 columns: row 524288 starts at element 2**31; 1,024 rows past it.
COLS = 4096
ROWS = MARK // COLS + 1024
PAST = MARK // COLS


def test_softmax():
    need(10)
    x = randn(ROWS, COLS).mul_(4)  # in place: no second 4 GiB tensor
    out = softmax(x, out=nans(ROWS, COLS))
    ref = torch.softmax(x[PAST:].double(), dim=1)
    assert relative_error(out[PAST:], ref) < FP16_BOUND


def _rms_norm_ref(x, w, eps):
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + eps) * w.double()


def _layer_norm_ref(x, w, b, eps):
    return torch.nn.functional.layer_norm(x.double(), (x.shape[1],), w.double(), b.double(), eps)


def _grads_past_the_mark(reference, x, dy, *params):
    """dx on the rows past the mark (rows are independent) and the parameters' gradients
    over every row (summed in float64, a slab of rows at a time)."""
    sums = [torch.zeros(p.shape, device="cuda", dtype=torch.float64) for p in params]
    dx = None
    for start in range(0, x.shape[0], 65536):
        rows = slice(start, min(start + 65536, x.shape[0]))
        xs = x[rows].double().requires_grad_()
        ps = [p.double().requires_grad_() for p in params]
        y = reference(xs, *ps)
        grads = torch.autograd.grad(y, [xs, *ps], dy[rows].double())
        for total, g in zip(sums, grads[1:]):
            total += g
        if rows.stop > PAST:
            part = grads[0][max(PAST - start, 0):]
            dx = part if dx is None else torch.cat([dx, part])
    return dx, sums


def test_rms_norm_forward_and_backward():
    need(28)
    eps = 1e-6
    x, dy = randn(ROWS, COLS), randn(ROWS, COLS)
    w = torch.rand(COLS, device="cuda", dtype=torch.float16) + 0.5
    y = rms_norm(x, w, eps, out=nans(ROWS, COLS))
    assert relative_error(y[PAST:], _rms_norm_ref(x[PAST:], w, eps)) < FP16_BOUND
    del y
    dx, dw = rms_norm_backward(dy, x, w, eps, dx=nans(ROWS, COLS))
    dx_ref, (dw_ref,) = _grads_past_the_mark(lambda xs, ws: _rms_norm_ref(xs, ws, eps), x, dy, w)
    assert relative_error(dx[PAST:], dx_ref) < FP16_BOUND
    assert relative_error(dw, dw_ref) < FP16_BOUND


def test_layer_norm_forward_and_backward():
    need(28)
    eps = 1e-5
    x, dy = randn(ROWS, COLS), randn(ROWS, COLS)
    w = torch.rand(COLS, device="cuda", dtype=torch.float16) + 0.5
    b = randn(COLS)
    y = layer_norm(x, w, b, eps, out=nans(ROWS, COLS))
    assert relative_error(y[PAST:], _layer_norm_ref(x[PAST:], w, b, eps)) < FP16_BOUND
    del y
    dx, dw, db = layer_norm_backward(dy, x, w, eps, dx=nans(ROWS, COLS))
    dx_ref, (dw_ref, db_ref) = _grads_past_the_mark(
        lambda xs, ws, bs: _layer_norm_ref(xs, ws, bs, eps), x, dy, w, b)
    assert relative_error(dx[PAST:], dx_ref) < FP16_BOUND
    assert relative_error(dw, dw_ref) < FP16_BOUND
    assert relative_error(db, db_ref) < FP16_BOUND


# The case: A of 528,416 x 4,096 (2**31 + 2**22 elements) @ 4,096 x 256.
@pytest.mark.parametrize("large", ["A", "B", "C"])
def test_matmul(large):
    need(12)
    if large == "A":  # C's rows past A's mark
        a, b = randn(ROWS, COLS).div_(64), randn(COLS, 256)
        rows, cols = slice(PAST, None), slice(None)
    elif large == "B":  # B column-major (N x K transposed): its columns past the mark
        a, b = randn(256, COLS).div_(64), randn(ROWS, COLS).t()
        rows, cols = slice(None), slice(PAST, None)
    else:  # C of 528,416 x 4,096 from K = 64
        a, b = randn(ROWS, 64).div_(8), randn(64, COLS)
        rows, cols = slice(PAST, None), slice(None)
    c = nans(a.shape[0], b.shape[1])
    assert max(x.numel() for x in (a, b, c)) > MARK
    matmul(a, b, out=c)
    ref = a[rows].double() @ b[:, cols].double()
    assert relative_error(c[rows, cols], ref) < FP16_BOUND


# (B, H, S, D) with B = 1025: 2**31 + 2**21 elements per tensor; batch 1024 lies past 2**31.
B, H, S, D = 1025, 16, 1024, 128


def test_attention_forward_and_backward():
    """Bounds of tests/gpu/test_attention.py: O 5e-3, the base-2 log-sum-exp 1e-3 and the
    gradients 1e-2 in fp16."""
    need(44)
    q, k, v = randn(B, H, S, D), randn(B, H, S, D), randn(B, H, S, D)
    assert q.numel() > MARK and q[-1].data_ptr() - q.data_ptr() >= 2 * MARK  # fp16: 2 bytes
    o, lse = attention_forward(q, k, v, causal=True, out=nans(B, H, S, D))
    last = [t[-1:].double().requires_grad_() for t in (q, k, v)]
    o_ref = torch.nn.functional.scaled_dot_product_attention(*last, is_causal=True)
    assert relative_error(o[-1:], o_ref) < FP16_BOUND
    scores = (last[0] @ last[1].transpose(-1, -2)).detach() * D ** -0.5
    scores.masked_fill_(torch.ones(S, S, device="cuda", dtype=torch.bool).triu(1), -math.inf)
    assert relative_error(lse[-1:], torch.logsumexp(scores, -1) / math.log(2)) < 1e-3
    do = randn(B, H, S, D)
    dq, dk, dv = attention_backward(q, k, v, o, lse, do, causal=True, dq=nans(B, H, S, D),
                                    dk=nans(B, H, S, D), dv=nans(B, H, S, D))
    refs = torch.autograd.grad(o_ref, last, do[-1:].double())
    for got, ref in zip((dq, dk, dv), refs):
        assert relative_error(got[-1:], ref) < 1e-2
