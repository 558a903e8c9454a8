# %% [markdown]
# # Fused attention (FlashAttention-2, forward and backward)
#
# `O = softmax(Q Kᵀ · sm_scale) V` for (batch, heads, sequence, head dim) tensors, and its
# gradients, without ever writing the S x S score matrix to memory. You will learn:
# - chained `tl.dot`s: the scores `Q Kᵀ` stay in registers, are turned into probabilities `P`
#   and, cast to the input dtype, feed the second product `P V` directly (on Hopper as the
#   register operand of `wgmma`, whose other operands are read from the cp.async rings);
# - the online softmax: one pass over the keys keeps a running row maximum `m` and a running
#   row sum `l`, and rescales the accumulator whenever the maximum grows;
# - `exp2` with the scale folded in (`qk_scale = sm_scale · log2(e)`): one fused
#   multiply-add and one `ex2.approx` per score;
# - causal masking (`tl.where` on the diagonal block, and loops that start or stop at the
#   diagonal) and sequence lengths that are not multiples of the block (masked loads);
# - saving each row's log-sum-exp, so that the backward (three kernels, no atomics) rebuilds
#   `P` with one `exp2` per score;
# - float32 inputs on tf32 tensor cores; tiles autotuned per (S, D, causal, dtype);
# - wrapping kernels as a `torch.library` custom op with a fake implementation and autograd,
#   so that `torch.compile(fullgraph=True)` of a model calling them has no graph breaks.
#
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
def visible(offs_m, cols, S, CAUSAL: tl.constexpr):
    """Which (query row, key) pairs count: keys inside S and, causal, not after the row."""
    keep = cols[None, :] < S
    if CAUSAL:
        keep = keep & (cols[None, :] <= offs_m[:, None])
    return keep


@tessera.jit
def attention_fwd_steps(acc, l_i, m_i, q, q_ptrs, k_head, v_head, k_offs, v_offs, start, end,
                        offs_m, S, qk_scale, stride_ks, stride_vs, BLOCK_N: tl.constexpr,
                        MASKED: tl.constexpr, CAUSAL: tl.constexpr, RELOAD: tl.constexpr):
    """The online softmax over the key blocks starting in [start, end) (k_offs, v_offs: rows 0
    to BLOCK_N). Unless MASKED, each of their keys is in S and visible to every row."""
    for start_n in range(start, end, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        q_step = load_rows(q_ptrs, offs_m, S, True) if RELOAD else q
        k = load_rows(k_head + (k_offs + start_n * stride_ks), cols, S, MASKED)
        v = load_rows(v_head + (v_offs + start_n * stride_vs), cols, S, MASKED)
        qk = tl.dot(q_step, tl.trans(k), input_precision="tf32")
        if MASKED:
            qk = tl.where(visible(offs_m, cols, S, CAUSAL), qk, float("-inf"))
        # The scale rides on the row max and on the exponent's fused multiply-add.
        m_new = tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale)
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(k.dtype), v, acc * alpha[:, None], input_precision="tf32")
        m_i = m_new
    return acc, l_i, m_i


@tessera.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, qk_scale, H, S,
                         stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                         stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os,
                         D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr, RELOAD: tl.constexpr = False):
    # Causal: the longest rows first (the last wave is of short ones; the dQ kernel too).
    start_m = tl.num_programs(0) - 1 - tl.program_id(0) if CAUSAL else tl.program_id(0)
    off_bh = tl.program_id(axis=1)
    off_b, off_h = off_bh // H, off_bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q_ptrs = rows_of(q_ptr, stride_qb, stride_qh, stride_qs, off_b, off_h, offs_m, D)
    k_head = k_ptr + off_b * stride_kb + off_h * stride_kh
    v_head = v_ptr + off_b * stride_vb + off_h * stride_vh
    k_offs = offsets_of(tl.arange(0, BLOCK_N), stride_ks, D)
    v_offs = offsets_of(tl.arange(0, BLOCK_N), stride_vs, D)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    split = (tl.minimum(start_m * BLOCK_M, S) if CAUSAL else S) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, S) if CAUSAL else S
    acc, l_i, m_i = attention_fwd_steps(  # masked, Q re-read at each step
        acc, l_i, m_i, None, q_ptrs, k_head, v_head, k_offs, v_offs, split, hi, offs_m, S,
        qk_scale, stride_ks, stride_vs, BLOCK_N, True, CAUSAL, True)
    q = None if RELOAD else load_rows(q_ptrs, offs_m, S, True)
    acc, l_i, m_i = attention_fwd_steps(  # unmasked
        acc, l_i, m_i, q, q_ptrs, k_head, v_head, k_offs, v_offs, 0, split, offs_m, S,
        qk_scale, stride_ks, stride_vs, BLOCK_N, False, CAUSAL, RELOAD)
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
# smaller the blocks (the backward kernels' configs are here too). `@tessera.autotune` times
# each head dim's candidates once per (S, D, causal, dtype) and keeps the fastest on disk. At
# float32 and D = 256 not even a warp's 16 rows of Q fit beside the accumulators: there
# `RELOAD` makes the kernels read their loop-invariant tiles again at every step (from L2).

# %%
# kernel -> {D -> [(BLOCK_M, BLOCK_N, num_warps, num_stages), ...]}; "_fp32" for float32 (tf32)
# inputs. dkdv: BLOCK_N keys per program, BLOCK_M queries per step; dq: the other way round.
# The first candidate is the default (interpreter, TESSERA_AUTOTUNE=off) and compiles with zero
# spills for sm_80 and sm_90a; the others spill a few bytes at most (test_attention_ptx.py).
CONFIGS = {
    "fwd": {16: [(64, 64, 4, 2)], 32: [(64, 64, 4, 2)],
            64: [(128, 32, 8, 2), (128, 32, 8, 3), (64, 64, 4, 2)],
            128: [(64, 32, 8, 2), (128, 32, 8, 2), (128, 64, 8, 3)], 256: [(64, 16, 8, 2)]},
    "fwd_fp32": {16: [(64, 64, 4, 2)], 32: [(64, 32, 4, 2)], 64: [(64, 32, 8, 2)],
                 128: [(64, 16, 8, 2)], 256: [(32, 16, 8, 2)]},
    "dkdv": {16: [(32, 64, 4, 2)], 32: [(32, 64, 4, 2)],
             64: [(64, 128, 8, 2), (32, 64, 4, 3), (64, 64, 4, 2)],
             128: [(32, 64, 8, 2), (16, 64, 4, 2), (16, 128, 8, 2)], 256: [(16, 16, 8, 2)]},
    "dkdv_fp32": {16: [(16, 64, 4, 2)], 32: [(16, 64, 4, 2)],
                  64: [(16, 32, 8, 2), (16, 32, 4, 2)], 128: [(16, 32, 8, 2)],
                  256: [(16, 16, 8, 3), (16, 16, 8, 2)]},
    "dq": {16: [(64, 32, 4, 2)], 32: [(64, 32, 4, 2)], 64: [(64, 32, 4, 2), (64, 32, 4, 3)],
           128: [(64, 16, 4, 2), (64, 32, 8, 2), (128, 32, 8, 2)], 256: [(32, 16, 8, 2)]},
    "dq_fp32": {16: [(64, 32, 4, 2)], 32: [(64, 32, 4, 2)], 64: [(64, 32, 8, 2)],
                128: [(32, 16, 8, 2)], 256: [(16, 16, 8, 2)]},
}
# On Hopper (sm_90a) fp16/bf16 products run on wgmma: a warpgroup of 4 warps per 64 rows reads
# K, V (and Q, dO) straight from the cp.async rings, so larger tiles fit the registers. The
# best of sweeps on an H200 (benchmarks/attention.py --quick has the ratios to SDPA flash).
WGMMA_CONFIGS = {
    "fwd": {64: [(128, 64, 8, 2), (128, 128, 8, 2), (64, 128, 4, 2)],
            128: [(128, 64, 8, 2), (128, 128, 8, 2), (128, 64, 8, 3)]},
    "dkdv": {64: [(64, 64, 4, 2), (64, 128, 8, 3), (64, 128, 8, 2), (64, 64, 4, 3)],
             128: [(32, 64, 4, 2), (64, 128, 8, 2), (32, 128, 8, 2)]},
    "dq": {64: [(128, 32, 8, 2), (64, 64, 4, 2), (128, 128, 8, 2), (128, 64, 8, 3)],
           128: [(128, 64, 8, 2), (64, 32, 4, 2), (128, 32, 8, 2)]},
}
HEAD_DIMS = (16, 32, 64, 128, 256)


def preprocess_block(D: int) -> int:
    """Rows per program of the delta kernel: 8192 elements at most (few registers, many CTAs)."""
    return min(64, 8192 // D)


def _is_fp32(x) -> bool:
    return str(x.dtype) in ("float32", "torch.float32")


def _arch(x) -> str:
    """The target the kernels compile for: x's GPU (torch CUDA tensors), else none."""
    device = getattr(x, "device", None)
    if getattr(device, "type", None) != "cuda":
        return ""
    from tessera.runtime.launcher import arch_of
    return arch_of(device.index or 0)


def candidates(kernel: str, x, arch: str | None = None) -> list:
    """The (BLOCK_M, BLOCK_N, num_warps, num_stages) candidates of `kernel` for inputs like `x`
    (B, H, S, D) on `arch` (default: x's GPU): WGMMA_CONFIGS for fp16/bf16 on sm_90a."""
    arch = _arch(x) if arch is None else arch
    D = x.shape[-1]
    if (arch == "sm_90a" and tessera.config.knobs.wgmma and not _is_fp32(x)
            and D in WGMMA_CONFIGS[kernel]):
        return WGMMA_CONFIGS[kernel][D]
    return CONFIGS[kernel + ("_fp32" if _is_fp32(x) else "")][D]


def config(kernel: str, x, arch: str | None = None) -> tuple:
    """The default (first) candidate of `kernel` for inputs like `x`."""
    return candidates(kernel, x, arch)[0]


def autotuned(kernel: str, fn):
    """`fn` autotuned over every candidate of CONFIGS[kernel] (and its _fp32 table), keyed on
    (S, D, CAUSAL) and the dtypes; a launch keeps only its head dim's and dtype's list."""
    tables = (CONFIGS[kernel], CONFIGS[kernel + "_fp32"], WGMMA_CONFIGS[kernel])
    tuples = list(dict.fromkeys(t for table in tables for lst in table.values() for t in lst))
    configs = {t: tessera.Config({"BLOCK_M": t[0], "BLOCK_N": t[1]}, num_warps=t[2],
                                 num_stages=t[3]) for t in tuples}

    def for_this_launch(_configs, nargs, **kwargs):
        return [configs[t] for t in candidates(kernel, nargs["q_ptr"])]

    return tessera.autotune(configs=list(configs.values()), key=["S", "D", "CAUSAL"],
                            prune_configs_by={"early_config_prune": for_this_launch})(fn)


_tuned_fwd = autotuned("fwd", attention_fwd_kernel)  # the @jit kernel stays plain (.asm())


def reload_tiles(x) -> bool:
    """Whether the kernels re-read their loop-invariant tiles at every step instead of holding
    them: a warp's 16 x D rows take D · itemsize / 8 registers per lane (too many from 1 KiB)."""
    return x.shape[-1] * (4 if _is_fp32(x) else 2) >= 1024


def _strides(x) -> tuple:
    if isinstance(x, np.ndarray):
        return tuple(s // x.itemsize for s in x.strides)
    return tuple(x.stride())


def _empty(like, shape=None, fp32: bool = False):
    """An uninitialized array/tensor on like's device, of like's dtype (or float32)."""
    shape = tuple(like.shape) if shape is None else shape
    if isinstance(like, np.ndarray):
        return np.empty(shape, np.float32 if fp32 else like.dtype)
    import torch
    return torch.empty(shape, device=like.device, dtype=torch.float32 if fp32 else like.dtype)


def _check(fn: str, shape: tuple, **tensors) -> None:
    """Every tensor given (not None) is (B, H, S, D) like q, or for lse (B, H, S) float32."""
    dtypes = ("float16", "bfloat16", "float32", "torch.float16", "torch.bfloat16",
              "torch.float32")
    if len(shape) != 4 or shape[-1] not in HEAD_DIMS:
        raise ValueError(f"{fn}: q must be (B, H, S, D) with D in {HEAD_DIMS}, got {shape}")
    for name, x in tensors.items():
        if x is None:
            continue
        if name == "lse":
            if tuple(x.shape) != shape[:3] or not _is_fp32(x) or _strides(x) != (
                    shape[1] * shape[2], shape[2], 1):
                raise ValueError(f"{fn}: {name} must be a contiguous float32 {shape[:3]} array, "
                                 f"got {x.dtype} {tuple(x.shape)} strides {_strides(x)}")
        elif tuple(x.shape) != shape or str(x.dtype) != str(tensors["q"].dtype):
            raise ValueError(f"{fn}: {name} must be {shape} {tensors['q'].dtype} like q, got "
                             f"{tuple(x.shape)} {x.dtype}")
        elif str(x.dtype) not in dtypes or _strides(x)[3] != 1:
            raise ValueError(f"{fn}: {name} must be float16, bfloat16 or float32 with a "
                             f"contiguous last dim, got {x.dtype} strides {_strides(x)}")


def attention_forward(q, k, v, causal: bool = False, sm_scale: float | None = None,
                      out=None, lse=None):
    """(O, lse2) of softmax(q kᵀ · sm_scale) v for (B, H, S, D) q, k, v (float16, bfloat16 or
    float32, last dim contiguous); lse2[b, h, i] = log2 Σ_j 2^(q_i·k_j · sm_scale · log2 e),
    float32 (B, H, S). `out` and `lse` are written when given."""
    _check("attention_forward", tuple(q.shape), q=q, k=k, v=v, out=out, lse=lse)
    B, H, S, D = q.shape
    out = _empty(q) if out is None else out
    lse = _empty(q, (B, H, S), fp32=True) if lse is None else lse
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    _tuned_fwd[(lambda meta: (tessera.cdiv(S, meta["BLOCK_M"]), B * H))](
        q, k, v, out, lse, sm_scale * LOG2E, H, S,
        *_strides(q)[:3], *_strides(k)[:3], *_strides(v)[:3], *_strides(out)[:3],
        D=D, CAUSAL=causal, RELOAD=reload_tiles(q))
    return out, lse


# %% [markdown]
# ## The backward pass
# With the scaled scores `S = Q Kᵀ · sm_scale`, `P = softmax(S)` (per row) and `O = P V`, the
# chain rule gives, for an incoming gradient `dO`:
#
#     dV = Pᵀ dO      dP = dO Vᵀ      dS = P ⊙ (dP − Δ)      dQ = dS K · sm_scale
#     dK = dSᵀ Q · sm_scale,    where  Δ_i = Σ_j P_ij dP_ij = Σ_d dO_id O_id
#
# (the softmax's Jacobian is `diag(p) − p pᵀ`; the second form of `Δ` needs only `O` and
# `dO`). Three kernels, none of them needs the S x S matrices or atomics:
# 1. `attention_bwd_preprocess_kernel`: `Δ = rowsum(dO ⊙ O)` in float32, one value per row.
# 2. `attention_bwd_dkdv_kernel`: one program per `BLOCK_N` keys, which keeps its K and V
#    blocks and the dK, dV accumulators on chip and walks the queries in blocks of `BLOCK_M`,
#    rebuilding `P = 2^(Q Kᵀ · qk_scale − lse2)` from the saved log-sum-exp. It works on the
#    transposed tiles (`Pᵀ = 2^(K Qᵀ · qk_scale − lse2)`, `dPᵀ = V dOᵀ`, `dSᵀ`), so that `Pᵀ`
#    and `dSᵀ` feed the next products as A operands straight from registers, as `P` does in
#    the forward. Causal: keys `j` only get gradient from queries `i >= j`, so the walk starts
#    at the query block holding the program's first key (`lo`), and every query block from
#    the first one that starts at or after the program's last key (`mid`) sees all its keys.
# 3. `attention_bwd_dq_kernel`: one program per `BLOCK_M` queries, walking the keys; causal,
#    it stops after the block holding the program's last row, as the forward does.
#
# Each program writes only its own rows of dK, dV or dQ: no atomics, at the price of `P` and
# `dP` computed twice. Masked entries get `P = 0`, hence `dS = 0`: above the diagonal and keys
# past S by a `tl.where`, queries past S (dK/dV) by a log-sum-exp of `+inf`. As in the forward,
# masks run only in a first loop, which re-reads the invariant tiles at each step: dQ splits its
# keys as the forward does; dK/dV's masked loop visits the query blocks in `[lo, mid)`, then the
# one crossing S (its index jumps there), the unmasked loop those in `[mid, S)` inside S.

# %%
@tessera.jit
def attention_bwd_preprocess_kernel(o_ptr, do_ptr, delta_ptr, H, S, stride_ob, stride_oh,
                                    stride_os, stride_dob, stride_doh, stride_dos,
                                    D: tl.constexpr, BLOCK_M: tl.constexpr):
    off_bh = tl.program_id(axis=1)
    offs_m = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    in_range = offs_m < S
    o = tl.load(rows_of(o_ptr, stride_ob, stride_oh, stride_os, off_bh // H, off_bh % H,
                        offs_m, D), mask=in_range[:, None], other=0.0)
    do = tl.load(rows_of(do_ptr, stride_dob, stride_doh, stride_dos, off_bh // H, off_bh % H,
                         offs_m, D), mask=in_range[:, None], other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(delta_ptr + off_bh * S + offs_m, delta, mask=in_range)


@tessera.jit
def attention_bwd_dkdv_steps(dk, dv, k, v, k_head, v_head, k_offs, v_offs, q_head, do_head,
                             q_offs, do_offs, lse_ptr, delta_ptr, start, end, jump, to, offs_n,
                             S, qk_scale, stride_qs, stride_dos, BLOCK_M: tl.constexpr,
                             BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                             RELOAD: tl.constexpr):
    """dK, dV from the query blocks starting in [start, end), MASKED ones from `jump` on being
    the block at `to` instead; q_offs, do_offs: rows 0 to BLOCK_M; lse_ptr, delta_ptr: the
    head's row 0. Unless MASKED, every query of those blocks is in S and sees every key."""
    inv_scale = 1.0 / qk_scale
    for step in range(start, end, BLOCK_M):
        start_m = tl.where(step < jump, step, to) if MASKED else step
        rows = start_m + tl.arange(0, BLOCK_M)
        k_step = load_rows(k_head + k_offs, offs_n, S, True) if RELOAD else k
        v_step = load_rows(v_head + v_offs, offs_n, S, True) if RELOAD else v
        q = load_rows(q_head + (q_offs + start_m * stride_qs), rows, S, MASKED)
        do = load_rows(do_head + (do_offs + start_m * stride_dos), rows, S, MASKED)
        if MASKED:  # lse = +inf past S gives P = 0 there (keys past S: rows the stores drop)
            lse = tl.load(lse_ptr + rows, mask=rows < S, other=float("inf"))
            delta = tl.load(delta_ptr + rows, mask=rows < S, other=0.0)
        else:
            lse = tl.load(lse_ptr + rows)
            delta = tl.load(delta_ptr + rows)
        # -lse, -delta start the accumulators; dP^T runs beside the exp2 (Hopper: async wgmma)
        shifted_qk_t = tl.dot(k_step, tl.trans(q), tl.broadcast_to(
            (lse * -inv_scale)[None, :], (BLOCK_N, BLOCK_M)), input_precision="tf32")
        dp_t = tl.dot(v_step, tl.trans(do), tl.broadcast_to(
            -delta[None, :], (BLOCK_N, BLOCK_M)), input_precision="tf32")
        p_t = tl.exp2(shifted_qk_t * qk_scale)
        if MASKED and CAUSAL:
            p_t = tl.where(rows[None, :] >= offs_n[:, None], p_t, 0.0)
        dv = tl.dot(p_t.to(q.dtype), do, dv, input_precision="tf32")
        ds_t = p_t * dp_t
        dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision="tf32")
    return dk, dv


@tessera.jit
def attention_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, dk_ptr, dv_ptr, lse_ptr, delta_ptr,
                              sm_scale, qk_scale, H, S,
                              stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                              stride_vb, stride_vh, stride_vs, stride_dob, stride_doh,
                              stride_dos, stride_dkb, stride_dkh, stride_dks, stride_dvb,
                              stride_dvh, stride_dvs, D: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                              RELOAD: tl.constexpr = False):
    start_n = tl.program_id(axis=0)
    off_bh = tl.program_id(axis=1)
    off_b = off_bh // H
    off_h = off_bh % H
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_head = k_ptr + off_b * stride_kb + off_h * stride_kh
    v_head = v_ptr + off_b * stride_vb + off_h * stride_vh
    k_offs = offsets_of(offs_n, stride_ks, D)
    v_offs = offsets_of(offs_n, stride_vs, D)
    q_head = q_ptr + off_b * stride_qb + off_h * stride_qh
    do_head = do_ptr + off_b * stride_dob + off_h * stride_doh
    q_offs = offsets_of(tl.arange(0, BLOCK_M), stride_qs, D)
    do_offs = offsets_of(tl.arange(0, BLOCK_M), stride_dos, D)
    dk = tl.zeros((BLOCK_N, D), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, D), dtype=tl.float32)
    full = S // BLOCK_M * BLOCK_M  # the query blocks wholly inside S end here
    lo = (start_n * BLOCK_N) // BLOCK_M * BLOCK_M if CAUSAL else 0
    mid = tl.cdiv(start_n * BLOCK_N + BLOCK_N - 1, BLOCK_M) * BLOCK_M if CAUSAL else 0
    # Masked, K and V re-read at each step: the blocks from lo that start before mid and S,
    # then the one crossing S unless it was among them.
    diagonal = tl.minimum(mid, S) - lo
    masked = tl.cdiv(diagonal, BLOCK_M) + tl.cdiv(tl.maximum(S - tl.maximum(mid, full), 0),
                                                  BLOCK_M)
    dk, dv = attention_bwd_dkdv_steps(
        dk, dv, None, None, k_head, v_head, k_offs, v_offs, q_head, do_head, q_offs, do_offs,
        lse_ptr + off_bh * S, delta_ptr + off_bh * S, lo, lo + masked * BLOCK_M, lo + diagonal,
        full, offs_n, S, qk_scale, stride_qs, stride_dos, BLOCK_M, BLOCK_N, True, CAUSAL, True)
    k = None if RELOAD else load_rows(k_head + k_offs, offs_n, S, True)
    v = None if RELOAD else load_rows(v_head + v_offs, offs_n, S, True)
    dk, dv = attention_bwd_dkdv_steps(  # unmasked
        dk, dv, k, v, k_head, v_head, k_offs, v_offs, q_head, do_head, q_offs, do_offs,
        lse_ptr + off_bh * S, delta_ptr + off_bh * S, mid, full, full, full, offs_n, S,
        qk_scale, stride_qs, stride_dos, BLOCK_M, BLOCK_N, False, CAUSAL, RELOAD)
    dk = dk * sm_scale
    tl.store(rows_of(dk_ptr, stride_dkb, stride_dkh, stride_dks, off_b, off_h, offs_n, D),
             dk.to(dk_ptr.dtype.element_ty), mask=offs_n[:, None] < S)
    tl.store(rows_of(dv_ptr, stride_dvb, stride_dvh, stride_dvs, off_b, off_h, offs_n, D),
             dv.to(dv_ptr.dtype.element_ty), mask=offs_n[:, None] < S)


@tessera.jit
def attention_bwd_dq_steps(dq, q, do, q_ptrs, do_ptrs, k_head, v_head, k_offs, v_offs, lse,
                           delta, start, end, offs_m, S, qk_scale, stride_ks, stride_vs,
                           BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                           RELOAD: tl.constexpr):
    """dQ from the key blocks starting in [start, end), as attention_fwd_steps walks them."""
    for start_n in range(start, end, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        q_step = load_rows(q_ptrs, offs_m, S, True) if RELOAD else q
        do_step = load_rows(do_ptrs, offs_m, S, True) if RELOAD else do
        k = load_rows(k_head + (k_offs + start_n * stride_ks), cols, S, MASKED)
        v = load_rows(v_head + (v_offs + start_n * stride_vs), cols, S, MASKED)
        qk = tl.dot(q_step, tl.trans(k), input_precision="tf32")
        dp = tl.dot(do_step, tl.trans(v), input_precision="tf32")  # overlaps the exp2 (Hopper)
        p = tl.exp2(qk * qk_scale - lse[:, None])
        if MASKED:
            p = tl.where(visible(offs_m, cols, S, CAUSAL), p, 0.0)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision="tf32")
    return dq


@tessera.jit
def attention_bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, dq_ptr, lse_ptr, delta_ptr, sm_scale,
                            qk_scale, H, S,
                            stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                            stride_vb, stride_vh, stride_vs, stride_dob, stride_doh, stride_dos,
                            stride_dqb, stride_dqh, stride_dqs, D: tl.constexpr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                            RELOAD: tl.constexpr = False):
    start_m = tl.num_programs(0) - 1 - tl.program_id(0) if CAUSAL else tl.program_id(0)
    off_bh = tl.program_id(axis=1)
    off_b, off_h = off_bh // H, off_bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    in_range = offs_m < S
    q_ptrs = rows_of(q_ptr, stride_qb, stride_qh, stride_qs, off_b, off_h, offs_m, D)
    do_ptrs = rows_of(do_ptr, stride_dob, stride_doh, stride_dos, off_b, off_h, offs_m, D)
    k_head = k_ptr + off_b * stride_kb + off_h * stride_kh
    v_head = v_ptr + off_b * stride_vb + off_h * stride_vh
    k_offs = offsets_of(tl.arange(0, BLOCK_N), stride_ks, D)
    v_offs = offsets_of(tl.arange(0, BLOCK_N), stride_vs, D)
    lse = tl.load(lse_ptr + off_bh * S + offs_m, mask=in_range, other=0.0)
    delta = tl.load(delta_ptr + off_bh * S + offs_m, mask=in_range, other=0.0)
    dq = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    split = (tl.minimum(start_m * BLOCK_M, S) if CAUSAL else S) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, S) if CAUSAL else S  # as in the forward
    dq = attention_bwd_dq_steps(  # masked, Q and dO re-read at each step
        dq, None, None, q_ptrs, do_ptrs, k_head, v_head, k_offs, v_offs, lse, delta, split, hi,
        offs_m, S, qk_scale, stride_ks, stride_vs, BLOCK_N, True, CAUSAL, True)
    q = None if RELOAD else load_rows(q_ptrs, offs_m, S, True)
    do = None if RELOAD else load_rows(do_ptrs, offs_m, S, True)
    dq = attention_bwd_dq_steps(  # unmasked
        dq, q, do, q_ptrs, do_ptrs, k_head, v_head, k_offs, v_offs, lse, delta, 0, split,
        offs_m, S, qk_scale, stride_ks, stride_vs, BLOCK_N, False, CAUSAL, RELOAD)
    dq = dq * sm_scale
    tl.store(rows_of(dq_ptr, stride_dqb, stride_dqh, stride_dqs, off_b, off_h, offs_m, D),
             dq.to(dq_ptr.dtype.element_ty), mask=in_range[:, None])


# %% [markdown]
# `attention_backward(q, k, v, o, lse, do, causal, sm_scale)` returns `(dq, dk, dv)` (input
# dtype) from the forward's inputs, `O`, `lse2` and `dO`; a `dO` whose last dim is not
# contiguous (the gradient of `o.sum()`: one value broadcast) is copied first.

# %%
# The autotuned launchers (the @jit kernels themselves stay plain, for .compile()/.asm()).
_tuned_dkdv = autotuned("dkdv", attention_bwd_dkdv_kernel)
_tuned_dq = autotuned("dq", attention_bwd_dq_kernel)


def _last_dim_contiguous(x):
    if _strides(x)[-1] == 1:
        return x
    return np.ascontiguousarray(x) if isinstance(x, np.ndarray) else x.contiguous()


def attention_backward(q, k, v, o, lse, do, causal: bool = False,
                       sm_scale: float | None = None, dq=None, dk=None, dv=None):
    """(dq, dk, dv) of attention_forward(q, k, v, causal, sm_scale) for the output gradient
    `do`, given its output `o` and `lse` (lse2). `dq`, `dk`, `dv` are written when given."""
    do = _last_dim_contiguous(do)
    _check("attention_backward", tuple(q.shape), q=q, k=k, v=v, o=o, do=do, dq=dq, dk=dk,
           dv=dv, lse=lse)
    B, H, S, D = q.shape
    dq, dk, dv = (_empty(x) if g is None else g for x, g in ((q, dq), (k, dk), (v, dv)))
    delta = _empty(q, (B, H, S), fp32=True)
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    attention_bwd_preprocess_kernel[(tessera.cdiv(S, preprocess_block(D)), B * H)](
        o, do, delta, H, S, *_strides(o)[:3], *_strides(do)[:3], D=D,
        BLOCK_M=preprocess_block(D), num_warps=4)
    strides = (*_strides(q)[:3], *_strides(k)[:3], *_strides(v)[:3], *_strides(do)[:3])
    _tuned_dkdv[(lambda meta: (tessera.cdiv(S, meta["BLOCK_N"]), B * H))](
        q, k, v, do, dk, dv, lse, delta, sm_scale, sm_scale * LOG2E, H, S, *strides,
        *_strides(dk)[:3], *_strides(dv)[:3], D=D, CAUSAL=causal, RELOAD=reload_tiles(q))
    _tuned_dq[(lambda meta: (tessera.cdiv(S, meta["BLOCK_M"]), B * H))](
        q, k, v, do, dq, lse, delta, sm_scale, sm_scale * LOG2E, H, S, *strides,
        *_strides(dq)[:3], D=D, CAUSAL=causal, RELOAD=reload_tiles(q))
    return dq, dk, dv


# %% [markdown]
# ## PyTorch integration
# `torch.compile` cannot look inside a Tessera launch, so the kernels become `torch.library`
# custom ops: opaque nodes in the traced graph, each with a *fake* implementation (the shapes
# and dtypes of its outputs, all that tracing needs), and an autograd formula that calls the
# backward op. The ops (names stable: benchmarks/attention.py uses them):
# - `tessera::attention_forward(q, k, v, causal, sm_scale) -> (o, lse2)`
# - `tessera::attention_backward(q, k, v, o, lse2, do, causal, sm_scale) -> (dq, dk, dv)`
#
# and the function to call from a model: `attention(q, k, v, causal=False, sm_scale=None)`,
# differentiable in q, k and v (lse2 is an auxiliary output, not differentiable). On CPU
# tensors the ops run the same kernels through the interpreter (it takes CPU tensors as they
# are), so the whole flow can be checked without a GPU. Without torch this cell defines nothing.

# %%
try:
    import torch
except ImportError:
    torch = None


def _on_cpu(fn, *args):
    """fn(*args) for CPU torch tensors, through the interpreter (which takes them as they are)."""
    with tessera.config.knobs.scope(interpret=True):
        return fn(*args)


def _register_torch_ops() -> None:
    if hasattr(torch.ops.tessera, "attention_forward"):  # this file was loaded before
        return
    Tensor = torch.Tensor

    @torch.library.custom_op("tessera::attention_forward", mutates_args=())
    def forward_op(q: Tensor, k: Tensor, v: Tensor, causal: bool,
                   sm_scale: float) -> tuple[Tensor, Tensor]:
        q, k, v = (_last_dim_contiguous(x) for x in (q, k, v))
        if q.is_cuda:
            return attention_forward(q, k, v, causal, sm_scale)
        return _on_cpu(attention_forward, q, k, v, causal, sm_scale)

    @forward_op.register_fake
    def _(q, k, v, causal, sm_scale):
        return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)

    @torch.library.custom_op("tessera::attention_backward", mutates_args=())
    def backward_op(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, do: Tensor,
                    causal: bool, sm_scale: float) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v, o, do = (_last_dim_contiguous(x) for x in (q, k, v, o, do))
        if q.is_cuda:
            return attention_backward(q, k, v, o, lse, do, causal, sm_scale)
        return _on_cpu(attention_backward, q, k, v, o, lse, do, causal, sm_scale)

    @backward_op.register_fake
    def _(q, k, v, o, lse, do, causal, sm_scale):
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)

    def setup_context(ctx, inputs, output):
        q, k, v, causal, sm_scale = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        ctx.mark_non_differentiable(lse)

    def backward(ctx, do, dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = backward_op(q, k, v, o, lse, do, ctx.causal, ctx.sm_scale)
        return dq, dk, dv, None, None

    forward_op.register_autograd(backward, setup_context=setup_context)


def attention(q, k, v, causal: bool = False, sm_scale: float | None = None):
    """softmax(q kᵀ · sm_scale) v for (B, H, S, D) torch tensors (CUDA, or CPU through the
    interpreter), differentiable, with no graph break under torch.compile(fullgraph=True)."""
    if sm_scale is None:
        sm_scale = q.shape[-1] ** -0.5
    return torch.ops.tessera.attention_forward(q, k, v, causal, sm_scale)[0]


if torch is not None:
    _register_torch_ops()


# %% [markdown]
# ## Correctness
# Fresh random inputs, poisoned (NaN) outputs, against a float64 NumPy reference computed the
# textbook way (full score matrix, max-subtracted softmax, the backward section's formulas).
# S = 1, 17 and 1000 are not multiples of any block. Bounds on ‖x − ref‖ / ‖ref‖: O within
# 5e-3 for fp16 and 1e-2 for bf16 (BENCHMARKS.md); float32 inputs compute in tf32 (fp16's 10
# mantissa bits), so fp16's bounds. Gradients get twice the output's bound: each is a sum of
# products of two rounded factors (`P` or `dS` in the input dtype). lse2 within 1e-3.

# %%
BOUNDS = {"float16": (5e-3, 1e-2), "bfloat16": (1e-2, 2e-2), "float32": (5e-3, 1e-2)}


def reference(q, k, v, do, causal: bool, sm_scale: float) -> dict:
    """O, lse2, dQ, dK and dV in float64 for float64 (B, H, S, D) arrays."""
    scores = q @ k.swapaxes(-1, -2) * sm_scale
    if causal:
        S = q.shape[2]
        scores = np.where(np.tril(np.ones((S, S), bool)), scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - m)
    l = e.sum(axis=-1, keepdims=True)
    p = e / l
    dp = do @ v.swapaxes(-1, -2)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    return {"o": p @ v, "lse": (m + np.log(l))[..., 0] * LOG2E, "dq": ds @ k * sm_scale,
            "dk": ds.swapaxes(-1, -2) @ q * sm_scale, "dv": p.swapaxes(-1, -2) @ do}


def check_case(B, H, S, D, causal, dtype_name, make, to_numpy, rng) -> dict:
    q, k, v, do = (make(rng.standard_normal((B, H, S, D)).astype(np.float32), dtype_name)
                   for _ in range(4))
    got = {name: make(np.full((B, H, S, D), np.nan, np.float32), dtype_name)
           for name in ("o", "dq", "dk", "dv")}  # poisoned
    got["lse"] = make(np.full((B, H, S), np.nan, np.float32), "float32")
    sm_scale = D ** -0.5
    attention_forward(q, k, v, causal, sm_scale, out=got["o"], lse=got["lse"])
    attention_backward(q, k, v, got["o"], got["lse"], do, causal, sm_scale, dq=got["dq"],
                       dk=got["dk"], dv=got["dv"])
    ref = reference(*(to_numpy(x).astype(np.float64) for x in (q, k, v, do)), causal, sm_scale)
    errors = {name: tessera.testing.relative_error(to_numpy(got[name]), ref[name])
              for name in got}
    bound, grad_bound = BOUNDS[dtype_name]
    label = f"B={B} H={H} S={S:<5} D={D:<3} {'causal' if causal else 'full':<6} {dtype_name:<8}"
    for name, err in errors.items():
        limit = {"o": bound, "lse": 1e-3}.get(name, grad_bound)
        assert err <= limit, f"{label}: {name} error {err:.2e} > {limit}"
    print(label, "  ".join(f"{name} {err:.1e}" for name, err in errors.items()), " ok")
    return errors


def check(cases, dtypes, make, to_numpy):
    rng = np.random.default_rng()
    for B, H, S, D in cases:
        for causal in (False, True):
            for dtype_name in dtypes:
                check_case(B, H, S, D, causal, dtype_name, make, to_numpy, rng)


# %% [markdown]
# The PyTorch flow: `torch.compile(fullgraph=True)` of a function calling `attention` (a
# graph break would raise), forward and backward of `o.sum()` against the reference.

# %%
def check_torch(device: str, B=2, H=3, S=100, D=64, dtype_name="bfloat16"):
    rng = np.random.default_rng()
    q, k, v = (torch.tensor(rng.standard_normal((B, H, S, D)), dtype=getattr(torch, dtype_name),
                            device=device, requires_grad=True) for _ in range(3))
    compiled = torch.compile(lambda q, k, v: attention(q, k, v, causal=True), fullgraph=True)
    o = compiled(q, k, v)
    o.sum().backward()
    ref = reference(*(x.detach().double().cpu().numpy() for x in (q, k, v)),
                    np.ones((B, H, S, D)), True, D ** -0.5)
    bound, grad_bound = BOUNDS[dtype_name]
    for name, x, limit in (("o", o, bound), ("dq", q.grad, grad_bound),
                           ("dk", k.grad, grad_bound), ("dv", v.grad, grad_bound)):
        err = tessera.testing.relative_error(x.detach().double().cpu().numpy(), ref[name])
        assert err <= limit, f"torch.compile'd attention on {device}: {name} error {err:.2e}"
    print(f"torch.compile(fullgraph=True) attention on {device}, {dtype_name}: forward and "
          "backward ok")


if gpu_available():
    def to_torch(x, dtype_name):
        return torch.from_numpy(x).to("cuda", getattr(torch, dtype_name))

    to_numpy = lambda t: t.float().cpu().numpy()
    check([(2, 3, S, D) for S in (1, 17, 128, 1000) for D in HEAD_DIMS]
          + [(1, 2, 4096, D) for D in HEAD_DIMS], ["float16", "bfloat16"], to_torch, to_numpy)
    check([(2, 3, 1000, D) for D in HEAD_DIMS], ["float32"], to_torch, to_numpy)
    check_torch("cuda")
else:
    import ml_dtypes

    tessera.config.knobs.interpret = True
    print("no GPU: running through the interpreter")

    def to_numpy_dtype(x, dtype_name):
        return x.astype({"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
                         "float32": np.float32}[dtype_name])

    to_float32 = lambda x: x.astype(np.float32)
    check([(1, 2, 1, 16), (2, 1, 17, 32), (1, 2, 128, 64), (1, 1, 200, 128), (1, 1, 40, 256)],
          ["float16", "bfloat16"], to_numpy_dtype, to_float32)
    check([(1, 2, 33, 64), (1, 1, 40, 256)], ["float32"], to_numpy_dtype, to_float32)
    if torch is not None:
        check_torch("cpu", S=37, D=32)

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
# TFLOP/s (forward 4·B·H·S²·D, halved when causal; backward 2.5 x that) at B·S = 16384 tokens
# and H = 2048 / D (BENCHMARKS.md), against PyTorch's `scaled_dot_product_attention` with the
# flash backend (FlashAttention-2) and the cuDNN backend, in the same run; one table and plot
# per pass, head dim and mask. benchmarks/attention.py runs the full sweeps (both dtypes,
# memory, the CS336 cases).

# %%
PROVIDERS = {"tessera": "Tessera", "FLASH_ATTENTION": "SDPA flash", "CUDNN_ATTENTION": "SDPA cuDNN"}


@tessera.testing.perf_report([tessera.testing.Benchmark(
    x_names=["S"], x_vals=[1024, 2048, 4096, 8192], line_arg="provider",
    line_vals=list(PROVIDERS), line_names=list(PROVIDERS.values()), ylabel="TFLOP/s",
    plot_name=f"fused-attention-{mode}-d{D}{'-causal' if causal else ''}",
    args={"D": D, "causal": causal, "mode": mode})
    for mode in ("fwd", "bwd") for D in (64, 128) for causal in (False, True)])
def bench_attention(S, D, causal, mode, provider, dtype=None):
    import torch.nn.functional as F
    from tessera.testing import do_bench
    from torch.nn.attention import SDPBackend, sdpa_kernel
    B, H = 16384 // S, 2048 // D
    q, k, v, do = (torch.randn((B, H, S, D), device="cuda", dtype=dtype or torch.float16)
                   for _ in range(4))
    flops = 4 * B * H * S * S * D / (2 if causal else 1) * (2.5 if mode == "bwd" else 1)
    if provider == "tessera":
        o, lse = attention_forward(q, k, v, causal)  # compiles, outside the timing
        if mode == "fwd":
            return flops / do_bench(lambda: attention_forward(q, k, v, causal, out=o, lse=lse)) / 1e9
        return flops / do_bench(lambda: attention_backward(q, k, v, o, lse, do, causal)) / 1e9
    backend = getattr(SDPBackend, provider, None)
    inputs = [x.requires_grad_() for x in (q, k, v)]
    try:
        with sdpa_kernel(backend):
            o = F.scaled_dot_product_attention(*inputs, is_causal=causal)
            if mode == "fwd":
                ms = do_bench(lambda: F.scaled_dot_product_attention(*inputs, is_causal=causal))
            else:
                ms = do_bench(lambda: torch.autograd.grad(o, inputs, do, retain_graph=True))
    except (RuntimeError, TypeError):  # no such backend, or it does not take these inputs
        return float("nan")
    return flops / ms / 1e9


if gpu_available() and "--no-bench" not in sys.argv:
    bench_attention.run(print_data=True, save_path=os.environ.get("TUTORIAL_PLOTS", "."))
