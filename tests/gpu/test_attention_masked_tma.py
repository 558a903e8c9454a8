"""The masked-attention forward's TMA path on an sm_90a GPU (TESSERA_ATTENTION_TMA=on: k and v
as (B, Hkv, Sk, D) host descriptors read at the live lists' rows; docs/perf/masked_attention.md,
"TMA"): O and lse against float64 and against the pointer path (knob off) on ragged lengths
with NaN rows past Sk in every K and V head (a tile crossing Sk must read the TMA's zero fill),
every mask / bias layout (the loops a 2-D mask or bias tile keeps on cp.async included),
causal, grouped-query heads, a fully masked row; the backward on the TMA forward's lse; every
wgmma candidate tile launched directly. Not timed (benchmarks/attention_masked.py --tma-ab).
The backward's dQ kernel (the same K, V descriptors) is checked against the pointer path's dQ
there, and each of its wgmma candidate tiles launched directly.
"""
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from tessera.config import knobs  # noqa: E402
from tessera.ops.flash_attention import LOG2E, WGMMA_CONFIGS, tma_path  # noqa: E402
from tessera.ops.flash_attention.forward import head_descriptors  # noqa: E402
import tessera.ops.masked_attention as ma  # noqa: E402
from tessera.ops.masked_attention import forward as mf  # noqa: E402

BOUNDS = {"float16": (5e-3, 1e-2), "bfloat16": (1e-2, 2e-2)}


def needs_sm90a():
    from tessera.runtime.launcher import arch_of
    if arch_of(torch.cuda.current_device()) != "sm_90a":
        pytest.skip("the TMA path is sm_90a's")


def padded(x, pad=16):
    """x as the first S rows of a (B, H, S + pad, D) tensor whose pad is NaN."""
    B, H, S, D = x.shape
    base = torch.full((B, H, S + pad, D), float("nan"), device=x.device, dtype=x.dtype)
    base[:, :, :S] = x
    return base[:, :, :S]


def make(B, Hq, Hkv, Sq, Sk, D, dtype_name, mask_kind, bias_kind, seed):
    """q, k, v (k, v NaN-padded past Sk), do, mask ("rows": (1, Hq, Sq, Sk) block-sparse and
    element-level with a dead row, "keys": (B, 1, 1, Sk) padding) and bias ("rows":
    (1, Hq, Sq, Sk), "keys": (1, Hq, 1, Sk))."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dtype = getattr(torch, dtype_name)
    rand = lambda *s: torch.randn(s, generator=gen, device="cuda").to(dtype)  # noqa: E731
    q, do = rand(B, Hq, Sq, D), rand(B, Hq, Sq, D)
    k, v = padded(rand(B, Hkv, Sk, D)), padded(rand(B, Hkv, Sk, D))
    mask = bias = None
    if mask_kind == "rows":
        nq, nk = -(-Sq // ma.SUPER), -(-Sk // ma.SUPER)
        blocks = torch.rand((1, Hq, nq, nk), generator=gen, device="cuda") < 0.6
        blocks[..., 0] = True
        dense = blocks.repeat_interleave(ma.SUPER, -2).repeat_interleave(ma.SUPER, -1)
        mask = dense[..., :Sq, :Sk] & (torch.rand((1, Hq, Sq, Sk), generator=gen,
                                                  device="cuda") < 0.8)
        mask[..., 3, :] = False  # a row that sees no key: O 0, lse +inf
    elif mask_kind == "keys":
        mask = torch.ones((B, 1, 1, Sk), dtype=torch.bool, device="cuda")
        mask[..., Sk * 2 // 3:] = False
    if bias_kind == "rows":
        bias = rand(1, Hq, Sq, Sk)
    elif bias_kind == "keys":
        bias = rand(1, Hq, 1, Sk)
    return q, k, v, do, mask, bias


def reference(q, k, v, mask, bias, causal, scale):
    """O and the base-2 lse in float64 (a row that sees no key: O 0, lse +inf)."""
    G = q.shape[1] // k.shape[1]
    s = q.double() @ k.double().repeat_interleave(G, 1).transpose(-1, -2) * scale
    if bias is not None:
        s = s + bias.double()
    keep = torch.ones(s.shape[-2:], dtype=torch.bool, device="cuda")
    if causal:
        keep = keep.tril()
    if mask is not None:
        keep = keep & mask
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ v.double().repeat_interleave(G, 1), torch.where(
        torch.isfinite(lse), lse * LOG2E, torch.full_like(lse, float("inf")))


def rel(x, r):
    return ((x.double() - r.double()).norm() / r.double().norm().clamp_min(1e-30)).item()


def check_lse(lse, ref):
    finite = torch.isfinite(ref)
    assert torch.equal(torch.isinf(lse), ~finite)
    assert rel(lse[finite], ref[finite]) <= 1e-3


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("mask_kind, bias_kind, causal",
                         [(None, None, True), ("rows", "keys", False), ("rows", "keys", True),
                          ("keys", "keys", False), ("keys", None, True), ("rows", None, False),
                          (None, "rows", True)])
@pytest.mark.parametrize("D", [64, 128])
def test_tma_forward_matches_float64_and_the_pointer_path(D, mask_kind, bias_kind, causal,
                                                          dtype_name):
    needs_sm90a()
    B, Hq, Hkv, Sq, Sk = 2, 4, 2, 1000, 1100
    q, k, v, do, mask, bias = make(B, Hq, Hkv, Sq, Sk, D, dtype_name, mask_kind, bias_kind,
                                   seed=D + causal)
    scale = D ** -0.5 * 0.8
    with knobs.scope(attention_tma="on", autotune="off"):
        assert tma_path(k, v, kernel="masked_fwd") and tma_path(k, v, kernel="masked_dq")
        # A per-element bias keeps both loops on cp.async: the host takes the pointer path.
        tma = mf.forward_launch(q, k, v, mask, bias, causal, scale, q, q)[2]["TMA"]
        assert tma == (bias_kind != "rows")
        o, lse = ma.attention_masked_forward(q, k, v, mask, bias, causal, scale)
        # The backward on the TMA forward's lse, its dQ kernel through the TMA too.
        dq, dk, dv, _ = ma.attention_masked_backward(q, k, v, o, lse, do, mask, bias, causal,
                                                     scale)
    with knobs.scope(attention_tma="off", autotune="off"):
        assert not mf.forward_launch(q, k, v, mask, bias, causal, scale, q, q)[2]["TMA"]
        o_ptr, lse_ptr = ma.attention_masked_forward(q, k, v, mask, bias, causal, scale)
        grads_ptr = ma.attention_masked_backward(q, k, v, o_ptr, lse_ptr, do, mask, bias,
                                                 causal, scale)
    torch.cuda.synchronize()
    ref_o, ref_lse = reference(q, k, v, mask, bias, causal, scale)
    bound, grad_bound = BOUNDS[dtype_name]
    assert torch.isfinite(o).all() and rel(o, ref_o) <= bound
    check_lse(lse, ref_lse)
    assert rel(o, o_ptr) <= bound and torch.equal(torch.isinf(lse), torch.isinf(lse_ptr))
    for got, want in zip((dq, dk, dv), grads_ptr[:3]):
        assert torch.isfinite(got).all() and rel(got, want) <= grad_bound


@pytest.mark.parametrize("D", [64, 128])
def test_tma_forward_other_tiles(D):
    # Every wgmma candidate tile (the autotuner's) through the kernel with TMA=True, a
    # block-sparse mask and a key bias, causal, ragged lengths over NaN-padded K and V heads.
    needs_sm90a()
    B, Hq, Hkv, Sq, Sk = 2, 4, 2, 333, 333
    q, k, v, _, mask, bias = make(B, Hq, Hkv, Sq, Sk, D, "float16", "rows", "keys", seed=D)
    scale = D ** -0.5
    ref_o, ref_lse = reference(q, k, v, mask, bias, True, scale)
    for block_m, block_n, num_warps, num_stages in WGMMA_CONFIGS["fwd"][D]:
        o = torch.full_like(q, float("nan"))
        lse = torch.full(q.shape[:3], float("nan"), device="cuda", dtype=torch.float32)
        with knobs.scope(attention_tma="on"):
            _, args, kwargs = mf.forward_launch(q, k, v, mask, bias, True, scale, o, lse)
        assert kwargs.pop("TMA")
        args = (q, *head_descriptors(k, v, block_m=block_n, block_n=block_n), *args[3:])
        ma.attention_masked_fwd_kernel[(math.ceil(Sq / block_m), B * Hq)](
            *args, **kwargs, TMA=True, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
            num_stages=num_stages)
        torch.cuda.synchronize()
        tile = (block_m, block_n, num_warps, num_stages)
        assert rel(o, ref_o) <= 5e-3, tile
        check_lse(lse, ref_lse)


@pytest.mark.parametrize("D", [64, 128])
def test_tma_dq_other_tiles(D):
    # Every wgmma candidate tile of the dQ kernel with TMA=True against the pointer path's dQ
    # (attention_masked_backward, knob off), a block-sparse mask and a key bias, causal,
    # ragged lengths over NaN-padded K and V heads.
    needs_sm90a()
    from tessera.ops.masked_attention import backward as mb
    from tessera.ops.masked_attention.blocks import masked_candidates
    B, Hq, Hkv, S = 2, 4, 2, 333
    q, k, v, do, mask, bias = make(B, Hq, Hkv, S, S, D, "float16", "rows", "keys", seed=D + 1)
    scale = D ** -0.5
    with knobs.scope(attention_tma="off"):
        o, lse = ma.attention_masked_forward(q, k, v, mask, bias, True, scale)
        want = ma.attention_masked_backward(q, k, v, o, lse, do, mask, bias, True, scale)[0]
    delta = (o.float() * do.float()).sum(-1)
    mask_arg, bias_arg, lists, NQ, NK, lb, lh, bs, ms = mf.prepare(q, k, mask, bias, True)
    st = lambda x: x.stride()[:3]  # noqa: E731
    for block_m, block_n, num_warps, num_stages in masked_candidates("dq", q):
        dq = torch.full_like(q, float("nan"))
        mb.attention_masked_bwd_dq_kernel[(math.ceil(S / block_m), B * Hq)](
            q, *head_descriptors(k, v, block_m=block_n, block_n=block_n), do, dq, lse, delta,
            bias_arg, mask_arg, *lists, scale, scale * LOG2E, Hq, Hq // Hkv, S, S, NQ, NK, lb,
            lh, *st(q), *st(k), *st(v), *st(do), *st(dq), *bs, *ms, D=D, SUPER=ma.SUPER,
            CAUSAL=True, HAS_MASK=ma.ROWS.value, HAS_BIAS=ma.KEYS.value, RELOAD=False,
            TMA=True, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
            num_stages=num_stages)
        torch.cuda.synchronize()
        assert torch.isfinite(dq).all() and rel(dq, want) <= 1e-2, (block_m, block_n)


def test_tma_falls_back_for_rows_the_tma_cannot_read():
    # K rows of 136 bytes (a view of D = 68 storage): not a multiple of 16, the pointer path.
    needs_sm90a()
    gen = torch.Generator(device="cuda").manual_seed(3)
    q = torch.randn((1, 2, 300, 64), device="cuda", dtype=torch.float16, generator=gen)
    k, v = (torch.randn((1, 2, 300, 68), device="cuda", dtype=torch.float16,
                        generator=gen)[..., :64] for _ in range(2))
    with knobs.scope(attention_tma="on"):
        assert not mf.forward_launch(q, k, v, None, None, True, 0.125, q, q)[2]["TMA"]
        o, lse = ma.attention_masked_forward(q, k, v, None, None, True, 0.125)
    torch.cuda.synchronize()
    ref_o, ref_lse = reference(q, k, v, None, None, True, 0.125)
    assert rel(o, ref_o) <= 5e-3
    check_lse(lse, ref_lse)
