# %% [markdown]
# # Fused attention, forward (FlashAttention-2)
#
# `O = softmax(Q Kᵀ · sm_scale) V` for (batch, heads, sequence, head dim) tensors, without ever
# writing the S x S score matrix to memory. You will learn:
# - chained `tl.dot`s: the scores `Q Kᵀ` stay in registers, are turned into probabilities `P`
#   and, cast to the input dtype, feed the second product `P V` directly (on Hopper as the
#   register operand of `wgmma`, whose other operands are read from the cp.async rings);
# - the online softmax: one pass over the keys keeps a running row maximum `m` and a running
#   row sum `l`, and rescales the accumulator whenever the maximum grows;
# - `exp2` with the scale folded in (`qk_scale = sm_scale · log2(e)`): one fused
#   multiply-add and one `ex2.approx` per score;
# - causal masking (`tl.where` on the diagonal block, and loops that start or stop at the
#   diagonal) and sequence lengths that are not multiples of the block (masked loads);
# - saving each row's log-sum-exp, which the backward (tutorial 07) uses to rebuild `P`;
# - float32 inputs on tf32 tensor cores; tiles autotuned per (S, D, causal, dtype).
#
# The kernel is the one `tessera.ops.attention_forward` launches; tutorial 07 derives the
# backward and the `torch.library` op that makes it differentiable under `torch.compile`.
# With a GPU the tutorial runs on it; else through the interpreter (CPU) at small sizes.

# %%
import os
import sys

import numpy as np
import tessera
import tessera.language as tl
from tessera.testing import gpu_available

LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x · log2(e))

# %% [markdown]
# ## The forward kernel
# One program per (`BLOCK_M` query rows, batch x head). It walks the keys and values in blocks
# of `BLOCK_N`; for each block it computes the scores `s = Q Kᵀ` and, in base 2 (`qk_scale`
# folded into the max and into each exponent's fused multiply-add),
#
#     m_new = max(m, rowmax(s) · qk_scale);  alpha = 2^(m - m_new);  p = 2^(s · qk_scale - m_new)
#     l = l · alpha + rowsum(p);   acc = acc · alpha + p V;  m = m_new
#
# and at the end `O = acc / l`. All of the softmax runs in float32; only `p` is rounded to the
# input dtype for the tensor cores (float32 inputs run the products in tf32, 10 mantissa bits,
# on the `m16n8k8` instruction; fp16/bf16 ignore `input_precision`). With `CAUSAL`, query `i`
# sees keys `j <= i`, so the walk stops after the block holding the program's last row.
#
# Masks cost at every step they run (a predicate per row for the copies, a compare and a
# select per score), and few blocks need them. So the walk is two loops over one body
# (`attention_fwd_steps`, its `MASKED` a constexpr). Masked: the blocks from `split` on, the
# one crossing S (keys past S load as zeros and score `-inf`: `p = 0`) and, causal, those
# crossing the diagonal. Unmasked: the blocks before `split` (`min(first row, S)` causal, else
# `S`, rounded down to a block), inside S and seen whole by every row: plain loads, no
# `tl.where`. The masked loop runs first and re-reads Q at each of its few steps. Every row
# sees the first key it meets, so `m` is finite from then on and `l >= 1`; rows past S compute
# harmless values the masked store drops.
#
# The log-sum-exp saved per row is in **base 2** of the scaled scores:
# `lse2 = m + log2(l) = log2(Σ_j 2^(qk_j))`, with `qk_j = q·k_j · sm_scale · log2(e)`; the
# natural-log value is `lse = lse2 / log2(e) = ln(Σ_j exp(q·k_j · sm_scale))`. The backward
# rebuilds `P = 2^(qk - lse2)` from it with one `exp2`.
#
# `TMA` (a constexpr the library's wrapper sets on Hopper, this tutorial's leaves off) takes
# Q, K and V as host `TensorDescriptor`s over (B, H, S, D), blocks (1, 1, BLOCK, D), loaded
# with `head_tile` (`desc.load([b, h, row, 0]).reshape([BLOCK, D])`): the pipeliner copies the
# loops' tiles with the TMA unit and mbarriers instead of cp.async, and a block crossing S
# reads zeros from the map's bounds (never the next head's rows), so those loads need no
# masks. docs/perf/attention_tma.md has the design.

# %%
@tessera.jit
def offsets_of(offs, stride_s, D: tl.constexpr):
    """Offsets of rows `offs` (all D columns, stride 1) from the start of their head."""
    return offs[:, None] * stride_s + tl.arange(0, D)[None, :]


@tessera.jit
def rows_of(base, stride_b, stride_h, stride_s, off_b, off_h, offs, D: tl.constexpr):
    """Pointers to rows `offs` (all D columns) of head (off_b, off_h) of a (B, H, S, D) tensor."""
    return base + off_b * stride_b + off_h * stride_h + offsets_of(offs, stride_s, D)


@tessera.jit
def load_rows(ptrs, rows, S, MASKED: tl.constexpr):
    """The tile at `ptrs` of rows `rows`: MASKED, those past S read as zeros; else all in S."""
    if MASKED:
        return tl.load(ptrs, mask=rows[:, None] < S, other=0.0)
    return tl.load(ptrs)


@tessera.jit
def head_tile(desc, off_b, off_h, row):
    """The (BLOCK, D) tile from row `row` of head (off_b, off_h) of a (B, H, S, D) descriptor
    of blocks (1, 1, BLOCK, D): rows past S read as zeros (the TMA's fill), never the next
    head's."""
    return desc.load([off_b, off_h, row, 0]).reshape(desc.block_shape[2:])


@tessera.jit
def visible(offs_m, cols, S, CAUSAL: tl.constexpr):
    """Which (query row, key) pairs count: keys inside S and, causal, not after the row."""
    keep = cols[None, :] < S
    if CAUSAL:
        keep = keep & (cols[None, :] <= offs_m[:, None])
    return keep


@tessera.jit
def key_tile(head, offs, start, rows, S, stride_s, MASKED: tl.constexpr, TMA: tl.constexpr,
             off_b, off_h):
    """The (BLOCK, D) tile of K or V of key rows `rows` = start + (0 .. BLOCK): TMA, from the
    head's descriptor (rows past S are the TMA's zero fill); else by pointers from `head` (the
    head's row 0; offs: the offsets of rows 0 .. BLOCK), rows past S zeros when MASKED."""
    if TMA:
        return head_tile(head, off_b, off_h, start)
    return load_rows(head + (offs + start * stride_s), rows, S, MASKED)


@tessera.jit
def softmax_step(qk, m_i, l_i, qk_scale):
    """One step of the online softmax over a tile of scores `qk` (not yet scaled): (p, alpha,
    l_new, m_new), p = 2^(qk · qk_scale − m_new) and alpha the rescale of what came before.
    The scale rides on the row max and on the exponent's fused multiply-add."""
    m_new = tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale)
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(qk * qk_scale - m_new[:, None])
    return p, alpha, l_i * alpha + tl.sum(p, axis=1), m_new


@tessera.jit
def attention_fwd_steps(acc, l_i, m_i, q, q_ptrs, k_head, v_head, k_offs, v_offs, start, end,
                        row0, offs_m, S, qk_scale, stride_ks, stride_vs, BLOCK_N: tl.constexpr,
                        MASKED: tl.constexpr, CAUSAL: tl.constexpr, RELOAD: tl.constexpr,
                        TMA: tl.constexpr = False, SPECIALIZE: tl.constexpr = False,
                        off_b=0, off_h=0):
    """The online softmax over the key blocks starting in [start, end) (k_offs, v_offs: rows 0
    to BLOCK_N; row0: the first query row). Unless MASKED, each of their keys is in S and
    visible to every row. TMA: q_ptrs, k_head and v_head are the (B, H, S, D) tensor
    descriptors (head_tile of head (off_b, off_h)), k_offs and v_offs unused.
    SPECIALIZE: the copies come from a producer warpgroup (the TMA pipeline's)."""
    for start_n in tl.range(start, end, BLOCK_N, warp_specialize=SPECIALIZE):
        cols = start_n + tl.arange(0, BLOCK_N)
        if RELOAD:
            q_step = head_tile(q_ptrs, off_b, off_h, row0) if TMA \
                else load_rows(q_ptrs, offs_m, S, True)
        else:
            q_step = q
        k = key_tile(k_head, k_offs, start_n, cols, S, stride_ks, MASKED, TMA, off_b, off_h)
        v = key_tile(v_head, v_offs, start_n, cols, S, stride_vs, MASKED, TMA, off_b, off_h)
        qk = tl.dot(q_step, tl.trans(k), input_precision="tf32")
        if MASKED:
            qk = tl.where(visible(offs_m, cols, S, CAUSAL), qk, float("-inf"))
        p, alpha, l_i, m_new = softmax_step(qk, m_i, l_i, qk_scale)
        acc = tl.dot(p.to(k.dtype), v, acc * alpha[:, None], input_precision="tf32")
        m_i = m_new
    return acc, l_i, m_i


@tessera.jit
def attention_fwd_pipelined(acc, l_i, m_i, q, k_head, v_head, k_offs, v_offs, start, end, S,
                            qk_scale, stride_ks, stride_vs, BLOCK_N: tl.constexpr,
                            TMA: tl.constexpr = False, off_b=0, off_h=0):
    """The unmasked steps with P V of one tile issued right after Q Kᵀ of the next, its P
    carried across the step (FlashAttention-3's order): the softmax of tile j runs while
    P V of tile j - 1 holds the tensor cores, and both products are one run of issues (one
    ping-pong turn per step)."""
    if end > start:
        k = key_tile(k_head, k_offs, start, start, S, stride_ks, False, TMA, off_b, off_h)
        qk = tl.dot(q, tl.trans(k), input_precision="tf32")
        p, alpha, l_i, m_i = softmax_step(qk, m_i, l_i, qk_scale)
        p = p.to(k.dtype)
        for start_n in range(start + BLOCK_N, end, BLOCK_N):
            k = key_tile(k_head, k_offs, start_n, start_n, S, stride_ks, False, TMA, off_b,
                         off_h)
            v = key_tile(v_head, v_offs, start_n - BLOCK_N, start_n, S, stride_vs, False, TMA,
                         off_b, off_h)
            scaled = acc * alpha[:, None]
            qk = tl.dot(q, tl.trans(k), input_precision="tf32")
            acc = tl.dot(p, v, scaled, input_precision="tf32")
            p32, alpha, l_i, m_i = softmax_step(qk, m_i, l_i, qk_scale)
            p = p32.to(k.dtype)
        v = key_tile(v_head, v_offs, end - BLOCK_N, end, S, stride_vs, False, TMA, off_b, off_h)
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="tf32")
    return acc, l_i, m_i


@tessera.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, qk_scale, H, S,
                         stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                         stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os,
                         D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr, RELOAD: tl.constexpr = False,
                         TMA: tl.constexpr = False, SPECIALIZE: tl.constexpr = False,
                         OVERLAP: tl.constexpr = False):
    # Causal: the longest rows first (the last wave is of short ones; the dQ kernel too).
    start_m = tl.num_programs(0) - 1 - tl.program_id(0) if CAUSAL else tl.program_id(0)
    off_bh = tl.program_id(axis=1)
    off_b, off_h = off_bh // H, off_bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    if TMA:
        # q_ptr, k_ptr, v_ptr are (B, H, S, D) host descriptors, blocks (1, 1, BLOCK, D): the
        # box of head (off_b, off_h) is bounded by its S, so a block crossing S reads zeros
        # (never the next head's rows) and the loads need no masks. The pipeliner copies the
        # loops' tiles with the TMA through maps the host encoded once per call.
        q_src = q_ptr
        k_head = k_ptr
        v_head = v_ptr
        k_offs = None
        v_offs = None
    else:
        q_src = rows_of(q_ptr, stride_qb, stride_qh, stride_qs, off_b, off_h, offs_m, D)
        k_head = k_ptr + off_b * stride_kb + off_h * stride_kh
        v_head = v_ptr + off_b * stride_vb + off_h * stride_vh
        k_offs = offsets_of(tl.arange(0, BLOCK_N), stride_ks, D)
        v_offs = offsets_of(tl.arange(0, BLOCK_N), stride_vs, D)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    split = (tl.minimum(start_m * BLOCK_M, S) if CAUSAL else S) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, S) if CAUSAL else S
    row0 = start_m * BLOCK_M  # the first query row: a TMA box coordinate
    acc, l_i, m_i = attention_fwd_steps(  # masked, Q re-read at each step
        acc, l_i, m_i, None, q_src, k_head, v_head, k_offs, v_offs, split, hi, row0, offs_m,
        S, qk_scale, stride_ks, stride_vs, BLOCK_N, True, CAUSAL, True, TMA, False, off_b, off_h)
    if RELOAD:
        q = None
    elif TMA:
        q = head_tile(q_src, off_b, off_h, row0)
    else:
        q = load_rows(q_src, offs_m, S, True)
    if OVERLAP:
        tl.static_assert(not RELOAD and not SPECIALIZE,
                         "OVERLAP keeps Q in registers and issues its own products")
        acc, l_i, m_i = attention_fwd_pipelined(
            acc, l_i, m_i, q, k_head, v_head, k_offs, v_offs, 0, split, S, qk_scale,
            stride_ks, stride_vs, BLOCK_N, TMA, off_b, off_h)
    else:
        acc, l_i, m_i = attention_fwd_steps(  # unmasked
            acc, l_i, m_i, q, q_src, k_head, v_head, k_offs, v_offs, 0, split, row0, offs_m,
            S, qk_scale, stride_ks, stride_vs, BLOCK_N, False, CAUSAL, RELOAD, TMA,
            SPECIALIZE, off_b, off_h)
    acc = acc / l_i[:, None]
    o_ptrs = rows_of(o_ptr, stride_ob, stride_oh, stride_os, off_b, off_h, offs_m, D)
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < S)
    tl.store(lse_ptr + off_bh * S + offs_m, m_i + tl.log2(l_i), mask=offs_m < S)




# %% [markdown]
# ## The host wrapper
# `attention_forward(q, k, v, causal, sm_scale)` takes (B, H, S, D) tensors whose last dim is
# contiguous: torch CUDA tensors on the GPU, NumPy arrays on the interpreter. It returns `O`
# (input dtype) and the base-2 log-sum-exp `lse2` as float32 (B, H, S). Tiles per head dim and
# input width: the register file holds Q (BLOCK_M x D), the accumulator (BLOCK_M x D, fp32)
# and the scores (BLOCK_M x BLOCK_N, fp32), so the larger D (or the wider the inputs), the
# smaller the blocks. `@tessera.autotune` times each head dim's candidates once per
# (S, D, causal, dtype) and keeps the fastest on disk; a pruning hook keeps only the launch's
# head dim and dtype. At float32 and D = 256 not even a warp's 16 rows of Q fit beside the
# accumulators: there `RELOAD` makes the kernel re-read Q at every step (from L2).

# %%
# D -> [(BLOCK_M, BLOCK_N, num_warps, num_stages), ...]: the first compiles with zero spills
# for sm_80 and sm_90a and is the interpreter's. FP32: float32 inputs (tf32). WGMMA: fp16/bf16
# on Hopper, where a warpgroup reads K and V straight from the cp.async rings, so larger tiles
# fit (the best of sweeps on an H200).
CONFIGS = {16: [(64, 64, 4, 2)], 32: [(64, 64, 4, 2)],
           64: [(128, 32, 8, 2), (128, 32, 8, 3), (64, 64, 4, 2)],
           128: [(64, 32, 8, 2), (128, 32, 8, 2), (128, 64, 8, 3)], 256: [(64, 16, 8, 2)]}
FP32_CONFIGS = {16: [(64, 64, 4, 2)], 32: [(64, 32, 4, 2)], 64: [(64, 32, 8, 2)],
                128: [(64, 16, 8, 2)], 256: [(32, 16, 8, 2)]}
WGMMA_CONFIGS = {64: [(128, 64, 8, 2), (128, 128, 8, 2), (64, 128, 4, 2)],
                 128: [(128, 64, 8, 2), (128, 128, 8, 2), (128, 64, 8, 3)]}
HEAD_DIMS = (16, 32, 64, 128, 256)


def is_fp32(x) -> bool:
    return str(x.dtype) in ("float32", "torch.float32")


def candidates(x) -> list:
    """The tiles to try for inputs like x: WGMMA_CONFIGS for fp16/bf16 on an sm_90a GPU."""
    arch = ""
    if getattr(getattr(x, "device", None), "type", None) == "cuda":
        from tessera.runtime.launcher import arch_of
        arch = arch_of(x.device.index or 0)
    if (arch == "sm_90a" and tessera.config.knobs.wgmma and not is_fp32(x)
            and x.shape[-1] in WGMMA_CONFIGS):
        return WGMMA_CONFIGS[x.shape[-1]]
    return (FP32_CONFIGS if is_fp32(x) else CONFIGS)[x.shape[-1]]


TILES = {t: tessera.Config({"BLOCK_M": t[0], "BLOCK_N": t[1]}, num_warps=t[2], num_stages=t[3])
         for table in (CONFIGS, FP32_CONFIGS, WGMMA_CONFIGS) for ts in table.values() for t in ts}
tuned_fwd = tessera.autotune(
    configs=list(TILES.values()), key=["S", "D", "CAUSAL"],
    prune_configs_by={"early_config_prune":
                      lambda configs, nargs, **kw: [TILES[t] for t in candidates(nargs["q_ptr"])]},
)(attention_fwd_kernel)


def strides(x) -> tuple:
    return tuple(s // x.itemsize for s in x.strides) if isinstance(x, np.ndarray) else x.stride()


def empty(like, shape, fp32: bool = False):
    """An uninitialized array/tensor on like's device, of like's dtype (or float32)."""
    if isinstance(like, np.ndarray):
        return np.empty(shape, np.float32 if fp32 else like.dtype)
    import torch
    return torch.empty(shape, device=like.device, dtype=torch.float32 if fp32 else like.dtype)


def attention_forward(q, k, v, causal: bool = False, sm_scale: float | None = None,
                      out=None, lse=None):
    """(O, lse2) of softmax(q kᵀ · sm_scale) v for (B, H, S, D) q, k, v (float16, bfloat16 or
    float32, last dim contiguous). `out` and `lse` are written when given."""
    B, H, S, D = q.shape
    assert D in HEAD_DIMS and all(strides(x)[-1] == 1 for x in (q, k, v)), (q.shape, strides(q))
    out = empty(q, q.shape) if out is None else out
    lse = empty(q, (B, H, S), fp32=True) if lse is None else lse
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    tuned_fwd[lambda meta: (tessera.cdiv(S, meta["BLOCK_M"]), B * H)](
        q, k, v, out, lse, sm_scale * LOG2E, H, S,
        *strides(q)[:3], *strides(k)[:3], *strides(v)[:3], *strides(out)[:3],
        D=D, CAUSAL=causal, RELOAD=D * (4 if is_fp32(q) else 2) >= 1024)
    return out, lse


# %% [markdown]
# ## Correctness
# Fresh random inputs, poisoned (NaN) outputs, against a float64 NumPy reference computed the
# textbook way (full score matrix, max-subtracted softmax). S = 1, 17 and 1000 are not
# multiples of any block. Bounds on ‖x − ref‖ / ‖ref‖: O within 5e-3 for fp16 and 1e-2 for
# bf16 (docs/benchmarks.md); float32 inputs compute in tf32 (fp16's 10 mantissa bits), so fp16's
# bound. lse2 within 1e-3.

# %%
BOUNDS = {"float16": 5e-3, "bfloat16": 1e-2, "float32": 5e-3}


def reference(q, k, v, causal: bool, sm_scale: float) -> dict:
    """O and lse2 in float64 for float64 (B, H, S, D) arrays."""
    scores = q @ k.swapaxes(-1, -2) * sm_scale
    if causal:
        S = q.shape[2]
        scores = np.where(np.tril(np.ones((S, S), bool)), scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - m)
    l = e.sum(axis=-1, keepdims=True)
    return {"o": e / l @ v, "lse": (m + np.log(l))[..., 0] * LOG2E}


def check(cases, dtypes, make, to_numpy):
    rng = np.random.default_rng()
    for B, H, S, D in cases:
        for causal in (False, True):
            for dtype_name in dtypes:
                q, k, v = (make(rng.standard_normal((B, H, S, D)).astype(np.float32),
                                dtype_name) for _ in range(3))
                o = make(np.full((B, H, S, D), np.nan, np.float32), dtype_name)  # poisoned
                lse = make(np.full((B, H, S), np.nan, np.float32), "float32")
                attention_forward(q, k, v, causal, D ** -0.5, out=o, lse=lse)
                ref = reference(*(to_numpy(x).astype(np.float64) for x in (q, k, v)), causal,
                                D ** -0.5)
                err_o = tessera.testing.relative_error(to_numpy(o), ref["o"])
                err_lse = tessera.testing.relative_error(to_numpy(lse), ref["lse"])
                label = (f"B={B} H={H} S={S:<5} D={D:<3} {'causal' if causal else 'full':<6} "
                         f"{dtype_name:<8}")
                assert err_o <= BOUNDS[dtype_name], f"{label}: O error {err_o:.2e}"
                assert err_lse <= 1e-3, f"{label}: lse error {err_lse:.2e}"
                print(f"{label} o {err_o:.1e}  lse {err_lse:.1e}  ok")


if gpu_available():
    import torch

    def to_torch(x, dtype_name):
        return torch.from_numpy(x).to("cuda", getattr(torch, dtype_name))

    to_numpy = lambda t: t.float().cpu().numpy()  # noqa: E731
    check([(2, 3, S, D) for S in (1, 17, 128, 1000) for D in HEAD_DIMS]
          + [(1, 2, 4096, D) for D in HEAD_DIMS], ["float16", "bfloat16"], to_torch, to_numpy)
    check([(2, 3, 1000, D) for D in HEAD_DIMS], ["float32"], to_torch, to_numpy)
else:
    import ml_dtypes

    tessera.config.knobs.interpret = True
    print("no GPU: running through the interpreter")

    def to_numpy_dtype(x, dtype_name):
        return x.astype({"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
                         "float32": np.float32}[dtype_name])

    to_float32 = lambda x: x.astype(np.float32)  # noqa: E731
    check([(1, 2, 1, 16), (2, 1, 17, 32), (1, 2, 128, 64), (1, 1, 200, 128), (1, 1, 40, 256)],
          ["float16", "bfloat16"], to_numpy_dtype, to_float32)
    check([(1, 2, 33, 64), (1, 1, 40, 256)], ["float32"], to_numpy_dtype, to_float32)

# %% [markdown]
# ## The instructions
# `asm` compiles for given arguments without a GPU. Both products run on the tensor cores
# (`mma.sync.aligned.m16n8k16`), the exponentials are single `ex2.approx` instructions, and
# the scores never touch shared memory: `P` goes from the first product's accumulator
# registers to the second product's A fragments.

# %%
x = np.zeros((1, 2, 256, 64), np.float16)
lse = np.zeros((1, 2, 256), np.float32)
st = tuple(s // 2 for s in x.strides[:3])
stages = attention_fwd_kernel.asm(x, x, x, x, lse, 0.125 * LOG2E, 2, 256, *st, *st, *st, *st,
                                  D=64, BLOCK_M=64, BLOCK_N=64, CAUSAL=True, num_warps=4,
                                  num_stages=2, arch="sm_80")
ptx = stages["ptx"]
for needle in ("mma.sync.aligned.m16n8k16", "ex2.approx", "ldmatrix.sync.aligned"):
    lines = [" ".join(line.split()) for line in ptx.splitlines() if needle in line]
    assert lines, f"{needle} not found in the PTX"
    print(f"{len(lines):>4} x {lines[0]}")

# %% [markdown]
# ## Benchmark
# TFLOP/s (4·B·H·S²·D, halved when causal) at B·S = 16384 tokens and H = 2048 / D
# (docs/benchmarks.md), against PyTorch's `scaled_dot_product_attention` with the flash backend
# (FlashAttention-2) and the cuDNN backend, in the same run; one table and plot per head dim
# and mask. benchmarks/attention.py runs the full sweeps (backward, both dtypes, memory).

# %%
PROVIDERS = {"tessera": "Tessera", "FLASH_ATTENTION": "SDPA flash", "CUDNN_ATTENTION": "SDPA cuDNN"}


@tessera.testing.perf_report([tessera.testing.Benchmark(
    x_names=["S"], x_vals=[1024, 2048, 4096, 8192], line_arg="provider",
    line_vals=list(PROVIDERS), line_names=list(PROVIDERS.values()), ylabel="TFLOP/s",
    plot_name=f"fused-attention-fwd-d{D}{'-causal' if causal else ''}",
    args={"D": D, "causal": causal})
    for D in (64, 128) for causal in (False, True)])
def bench_attention(S, D, causal, provider, dtype=None):
    import torch.nn.functional as F
    from tessera.testing import do_bench
    from torch.nn.attention import SDPBackend, sdpa_kernel
    B, H = 16384 // S, 2048 // D
    q, k, v = (torch.randn((B, H, S, D), device="cuda", dtype=dtype or torch.float16)
               for _ in range(3))
    flops = 4 * B * H * S * S * D / (2 if causal else 1)
    if provider == "tessera":
        o, lse = attention_forward(q, k, v, causal)  # compiles and tunes, outside the timing
        return flops / do_bench(lambda: attention_forward(q, k, v, causal, out=o, lse=lse)) / 1e9
    try:
        with sdpa_kernel(getattr(SDPBackend, provider)):
            ms = do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    except (RuntimeError, TypeError):  # no such backend, or it does not take these inputs
        return float("nan")
    return flops / ms / 1e9


if gpu_available() and "--no-bench" not in sys.argv:
    bench_attention.run(print_data=True, save_path=os.environ.get("TUTORIAL_PLOTS", "."))

# %% [markdown]
# ## In the library
# The same kernel is `tessera.ops.attention_forward`, whose tables also hold the backward's
# tiles. Tutorial 07 derives the backward and the differentiable `torch.library` op.
