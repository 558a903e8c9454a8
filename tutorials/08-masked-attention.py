# %% [markdown]
# # Masked attention with a learnable bias
#
# Tutorials 06 and 07 built fused attention for two fixed patterns: all keys, or causal.
# Researchers go further: documents packed in one sequence, sliding windows, ALiBi or a
# learned position bias, sparse patterns chosen at run time. This tutorial adds a boolean
# `mask` and an additive `bias`, both tensors known only at run time:
#
#     O = softmax(Q Kᵀ · scale + bias, over the keys where mask is true) V
#
# You will learn:
# - broadcasting without copies: a mask or bias of shape `(B|1, H|1, Sq|1, Sk)` is read
#   through strides that are 0 along its size-1 dims;
# - skipping work found at run time: a first, small kernel classes every 128 x 128 tile of
#   the mask as dead, partial or full, the host turns that table into per-row lists, and the
#   attention loop walks only the live tiles, its trip count the list's length;
# - rows that see no key at all: output 0 and zero gradients, never NaN;
# - the library op `tessera.ops.attention_masked` (grouped-query heads, the gradient of the
#   bias, `torch.compile` without graph breaks), checked against float64 and, with a GPU,
#   benchmarked against SDPA with the mask materialized and against FlexAttention.
#
# With a GPU the tutorial runs on it; else through the interpreter (CPU) at small sizes.

# %%
import os
import sys

import numpy as np
import tessera
import tessera.language as tl
from tessera.ops.flash_attention import LOG2E
from tessera.ops.flash_attention.forward import load_rows, offsets_of, rows_of
from tessera.ops.masked_attention.forward import scores
from tessera.testing import gpu_available, relative_error

try:
    import torch
except ImportError:
    torch = None

# %% [markdown]
# ## Which tiles are alive
# A tile of 128 query rows x 128 keys where the mask is false everywhere contributes nothing:
# neither to O (its probabilities are 0) nor to any gradient. Finding those tiles needs the
# mask, which changes from batch to batch, so a kernel reads it once: one program per
# tile and mask head (many small programs: the S² bytes of the mask are read by the whole
# GPU), 32 rows at a time, counting the visible pairs. 0 visible: dead; all 128 x 128 (and
# inside the sequences): full, where the attention kernel need not even load the mask;
# anything else: partial. Causal and the ends
# of the sequences enter the same count.

# %%
SUPER = 128


@tessera.jit
def live_tiles_kernel(mask_ptr, table_ptr, Hm, Sq, Sk, NQ, NK, stride_mb, stride_mh,
                      stride_mm, stride_mn, SUPER: tl.constexpr, CHUNK: tl.constexpr):
    qb, kb, head = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    base = mask_ptr + (head // Hm) * stride_mb + (head % Hm) * stride_mh
    cols = kb * SUPER + tl.arange(0, SUPER)
    live = 0
    for r in range(0, SUPER, CHUNK):
        rows = qb * SUPER + r + tl.arange(0, CHUNK)
        keep = (rows[:, None] < Sq) & (cols[None, :] < Sk)
        bits = tl.load(base + rows[:, None] * stride_mm + cols[None, :] * stride_mn,
                       mask=keep, other=0)
        live += tl.sum((keep & (bits != 0)).to(tl.int32))
    kind = tl.where(live == 0, 0, tl.where(live == SUPER * SUPER, 2, 1))
    tl.store(table_ptr + (head * NQ + qb) * NK + kb, kind.to(tl.int32))


def strides0(x):
    """x's strides in elements, 0 along its size-1 dims: broadcasting without a copy."""
    return tuple(0 if n == 1 else s // x.itemsize for n, s in zip(x.shape, x.strides))


def live_lists(mask, Sq, Sk):
    """Per (mask head, query tile): the key tiles to visit, full ones first, then partial
    ones (a stable sort of the table, descending), and how many of each."""
    Bm, Hm = mask.shape[:2]
    NQ, NK = tessera.cdiv(Sq, SUPER), tessera.cdiv(Sk, SUPER)
    table = np.empty((Bm * Hm, NQ, NK), np.int32)
    live_tiles_kernel[(NQ, NK, Bm * Hm)](mask.view(np.uint8), table, Hm, Sq, Sk, NQ, NK,
                                     *strides0(mask), SUPER=SUPER, CHUNK=32)
    order = np.argsort(-table, axis=-1, kind="stable").astype(np.int32)
    counts = np.stack([(table == 2).sum(-1), (table == 1).sum(-1)], -1).astype(np.int32)
    return table, order, counts


# %% [markdown]
# ## The forward
# Tutorial 06's online softmax, with three changes:
# 1. the key loop runs over a list: step `j` visits tile `blocks[j // R]`, sub-block `j % R`
#    (R = 128 / BLOCK_N). The loop body is the dense one, so the compiler pipelines it the
#    same way: the index load runs ahead with the K and V copies (predicated past the end);
# 2. `scores` (from `tessera.ops`) adds the bias (natural-log units, times log2 e since the
#    kernel works in base 2) and, for partial tiles only, loads the mask tile and sets -inf
#    where it is false;
# 3. a row that has seen no key yet has a running max of -inf, and `-inf - (-inf)` is NaN:
#    the exponent subtracts 0 instead (`m_use`), so such a row keeps `l = 0`, its output is
#    0 and its log-sum-exp +inf (the backward's P is then 0 too).
#
# The library's kernel (`tessera.ops.masked_attention`) is this one plus grouped-query heads
# and the float32 / large-head-dim variants; its backward walks the transposed lists.

# %%
@tessera.jit
def masked_steps(acc, l_i, m_i, q, k_head, v_head, k_offs, v_offs, bias_head, mask_head,
                 blocks, count, rows, Sq, Sk, qk_scale, stride_ks, stride_bm, stride_bn,
                 stride_mm, stride_mn, BLOCK_N: tl.constexpr, PARTIAL: tl.constexpr):
    for j in range(0, count * (128 // BLOCK_N)):
        start_n = tl.load(blocks + j // (128 // BLOCK_N)) * 128 + (j % (128 // BLOCK_N)) * BLOCK_N
        cols = start_n + tl.arange(0, BLOCK_N)
        k = load_rows(k_head + (k_offs + start_n * stride_ks), cols, Sk, PARTIAL)
        v = load_rows(v_head + (v_offs + start_n * stride_ks), cols, Sk, PARTIAL)
        s = scores(tl.dot(q, tl.trans(k)), qk_scale, bias_head, mask_head, rows[:, None],
                   cols[None, :], Sq, Sk, stride_bm, stride_bn, stride_mm, stride_mn,
                   PARTIAL, True, True, False)
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(k.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@tessera.jit
def masked_fwd_kernel(q_ptr, k_ptr, v_ptr, bias_ptr, mask_ptr, o_ptr, blocks_ptr, counts_ptr,
                      qk_scale, H, Sq, Sk, NQ, NK, list_b, list_h, stride_b, stride_h,
                      stride_s, stride_bb, stride_bh, stride_bm, stride_bn, stride_mb,
                      stride_mh, stride_mm, stride_mn, D: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_b, off_h = tl.program_id(1) // H, tl.program_id(1) % H
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = load_rows(rows_of(q_ptr, stride_b, stride_h, stride_s, off_b, off_h, rows, D), rows,
                  Sq, True)
    head = off_b * stride_b + off_h * stride_h
    offs = offsets_of(tl.arange(0, BLOCK_N), stride_s, D)
    bias_head = bias_ptr + off_b * stride_bb + off_h * stride_bh
    mask_head = mask_ptr + off_b * stride_mb + off_h * stride_mh
    entry = (off_b * list_b + off_h * list_h) * NQ + start_m * BLOCK_M // 128
    full = tl.load(counts_ptr + entry * 2)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    acc, l_i, m_i = masked_steps(  # full tiles: no mask loaded
        acc, l_i, m_i, q, k_ptr + head, v_ptr + head, offs, offs, bias_head, mask_head,
        blocks_ptr + entry * NK, full, rows, Sq, Sk, qk_scale, stride_s, stride_bm, stride_bn,
        stride_mm, stride_mn, BLOCK_N, False)
    acc, l_i, m_i = masked_steps(  # partial tiles
        acc, l_i, m_i, q, k_ptr + head, v_ptr + head, offs, offs, bias_head, mask_head,
        blocks_ptr + entry * NK + full, tl.load(counts_ptr + entry * 2 + 1), rows, Sq, Sk,
        qk_scale, stride_s, stride_bm, stride_bn, stride_mm, stride_mn, BLOCK_N, True)
    acc = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(rows_of(o_ptr, stride_b, stride_h, stride_s, off_b, off_h, rows, D),
             acc.to(o_ptr.dtype.element_ty), mask=rows[:, None] < Sq)


def masked_attention(q, k, v, mask, bias, BLOCK_M=64, BLOCK_N=32):
    """O for NumPy (B, H, S, D) q, k, v of one shape, a bool mask and a bias that broadcast."""
    B, H, S, D = q.shape
    _, order, counts = live_lists(mask, S, S)
    Bm, Hm = mask.shape[:2]
    o = np.empty_like(q)
    masked_fwd_kernel[(tessera.cdiv(S, BLOCK_M), B * H)](
        q, k, v, bias, mask.view(np.uint8), o, order, counts, D ** -0.5 * LOG2E, H, S, S,
        tessera.cdiv(S, SUPER), tessera.cdiv(S, SUPER), Hm if Bm > 1 else 0,
        1 if Hm > 1 else 0, *strides0(q)[:3], *strides0(bias), *strides0(mask), D=D,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=4, num_stages=2)
    return o


# %% [markdown]
# ## Three masks and a bias, as tensors
# - a document mask: tokens see earlier tokens of their own document (packed sequences);
# - a sliding window: |i - j| < W;
# - an ALiBi-style bias: -slope_h · |i - j|, one slope per head, shape (1, H, Sq, Sk); and a
#   per-key bias (1, H, 1, Sk), which broadcasts over the query rows.
# Each is checked against float64 NumPy, with some rows masked out entirely.

# %%
def document_mask(S, n_docs):
    doc = np.arange(S) * n_docs // S
    i = np.arange(S)
    return ((doc[:, None] == doc[None, :]) & (i[None, :] <= i[:, None]))[None, None]


def window_mask(S, width):
    i = np.arange(S)
    return (np.abs(i[:, None] - i[None, :]) < width)[None, None]


def alibi(H, S):
    slopes = 2.0 ** (-8.0 * np.arange(1, H + 1) / H)
    i = np.arange(S)
    return (-slopes[:, None, None] * np.abs(i[:, None] - i[None, :]))[None]


def reference(q, k, v, mask, bias):
    s = q @ np.swapaxes(k, -1, -2) * q.shape[-1] ** -0.5 + bias
    s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    total = p.sum(-1, keepdims=True)
    return (p / np.where(total > 0, total, 1)) @ v


def check(B, H, S, D, dtype, cast):
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((B, H, S, D)) for _ in range(3))
    cases = {"document": (document_mask(S, 3), alibi(H, S)),
             "window": (window_mask(S, S // 5), rng.standard_normal((1, H, 1, S)))}
    for name, (mask, bias) in cases.items():
        mask = mask.copy()
        mask[..., S // 3, :] = False  # a row that sees nothing: 0, not NaN
        x = [cast(t, dtype) for t in (q, k, v)]
        o = masked_attention(*x, mask, cast(bias, "float32"))
        ref = reference(*(t.astype(np.float64) for t in (q, k, v)), mask, bias)
        error = relative_error(np.asarray(o, np.float64), ref)
        assert error < 1e-2 and np.isfinite(np.asarray(o, np.float64)).all(), (name, error)
        table = live_lists(mask, S, S)[0]
        print(f"{name:>9} mask, S={S}, D={D}, {dtype}: error {error:.1e}; tiles dead/partial/"
              f"full {[int((table == c).sum()) for c in (0, 1, 2)]}")


# The tutorial's kernel takes NumPy arrays: its checks run in the interpreter, GPU or not.
with tessera.config.knobs.scope(interpret=True):
    check(1, 2, 300, 32, "float16",
          lambda t, d: t.astype({"float16": np.float16, "float32": np.float32}[d]))

# %% [markdown]
# ## The library op: gradients, grouped heads, torch.compile
# `tessera.ops.attention_masked(q, k, v, mask=, bias=, causal=, scale=)` is a
# `torch.library` op: its backward gives dq, dk, dv and, when the bias requires grad, dbias
# summed over the dims along which the bias broadcasts (a per-head ALiBi slope table learns
# from every batch and row). `k` and `v` may have fewer heads than `q` (grouped-query
# attention). Here: the gradients against float64 autograd, through `torch.compile`.

# %%
def check_op(device, B=2, Hq=4, Hkv=2, S=200, D=32, dtype_name="bfloat16"):
    from tessera.ops import attention_masked
    gen = torch.Generator().manual_seed(0)
    dtype = getattr(torch, dtype_name)
    q = torch.randn((B, Hq, S, D), generator=gen).to(device, dtype).requires_grad_()
    k, v = (torch.randn((B, Hkv, S, D), generator=gen).to(device, dtype).requires_grad_()
            for _ in range(2))
    mask = torch.from_numpy(document_mask(S, 3) | window_mask(S, 16)).to(device)
    bias = torch.from_numpy(alibi(Hq, S)).to(device, dtype).requires_grad_()
    compiled = torch.compile(attention_masked, fullgraph=True)
    o = compiled(q, k, v, mask=mask, bias=bias)
    o.sum().backward()
    x64 = [t.detach().double().requires_grad_() for t in (q, k, v, bias)]
    s = x64[0] @ x64[1].repeat_interleave(Hq // Hkv, 1).transpose(-1, -2) * D ** -0.5 + x64[3]
    ref = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ x64[2].repeat_interleave(
        Hq // Hkv, 1)
    ref.sum().backward()
    for name, got, want in (("o", o, ref), *zip(("dq", "dk", "dv", "dbias"),
                                                (q.grad, k.grad, v.grad, bias.grad),
                                                (t.grad for t in x64))):
        error = ((got.double() - want).norm() / want.norm()).item()
        assert error < 3e-2, (name, error)
    print(f"attention_masked on {device} ({dtype_name}, GQA {Hq}/{Hkv}, torch.compile): "
          f"o, dq, dk, dv, dbias ok")


if torch is not None:
    check_op("cuda" if gpu_available() else "cpu", S=1000 if gpu_available() else 150)

# %% [markdown]
# ## Benchmark
# Forward + backward time at S = 4k-16k (B·S = 16k tokens, H = 8, D = 128), a document mask
# of 8 documents and a learned per-key bias, against SDPA (memory-efficient backend) given
# the additive mask materialized, and FlexAttention (`flex_attention` compiled, with a
# `score_mod` reading the bias and a `block_mask` from the same mask).
# benchmarks/attention_masked.py runs the full comparison, with peak memory.

# %%
PROVIDERS = {"tessera": "Tessera", "flex": "FlexAttention", "efficient": "SDPA efficient"}


@tessera.testing.perf_report(tessera.testing.Benchmark(
    x_names=["S"], x_vals=[4096, 8192, 16384], line_arg="provider",
    line_vals=list(PROVIDERS), line_names=list(PROVIDERS.values()), ylabel="ms",
    plot_name="masked-attention-fwd-bwd", args={"D": 128}))
def bench(S, D, provider):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "benchmarks"))
    import attention_masked as suite
    from tessera.testing import do_bench
    gen = torch.Generator(device="cuda").manual_seed(0)
    B, H = 16384 // S, 8
    q, k, v = (torch.randn((B, H, S, D), device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    bias = torch.zeros((1, H, 1, S), device="cuda", dtype=torch.bfloat16, requires_grad=True)
    fn = suite.providers(torch, q, k, v, suite.make_mask(torch, "document", S, gen),
                         bias)[provider]
    fn = fn() if provider == "flex" else fn
    return do_bench(lambda: fn().sum().backward(), grad_to_none=[q, k, v, bias])


if gpu_available() and torch is not None and "--no-bench" not in sys.argv:
    bench.run(print_data=True, save_path=os.environ.get("TUTORIAL_PLOTS", "."))
