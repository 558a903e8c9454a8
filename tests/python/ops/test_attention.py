"""tessera.ops' fused attention on the CPU: its forward and
backward kernels through the interpreter against a float64 NumPy reference (gradients derived
by hand below), every head dim, causal and not, fp16/bf16/fp32, ragged S; then its PyTorch
integration on CPU tensors (the custom ops run the kernels through the interpreter):
torch.compile(fullgraph=True) forward + backward against float64 autograd, and opcheck.

Bounds as tutorials/06's: O ≤ 5e-3 (fp16, tf32), 1e-2 (bf16); gradients twice that.
"""

import ml_dtypes
import numpy as np
import pytest
from tessera.ops import attention, attention_backward, attention_forward
from tessera.testing import relative_error

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
BOUNDS = {"float16": (5e-3, 1e-2), "bfloat16": (1e-2, 2e-2), "float32": (5e-3, 1e-2)}


def reference(q, k, v, do, causal, sm_scale):
    """(O, lse2, dQ, dK, dV) in float64: S = q kᵀ·scale, P = softmax(S), O = P v;
    dV = Pᵀ dO, dP = dO vᵀ, dS_ij = P_ij (dP_ij − Σ_l P_il dP_il), dQ = dS k·scale,
    dK = dSᵀ q·scale."""
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * sm_scale
    n = q.shape[2]
    if causal:
        s[..., ~np.tril(np.ones((n, n), bool))] = -np.inf
    lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    p = np.exp(s - lse[..., None])
    dp = np.matmul(do, np.swapaxes(v, -1, -2))
    ds = p * (dp - np.einsum("bhij,bhij->bhi", p, dp)[..., None])
    return (np.matmul(p, v), lse / np.log(2), np.matmul(ds, k) * sm_scale,
            np.matmul(np.swapaxes(ds, -1, -2), q) * sm_scale, np.matmul(np.swapaxes(p, -1, -2), do))


def run_case(B, H, S, D, causal, dtype_name, seed, atomic_dq=False):
    rng = np.random.default_rng(seed)
    q, k, v, do = (rng.standard_normal((B, H, S, D)).astype(DTYPES[dtype_name])
                   for _ in range(4))
    o = np.full_like(q, np.nan)
    lse = np.full((B, H, S), np.nan, np.float32)
    grads = [np.full_like(q, np.nan) for _ in range(3)]
    sm_scale = (0.5 + rng.random()) * D ** -0.5  # not only D ** -0.5 itself
    attention_forward(q, k, v, causal, sm_scale, out=o, lse=lse)
    dq, dk, dv = attention_backward(q, k, v, o, lse, do, causal, sm_scale,
                                    dq=grads[0], dk=grads[1], dv=grads[2], atomic_dq=atomic_dq)
    assert all(g is x for g, x in zip(grads, (dq, dk, dv)))
    ref = reference(*(x.astype(np.float64) for x in (q, k, v, do)), causal, sm_scale)
    return dict(zip(("o", "lse", "dq", "dk", "dv"),
                    (relative_error(x.astype(np.float64), r)
                     for x, r in zip((o, lse, dq, dk, dv), ref))))


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [16, 32, 64, 128, 256])
def test_interpreted_kernels_match_float64(interpret, D, causal, dtype_name):
    # S = 1 and 83 are multiples of no block; 2 x 3 heads with the batch and head strides.
    for S in (1, 83):
        errors = run_case(2, 3, S, D, causal, dtype_name, seed=S * 7 + D + causal)
        bound, grad_bound = BOUNDS[dtype_name]
        assert errors["o"] <= bound, errors
        assert errors["lse"] <= 1e-3, errors
        assert errors["dv"] <= grad_bound, errors
        if S == 1 and dtype_name == "float32":
            # One key: dQ = dK = 0 exactly (ref norm 0, so the error is absolute), but tf32's
            # rounding of dP = dO Vᵀ against Δ = rowsum(dO ⊙ O) in float32 leaves ~1e-2.
            grad_bound = 5e-2
        assert max(errors["dq"], errors["dk"]) <= grad_bound, errors


@pytest.mark.parametrize("dtype_name", ["float16", "float32"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [32, 64])
def test_atomic_dq_matches_float64(interpret, D, causal, dtype_name):
    # dQ accumulated by the dK/dV kernel (atomic adds of each step's dS K, float32), then
    # scaled and cast: the same bounds as the two-kernel backward; ragged S over several key
    # programs (each adds into the same rows of dQ).
    for S in (1, 83, 150):
        errors = run_case(2, 3, S, D, causal, dtype_name, seed=S * 5 + D + causal,
                          atomic_dq=True)
        bound, grad_bound = BOUNDS[dtype_name]
        if S == 1 and dtype_name == "float32":
            grad_bound = 5e-2  # as above: one key, dQ = 0 up to tf32's rounding
        assert max(errors["dq"], errors["dk"], errors["dv"]) <= grad_bound, errors


def test_rejects_bad_arguments(interpret):
    x = np.zeros((1, 2, 8, 48), np.float16)  # D = 48 is no supported head dim
    with pytest.raises(ValueError, match="attention_forward: q must be .* D in"):
        attention_forward(x, x, x)
    q = np.zeros((1, 2, 8, 64), np.float16)
    o, lse = attention_forward(q, q, q)
    with pytest.raises(ValueError, match="attention_backward: do must be"):
        attention_backward(q, q, q, o, lse, q.astype(np.float32))
    with pytest.raises(ValueError, match="attention_backward: lse must be a contiguous float32"):
        attention_backward(q, q, q, o, lse[:, :, :4], q)


# ---- The PyTorch integration, on CPU tensors ----

def torch_reference(q, k, v, causal, sm_scale):
    """O and d(O.sum())/d(q, k, v) by float64 autograd of the plain formula."""
    import torch
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    s = q @ k.transpose(-1, -2) * sm_scale
    if causal:
        n = q.shape[2]
        s = s.masked_fill(~torch.ones((n, n), dtype=torch.bool).tril(), float("-inf"))
    o = torch.softmax(s, dim=-1) @ v
    o.sum().backward()
    return o.detach(), q.grad, k.grad, v.grad


def torch_rel(x, ref):
    return ((x.detach().double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("dtype_name,causal", [("bfloat16", True), ("float32", False)])
def test_torch_compile_fullgraph_forward_and_backward(dtype_name, causal):
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(11)
    dtype = getattr(torch, dtype_name)
    # q, k, v as head views of one (B, S, 3, H, D) projection: strided batch/head/seq dims.
    B, S, H, D = 2, 45, 2, 32
    qkv = torch.randn((B, S, 3, H, D), generator=gen).to(dtype).requires_grad_()

    def model(qkv):
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        return attention(q, k, v, causal=causal)

    compiled = torch.compile(model, fullgraph=True)  # a graph break raises
    o = compiled(qkv)
    o.sum().backward()
    q, k, v = (qkv.detach()[:, :, i].transpose(1, 2) for i in range(3))
    ref_o, dq, dk, dv = torch_reference(q, k, v, causal, D ** -0.5)
    bound, grad_bound = BOUNDS[dtype_name]
    assert o.dtype == dtype and o.shape == (B, H, S, D)
    assert torch_rel(o, ref_o) <= bound
    ref_grad = torch.stack([g.transpose(1, 2) for g in (dq, dk, dv)], dim=2)  # as qkv
    assert qkv.grad.shape == ref_grad.shape
    assert torch_rel(qkv.grad, ref_grad) <= grad_bound


def test_torch_ops_eager_autograd_and_opcheck():
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn((1, 2, 20, 16), generator=gen, dtype=torch.float16)
               .requires_grad_() for _ in range(3))
    o, lse = torch.ops.tessera.attention_forward(q, k, v, True, 0.25)
    assert lse.dtype == torch.float32 and lse.shape == (1, 2, 20) and not lse.requires_grad
    do = torch.randn(o.shape, generator=gen, dtype=torch.float16)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    ref_o, *_ = torch_reference(q, k, v, True, 0.25)
    assert torch_rel(o, ref_o) <= 5e-3
    qd, kd, vd = (x.detach().double().requires_grad_() for x in (q, k, v))
    s = (qd @ kd.transpose(-1, -2) * 0.25).masked_fill(
        ~torch.ones((20, 20), dtype=torch.bool).tril(), float("-inf"))
    ref_grads = torch.autograd.grad(torch.softmax(s, -1) @ vd, (qd, kd, vd), do.double())
    for got, ref in zip((dq, dk, dv), ref_grads):
        assert torch_rel(got, ref) <= 1e-2
    # Schema, fake (meta) implementation and autograd registration, as torch.library checks
    # them (including a trace through AOT dispatch with dynamic shapes).
    torch.library.opcheck(torch.ops.tessera.attention_forward.default, (q, k, v, True, 0.25))
    torch.library.opcheck(torch.ops.tessera.attention_backward.default,
                          (q.detach(), k.detach(), v.detach(), o.detach(), lse, do, True, 0.25))
