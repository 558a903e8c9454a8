"""tessera.ops' fused attention on the GPU: forward (O, base-2
log-sum-exp) and backward (dQ, dK, dV) against float64 autograd of the plain formula, for
S in {1, 17, 128, 1000, 4096}, D in {16, 32, 64, 128, 256}, causal and not, fp16 and bf16
(float32 inputs, computed in tf32, on a subset), batch and heads > 1; outputs poisoned (NaN)
first; fresh random inputs. Then the torch.library ops through torch.compile(fullgraph=True)
and opcheck, strided views, and S = 65536 within a memory bound.

Bounds (docs/benchmarks.md for O): ‖O − ref‖ / ‖ref‖ ≤ 5e-3 fp16 and tf32, ≤ 1e-2 bf16; gradients
twice that (products of two rounded factors); lse (fp32) ≤ 1e-3.
"""
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera.ops.flash_attention as fa  # noqa: E402  (after the skips: it registers torch ops)
from tessera.config import knobs  # noqa: E402
from tessera.ops import attention, attention_backward, attention_forward  # noqa: E402

BOUNDS = {"float16": (5e-3, 1e-2), "bfloat16": (1e-2, 2e-2), "float32": (5e-3, 1e-2)}
HEAD_DIMS = [16, 32, 64, 128, 256]


def reference(q, k, v, do, causal, sm_scale):
    """(O, lse2, dQ, dK, dV) in float64 by autograd of softmax(q kᵀ·scale) v."""
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    scores = q @ k.transpose(-1, -2) * sm_scale
    if causal:
        S = q.shape[2]
        keep = torch.ones((S, S), dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    o = torch.softmax(scores, dim=-1) @ v
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do.double())
    lse2 = torch.logsumexp(scores.detach(), dim=-1) / math.log(2)
    return o.detach(), lse2, dq, dk, dv


def rel(out, ref):
    """‖out − ref‖ / ‖ref‖ (absolute where ref is 0: dQ and dK at S = 1); NaN fails."""
    out, ref = out.double(), ref.double()
    norm = torch.linalg.vector_norm(ref).item()
    error = (torch.linalg.vector_norm(out - ref) / (norm if norm else 1.0)).item()
    return float("inf") if math.isnan(error) else error


def check(B, H, S, D, causal, dtype_name, seed):
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, do = (torch.randn((B, H, S, D), device="cuda", dtype=dtype, generator=gen)
                   for _ in range(4))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)
    grads = [torch.full_like(q, float("nan")) for _ in range(3)]
    sm_scale = D ** -0.5
    got_o, got_lse = attention_forward(q, k, v, causal, sm_scale, out=o, lse=lse)
    got = attention_backward(q, k, v, o, lse, do, causal, sm_scale, dq=grads[0],
                             dk=grads[1], dv=grads[2])
    torch.cuda.synchronize()
    assert got_o is o and got_lse is lse and all(g is x for g, x in zip(got, grads))
    ref = reference(q, k, v, do, causal, sm_scale)
    bound, grad_bound = BOUNDS[dtype_name]
    errors = {name: rel(x, r) for name, x, r in zip(("o", "lse", "dq", "dk", "dv"),
                                                     (o, lse, *grads), ref)}
    assert errors["o"] <= bound, errors
    assert errors["lse"] <= 1e-3, errors
    assert max(errors["dq"], errors["dk"], errors["dv"]) <= grad_bound, errors


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", HEAD_DIMS)
@pytest.mark.parametrize("S", [1, 17, 128, 1000, 4096])
def test_forward_backward_match_float64(S, D, causal, dtype_name):
    B, H = (2, 3) if S <= 1000 else (1, 2)
    check(B, H, S, D, causal, dtype_name, seed=S * 1000 + D * 2 + causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", HEAD_DIMS)
@pytest.mark.parametrize("S", [17, 1000])
def test_float32_inputs_in_tf32(S, D, causal):
    check(2, 3, S, D, causal, "float32", seed=S * 1000 + D * 2 + causal + 7)


@pytest.mark.parametrize("tma", ["on", "off"])
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("S", [77, 1000])
def test_atomic_dq_matches_float64(S, causal, dtype_name, tma):
    # dQ accumulated by the dK/dV kernel (TMA reductions per tile, or pointer atomics), many
    # key programs adding into the same rows; ragged S over NaN-padded heads; D = 64 (at
    # D = 128 every candidate spills: docs/perf/attention_tma.md).
    B, H, D = 2, 3, 64
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device="cuda").manual_seed(S + causal * 7 + len(tma))
    q, k, v, do = (padded(torch.randn((B, H, S, D), device="cuda", dtype=dtype,
                                      generator=gen), pad=16)[0] for _ in range(4))
    with knobs.scope(attention_tma=tma):
        assert fa.tma_path(q, k, v, do, kernel="bwd", causal=causal) == (tma == "on")
        o, lse = attention_forward(q, k, v, causal)
        dq, dk, dv = attention_backward(q, k, v, o, lse, do, causal, atomic_dq=True)
    torch.cuda.synchronize()
    ref = reference(q, k, v, do, causal, D ** -0.5)
    grad_bound = BOUNDS[dtype_name][1]
    assert max(rel(g, r) for g, r in zip((dq, dk, dv), ref[2:])) <= grad_bound


def test_strided_views_and_default_outputs():
    # q, k, v (and dO) as views of one (B, S, 3, H, D) projection: non-contiguous strides.
    B, S, H, D = 2, 300, 4, 64
    qkv = torch.randn((B, S, 3, H, D), device="cuda", dtype=torch.float16)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    do = torch.randn((B, S, H, D), device="cuda", dtype=torch.float16).transpose(1, 2)
    o, lse = attention_forward(q, k, v, causal=True)
    dq, dk, dv = attention_backward(q, k, v, o, lse, do, causal=True)
    ref = reference(q, k, v, do, True, D ** -0.5)
    for name, x, r in zip(("o", "lse", "dq", "dk", "dv"), (o, lse, dq, dk, dv), ref):
        assert rel(x, r) <= {"o": 5e-3, "lse": 1e-3}.get(name, 1e-2), name


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16", "float32"])
def test_torch_compile_fullgraph_and_autograd(dtype_name):
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device="cuda").manual_seed(3)
    B, H, S, D = 2, 4, 777, 64
    q, k, v = (torch.randn((B, H, S, D), device="cuda", dtype=dtype, generator=gen)
               .requires_grad_() for _ in range(3))
    compiled = torch.compile(lambda q, k, v: attention(q, k, v, causal=True),
                             fullgraph=True)  # a graph break raises
    o = compiled(q, k, v)
    o.sum().backward()
    ref = reference(q, k, v, torch.ones_like(q), True, D ** -0.5)
    bound, grad_bound = BOUNDS[dtype_name]
    assert rel(o, ref[0]) <= bound
    for x, r in zip((q, k, v), ref[2:]):
        assert rel(x.grad, r) <= grad_bound


def test_torch_ops_opcheck():
    gen = torch.Generator(device="cuda").manual_seed(4)
    q, k, v, do = (torch.randn((1, 2, 130, 128), device="cuda", dtype=torch.bfloat16,
                               generator=gen) for _ in range(4))
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    torch.library.opcheck(torch.ops.tessera.attention_forward.default, (q, k, v, False, 0.1))
    o, lse = torch.ops.tessera.attention_forward(q, k, v, False, 0.1)
    torch.library.opcheck(torch.ops.tessera.attention_backward.default,
                          (q.detach(), k.detach(), v.detach(), o.detach(), lse, do, False, 0.1))


def test_sequence_65536_forward_backward_memory():
    # The CS336 long-sequence case: batch 1, one head, causal. Memory stays O(S·D): the score
    # matrix alone would take 65536² · 2 bytes = 8 GiB. O and dQ are checked on a slice of
    # query rows (each row of O and dQ depends only on its own scores).
    S, D, rows = 65536, 64, slice(65536 - 100, 65536)
    gen = torch.Generator(device="cuda").manual_seed(6)
    q, k, v, do = (torch.randn((1, 1, S, D), device="cuda", dtype=torch.bfloat16,
                               generator=gen) for _ in range(4))
    # A first pass autotunes the kernels for this shape (the timing's L2-flush buffer and the
    # candidates' extra outputs are the tuner's, not the attention's): measure the second.
    o, lse = attention_forward(q, k, v, causal=True)
    attention_backward(q, k, v, o, lse, do, causal=True)
    del o, lse
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    o, lse = attention_forward(q, k, v, causal=True)
    dq, dk, dv = attention_backward(q, k, v, o, lse, do, causal=True)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    print(f"S = 65536, D = 64: forward + backward peak {peak / 2 ** 20:.1f} MiB")
    assert peak <= 16 * q.numel() * q.element_size(), peak  # O, lse, delta, dQ, dK, dV
    assert all(torch.isfinite(x).all() for x in (o, dq, dk, dv))
    qs, kd, vd, dos = q[0, 0, rows].double(), k[0, 0].double(), v[0, 0].double(), do[0, 0, rows]
    scores = qs @ kd.T * D ** -0.5
    keep = torch.arange(S, device="cuda")[None, :] <= torch.arange(S, device="cuda")[rows, None]
    p = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    dp = dos.double() @ vd.T
    ds = p * (dp - (p * dp).sum(-1, keepdim=True))
    assert rel(o[0, 0, rows], p @ vd) <= 1e-2
    assert rel(dq[0, 0, rows], ds @ kd * D ** -0.5) <= 2e-2


# ---- The masked / unmasked split of the kernels' walks, with blocks the defaults do not use ----

def padded(x, pad=40):
    """x as the first S rows of a (B, H, S + pad, D) tensor whose pad is NaN."""
    B, H, S, D = x.shape
    base = torch.full((B, H, S + pad, D), float("nan"), device=x.device, dtype=x.dtype)
    base[:, :, :S] = x
    return base[:, :, :S], base


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("blocks", [(128, 32, 8, 2), (64, 16, 4, 2), (16, 64, 4, 2),
                                    (32, 64, 4, 3)], ids=lambda b: f"{b[0]}x{b[1]}")
@pytest.mark.parametrize("S", [5, 1000, 1024])
def test_split_walks_with_other_blocks(S, blocks, causal):
    # S = 5: every unmasked loop empty; 1024: a multiple of every block; 1000: both loops. The
    # inputs are views of NaN-padded tensors and the outputs' pads must stay NaN: a load past
    # S in an unmasked loop, a key wrongly visible or a store past S fails.
    block_m, block_n, num_warps, num_stages = blocks
    B, H, D = 2, 3, 64
    gen = torch.Generator(device="cuda").manual_seed(S + block_m + causal)
    q, k, v, do = (padded(torch.randn((B, H, S, D), device="cuda", dtype=torch.float16,
                                      generator=gen))[0] for _ in range(4))
    (o, o_pad), (dq, dq_pad), (dk, dk_pad), (dv, dv_pad) = (
        padded(torch.full((B, H, S, D), float("nan"), device="cuda", dtype=torch.float16))
        for _ in range(4))
    lse = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)
    sm_scale = D ** -0.5
    st = lambda x: x.stride()[:3]  # noqa: E731
    meta = dict(D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, num_warps=num_warps,
                num_stages=num_stages)
    fa.attention_fwd_kernel[(math.ceil(S / block_m), B * H)](
        q, k, v, o, lse, sm_scale * fa.LOG2E, H, S, *st(q), *st(k), *st(v), *st(o), **meta)
    delta = (o.float() * do.float()).sum(-1).contiguous()
    common = (lse, delta, sm_scale, sm_scale * fa.LOG2E, H, S, *st(q), *st(k), *st(v),
              *st(do))
    fa.attention_bwd_dkdv_kernel[(math.ceil(S / block_n), B * H)](
        q, k, v, do, dk, dv, *common, *st(dk), *st(dv), **meta)
    fa.attention_bwd_dq_kernel[(math.ceil(S / block_m), B * H)](
        q, k, v, do, dq, *common, *st(dq), **meta)
    torch.cuda.synchronize()
    ref = reference(q, k, v, do, causal, sm_scale)
    for name, x, r, pad in zip(("o", "lse", "dq", "dk", "dv"), (o, lse, dq, dk, dv), ref,
                               (o_pad, None, dq_pad, dk_pad, dv_pad)):
        assert rel(x, r) <= {"o": 5e-3, "lse": 1e-3}.get(name, 1e-2), (name, rel(x, r))
        if pad is not None:
            assert torch.isnan(pad[:, :, S:]).all(), f"{name}: a store past S"


# ---- The forward's TMA path (sm_90a: (B, H, S, D) host tensor descriptors, rank 4) ----

def needs_sm90a():
    from tessera.runtime.launcher import arch_of
    if arch_of(torch.cuda.current_device()) != "sm_90a":
        pytest.skip("the TMA path is sm_90a's")


@pytest.mark.parametrize("specialize", [False, True], ids=["tma", "warp_specialized"])
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("S", [1, 77, 1000])
def test_tma_forward_matches_float64(S, D, causal, dtype_name, specialize):
    # Ragged S over NaN-padded heads: a tile crossing S must read the descriptor's zero fill,
    # never the pad or the next head. The outputs' pads stay NaN; the backward runs on the
    # TMA forward's O and lse. The same inputs through the pointer path (knob off) agree.
    # Specialized: the unmasked loop's copies from a producer warpgroup. Default tiles (no
    # autotuning: the test stays fast; test_tma_forward_other_tiles launches the others).
    needs_sm90a()
    with knobs.scope(warp_specialize=specialize, autotune="off", attention_tma="on"):
        tma_forward_case(S, D, causal, dtype_name)


def tma_forward_case(S, D, causal, dtype_name):
    B, H = 2, 3
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device="cuda").manual_seed(S * 10 + D + causal)
    q, k, v, do = (padded(torch.randn((B, H, S, D), device="cuda", dtype=dtype,
                                      generator=gen), pad=16)[0] for _ in range(4))
    assert fa.tma_path(q, k, v)
    o, o_pad = padded(torch.full((B, H, S, D), float("nan"), device="cuda", dtype=dtype))
    o, lse = attention_forward(q, k, v, causal, out=o)
    dq, dk, dv = attention_backward(q, k, v, o, lse, do, causal)
    with knobs.scope(tma=False):
        assert not fa.tma_path(q, k, v)
        o_ptr, lse_ptr = attention_forward(q, k, v, causal)
    torch.cuda.synchronize()
    ref = reference(q, k, v, do, causal, D ** -0.5)
    bound, grad_bound = BOUNDS[dtype_name]
    assert rel(o, ref[0]) <= bound and rel(lse, ref[1]) <= 1e-3
    assert max(rel(g, r) for g, r in zip((dq, dk, dv), ref[2:])) <= grad_bound
    assert torch.isnan(o_pad[:, :, S:]).all(), "a store past S"
    assert rel(o, o_ptr) <= bound and rel(lse, lse_ptr) <= 1e-5


@pytest.mark.parametrize("specialize", [False, True], ids=["tma", "warp_specialized"])
@pytest.mark.parametrize("D", [64, 128])
def test_tma_forward_other_tiles(D, specialize):
    # Every wgmma candidate tile (the autotuner's) through the kernel directly, causal, ragged S
    # over NaN-padded heads. A tile whose rings do not fit the shared memory (specialized:
    # the producer's rings live beside the masked loop's) is skipped, as the autotuner does.
    needs_sm90a()
    from tessera.errors import OutOfResources
    from tessera.ops.flash_attention.forward import head_descriptors
    B, H, S = 2, 3, 333
    gen = torch.Generator(device="cuda").manual_seed(D + specialize)
    q, k, v = (padded(torch.randn((B, H, S, D), device="cuda", dtype=torch.float16,
                                  generator=gen), pad=16)[0] for _ in range(3))
    ref = reference(q, k, v, torch.zeros_like(q), True, D ** -0.5)
    st = lambda x: x.stride()[:3]  # noqa: E731
    ran = 0
    # OVERLAP's tiles too (FlashAttention-3's order; not beside a producer warpgroup).
    overlap = [] if specialize else fa.OVERLAP_TILES["fwd"].get(D, [])
    tiles = [(*t, False) for t in fa.WGMMA_CONFIGS["fwd"][D]] + [(*t, True) for t in overlap]
    for block_m, block_n, num_warps, num_stages, overlapped in tiles:
        o = torch.full_like(q, float("nan"))
        lse = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)
        descs = head_descriptors(q, k, v, block_m=block_m, block_n=block_n)
        try:
            fa.attention_fwd_kernel[(math.ceil(S / block_m), B * H)](
                *descs, o, lse, D ** -0.5 * fa.LOG2E, H, S, *st(q), *st(k), *st(v),
                *st(o), D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=True, TMA=True,
                SPECIALIZE=specialize, OVERLAP=overlapped, num_warps=num_warps,
                num_stages=num_stages)
        except OutOfResources:
            continue
        torch.cuda.synchronize()
        ran += 1
        tile = (block_m, block_n, num_warps, num_stages, overlapped)
        assert rel(o, ref[0]) <= 5e-3 and rel(lse, ref[1]) <= 1e-3, tile
    assert ran > 0


@pytest.mark.parametrize("D", [64, 128])
def test_tma_forward_with_strided_heads(D):
    # (B, S, H, D) memory viewed as (B, H, S, D): the 4-D descriptors take the batch, head and
    # row strides as they are (a 3-D (B·H, S, D) view could not), ragged S.
    needs_sm90a()
    B, H, S = 2, 3, 333
    gen = torch.Generator(device="cuda").manual_seed(D + 11)
    q, k, v = (torch.randn((B, S, H, D), device="cuda", dtype=torch.float16,
                           generator=gen).transpose(1, 2) for _ in range(3))
    with knobs.scope(attention_tma="on", autotune="off"):
        assert fa.tma_path(q, k, v)
        o, lse = attention_forward(q, k, v, causal=True)
    torch.cuda.synchronize()
    ref = reference(q, k, v, torch.zeros_like(q), True, D ** -0.5)
    assert rel(o, ref[0]) <= 5e-3 and rel(lse, ref[1]) <= 1e-3


def test_tma_falls_back_for_rows_the_tma_cannot_read():
    # Rows of 136 bytes (a view of D = 68 storage): not a multiple of 16, the pointer path.
    needs_sm90a()
    B, H, S, D = 2, 2, 300, 64
    gen = torch.Generator(device="cuda").manual_seed(7)
    q, k, v = (torch.randn((B, H, S, D + 4), device="cuda", dtype=torch.float16,
                           generator=gen)[..., :D] for _ in range(3))
    with knobs.scope(attention_tma="on"):
        assert not fa.tma_path(q, k, v) and fa.tma_path(q.contiguous(), k.contiguous(),
                                                        v.contiguous())
        o, lse = attention_forward(q, k, v, causal=True)
    torch.cuda.synchronize()
    ref = reference(q, k, v, torch.zeros_like(q), True, D ** -0.5)
    assert rel(o, ref[0]) <= 5e-3 and rel(lse, ref[1]) <= 1e-3


# ---- The backward's TMA path (sm_90a: the dK/dV and dQ kernels' per-head descriptors) ----

@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("S", [1, 77, 1000])
def test_tma_backward_matches_float64(S, D, causal, dtype_name):
    # TESSERA_ATTENTION_TMA=on: dQ, dK, dV through the TMA kernels on ragged S over NaN-padded
    # heads (a tile crossing S reads the descriptor's zero fill), against float64 and the
    # pointer path's (knob off) on the same inputs; the gradients' pads stay NaN. Default tiles.
    needs_sm90a()
    B, H = 2, 3
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device="cuda").manual_seed(S * 10 + D + causal + 1)
    q, k, v, do = (padded(torch.randn((B, H, S, D), device="cuda", dtype=dtype,
                                      generator=gen), pad=16)[0] for _ in range(4))
    grads, pads = zip(*(padded(torch.full((B, H, S, D), float("nan"), device="cuda",
                                          dtype=dtype)) for _ in range(3)))
    with knobs.scope(autotune="off", attention_tma="on"):
        assert fa.tma_path(q, k, v, do, kernel="bwd")
        o, lse = attention_forward(q, k, v, causal)
        attention_backward(q, k, v, o, lse, do, causal, dq=grads[0], dk=grads[1], dv=grads[2])
    with knobs.scope(autotune="off", attention_tma="off"):
        pointer = attention_backward(q, k, v, o, lse, do, causal)
    torch.cuda.synchronize()
    ref = reference(q, k, v, do, causal, D ** -0.5)
    grad_bound = BOUNDS[dtype_name][1]
    for name, got, want, by_pointer, pad in zip(("dq", "dk", "dv"), grads, ref[2:], pointer,
                                                pads):
        assert rel(got, want) <= grad_bound, (name, rel(got, want))
        assert rel(got, by_pointer) <= grad_bound, (name, "vs the pointer path")
        assert torch.isnan(pad[:, :, S:]).all(), f"{name}: a store past S"


def test_tma_backward_other_tiles():
    # Every wgmma candidate tile of both kernels (the autotuner's), D 64 and 128, causal, ragged
    # S over NaN-padded heads, launched directly with TMA=True.
    needs_sm90a()
    from tessera.runtime.allocation import default_allocator
    B, H, S = 2, 3, 333
    st = lambda x: x.stride()[:3]  # noqa: E731
    for D in (64, 128):
        gen = torch.Generator(device="cuda").manual_seed(D)
        q, k, v, do = (padded(torch.randn((B, H, S, D), device="cuda", dtype=torch.float16,
                                          generator=gen), pad=16)[0] for _ in range(4))
        o, lse2, *ref = reference(q, k, v, do, True, D ** -0.5)  # ref: dQ, dK, dV
        lse = lse2.float().contiguous()
        delta = (do.double() * o).sum(-1).float().contiguous()
        scale = D ** -0.5
        with default_allocator(lambda size, align, stream: torch.empty(
                size, device="cuda", dtype=torch.int8)):
            for tile in fa.WGMMA_CONFIGS["dkdv"][D]:
                dk, dv = (torch.full_like(q, float("nan")) for _ in range(2))
                fa.attention_bwd_dkdv_kernel[(math.ceil(S / tile[1]), B * H)](
                    q, k, v, do, dk, dv, lse, delta, scale, scale * fa.LOG2E, H, S, *st(q),
                    *st(k), *st(v), *st(do), *st(dk), *st(dv), D=D, BLOCK_M=tile[0],
                    BLOCK_N=tile[1], CAUSAL=True, TMA=True, num_warps=tile[2],
                    num_stages=tile[3])
                torch.cuda.synchronize()
                assert rel(dk, ref[1]) <= 1e-2 and rel(dv, ref[2]) <= 1e-2, ("dkdv", D, tile)
            for tile in fa.WGMMA_CONFIGS["dq"][D]:
                dq = torch.full_like(q, float("nan"))
                fa.attention_bwd_dq_kernel[(math.ceil(S / tile[0]), B * H)](
                    q, k, v, do, dq, lse, delta, scale, scale * fa.LOG2E, H, S, *st(q),
                    *st(k), *st(v), *st(do), *st(dq), D=D, BLOCK_M=tile[0], BLOCK_N=tile[1],
                    CAUSAL=True, TMA=True, num_warps=tile[2], num_stages=tile[3])
                torch.cuda.synchronize()
                assert rel(dq, ref[0]) <= 1e-2, ("dq", D, tile)
