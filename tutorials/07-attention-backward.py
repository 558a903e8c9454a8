# %% [markdown]
# # Fused attention, backward, and a differentiable PyTorch op
#
# Tutorial 06 computed `O = softmax(Q Kᵀ · sm_scale) V` and each row's base-2 log-sum-exp
# `lse2` without the S x S scores. This one computes the gradients dQ, dK, dV the same way and
# makes the pair usable from PyTorch models. You will learn:
# - the attention backward as FlashAttention-2 does it: `P` rebuilt from `lse2` with one `exp2`
#   per score, three kernels, no atomics (each program owns its rows of dQ or of dK and dV);
# - working on transposed tiles, so that `Pᵀ` and `dSᵀ` feed the next products from registers;
# - overlapping products with the exponentials (on Hopper an asynchronous `wgmma` runs while
#   the previous scores go through `exp2`);
# - wrapping kernels as a `torch.library` custom op with a fake implementation and autograd,
#   so that `torch.compile(fullgraph=True)` of a model calling them has no graph breaks.
#
# The forward and its small `@jit` helpers (`rows_of`, `load_rows`, ...) come from
# `tessera.ops`, which holds the kernels of both tutorials (its `attention` is the op built
# here). With a GPU the tutorial runs on it; else through the interpreter (CPU) at small sizes.

# %%
import os
import sys

import numpy as np
import tessera
import tessera.language as tl
from tessera.ops import attention_forward
from tessera.ops.flash_attention import LOG2E, preprocess_block, reload_tiles
from tessera.ops.flash_attention.configs import autotuned
from tessera.ops.flash_attention.backward import head_tiles, tile_at
from tessera.ops.flash_attention.forward import load_rows, offsets_of, rows_of, visible
from tessera.testing import gpu_available

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
def attention_bwd_dkdv_steps(dk, dv, k, v, k_src, v_src, k_offs, v_offs, q_src, do_src,
                             q_offs, do_offs, lse_ptr, delta_ptr, start, end, jump, to, n0,
                             offs_n, S, qk_scale, stride_qs, stride_dos, BLOCK_M: tl.constexpr,
                             BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                             RELOAD: tl.constexpr, TMA: tl.constexpr = False, dq_dst=None,
                             dq_offs=None, ATOMIC_DQ: tl.constexpr = False):
    """dK, dV from the query blocks starting in [start, end), MASKED ones from `jump` on being
    the block at `to` instead; q_offs, do_offs: rows 0 to BLOCK_M; lse_ptr, delta_ptr: the
    head's row 0. Unless MASKED, every query of those blocks is in S and sees every key.
    RELOAD re-reads K and V (rows n0 .. n0 + BLOCK_N) at each step. The sources are
    head_tiles': TMA, the head's descriptors (k_offs, v_offs unused). ATOMIC_DQ: each step
    also adds its dS K (unscaled, float32) into the head's dQ accumulator `dq_dst` (TMA: its
    descriptor, a reduction per tile; else its row 0, dq_offs its rows' offsets)."""
    inv_scale = 1.0 / qk_scale
    for step in range(start, end, BLOCK_M):
        start_m = tl.where(step < jump, step, to) if MASKED else step
        rows = start_m + tl.arange(0, BLOCK_M)
        if RELOAD:
            k_step = k_src.load([n0, 0]) if TMA else load_rows(k_src + k_offs, offs_n, S, True)
            v_step = v_src.load([n0, 0]) if TMA else load_rows(v_src + v_offs, offs_n, S, True)
        else:
            k_step = k
            v_step = v
        q = tile_at(q_src, q_offs, start_m, rows, S, stride_qs, MASKED, TMA)
        do = tile_at(do_src, do_offs, start_m, rows, S, stride_dos, MASKED, TMA)
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
        if ATOMIC_DQ:
            dq = tl.dot(tl.trans(ds_t.to(q.dtype)), k_step, input_precision="tf32")
            if TMA:  # rows past S fall outside the descriptor: the reduction drops them
                dq_dst.atomic_add([start_m, 0], dq)
            else:
                # dq_offs: rows 0 .. BLOCK_M of the contiguous accumulator (stride D).
                tl.atomic_add(dq_dst + (dq_offs + start_m * k_step.shape[1]), dq,
                              mask=rows[:, None] < S, sem="relaxed")
    return dk, dv


@tessera.jit
def attention_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, dk_ptr, dv_ptr, lse_ptr, delta_ptr,
                              sm_scale, qk_scale, H, S,
                              stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                              stride_vb, stride_vh, stride_vs, stride_dob, stride_doh,
                              stride_dos, stride_dkb, stride_dkh, stride_dks, stride_dvb,
                              stride_dvh, stride_dvs, D: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                              RELOAD: tl.constexpr = False, TMA: tl.constexpr = False,
                              dq_acc_ptr=None, ATOMIC_DQ: tl.constexpr = False):
    """dK, dV of BLOCK_N keys; ATOMIC_DQ: also dQ, each step's dS K added into `dq_acc_ptr`
    (float32, contiguous (B, H, S, D), zeroed; unscaled), so that no second pass over K and
    V is needed (attention_bwd_dq_convert_kernel then scales and casts it)."""
    start_n = tl.program_id(axis=0)
    off_bh = tl.program_id(axis=1)
    off_b = off_bh // H
    off_h = off_bh % H
    n0 = start_n * BLOCK_N  # the first key row: a TMA box coordinate
    offs_n = n0 + tl.arange(0, BLOCK_N)
    # TMA: one (S, D) descriptor per head and tensor (head_tiles); the pipeliner copies the
    # loops' Q and dO tiles (and the masked loop's K and V) with the TMA into mbarrier rings.
    k_src = head_tiles(k_ptr + off_b * stride_kb + off_h * stride_kh, stride_ks, S, D, BLOCK_N,
                       TMA)
    v_src = head_tiles(v_ptr + off_b * stride_vb + off_h * stride_vh, stride_vs, S, D, BLOCK_N,
                       TMA)
    q_src = head_tiles(q_ptr + off_b * stride_qb + off_h * stride_qh, stride_qs, S, D, BLOCK_M,
                       TMA)
    do_src = head_tiles(do_ptr + off_b * stride_dob + off_h * stride_doh, stride_dos, S, D,
                        BLOCK_M, TMA)
    k_offs = None if TMA else offsets_of(offs_n, stride_ks, D)
    v_offs = None if TMA else offsets_of(offs_n, stride_vs, D)
    q_offs = None if TMA else offsets_of(tl.arange(0, BLOCK_M), stride_qs, D)
    do_offs = None if TMA else offsets_of(tl.arange(0, BLOCK_M), stride_dos, D)
    dq_dst = None
    dq_offs = None
    if ATOMIC_DQ:  # int64: B·H·S·D may pass 2^31
        dq_dst = head_tiles(dq_acc_ptr + off_bh.to(tl.int64) * S * D, D, S, D, BLOCK_M, TMA)
        dq_offs = None if TMA else offsets_of(tl.arange(0, BLOCK_M), D, D)
    dk = tl.zeros((BLOCK_N, D), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, D), dtype=tl.float32)
    full = S // BLOCK_M * BLOCK_M  # the query blocks wholly inside S end here
    lo = n0 // BLOCK_M * BLOCK_M if CAUSAL else 0
    mid = tl.cdiv(n0 + BLOCK_N - 1, BLOCK_M) * BLOCK_M if CAUSAL else 0
    # Masked, K and V re-read at each step: the blocks from lo that start before mid and S,
    # then the one crossing S unless it was among them.
    diagonal = tl.minimum(mid, S) - lo
    masked = tl.cdiv(diagonal, BLOCK_M) + tl.cdiv(tl.maximum(S - tl.maximum(mid, full), 0),
                                                  BLOCK_M)
    dk, dv = attention_bwd_dkdv_steps(
        dk, dv, None, None, k_src, v_src, k_offs, v_offs, q_src, do_src, q_offs, do_offs,
        lse_ptr + off_bh * S, delta_ptr + off_bh * S, lo, lo + masked * BLOCK_M, lo + diagonal,
        full, n0, offs_n, S, qk_scale, stride_qs, stride_dos, BLOCK_M, BLOCK_N, True, CAUSAL,
        True, TMA, dq_dst, dq_offs, ATOMIC_DQ)
    if RELOAD:
        k = None
        v = None
    elif TMA:
        k = k_src.load([n0, 0])
        v = v_src.load([n0, 0])
    else:
        k = load_rows(k_src + k_offs, offs_n, S, True)
        v = load_rows(v_src + v_offs, offs_n, S, True)
    dk, dv = attention_bwd_dkdv_steps(  # unmasked
        dk, dv, k, v, k_src, v_src, k_offs, v_offs, q_src, do_src, q_offs, do_offs,
        lse_ptr + off_bh * S, delta_ptr + off_bh * S, mid, full, full, full, n0, offs_n, S,
        qk_scale, stride_qs, stride_dos, BLOCK_M, BLOCK_N, False, CAUSAL, RELOAD, TMA, dq_dst,
        dq_offs, ATOMIC_DQ)
    dk = dk * sm_scale
    tl.store(rows_of(dk_ptr, stride_dkb, stride_dkh, stride_dks, off_b, off_h, offs_n, D),
             dk.to(dk_ptr.dtype.element_ty), mask=offs_n[:, None] < S)
    tl.store(rows_of(dv_ptr, stride_dvb, stride_dvh, stride_dvs, off_b, off_h, offs_n, D),
             dv.to(dv_ptr.dtype.element_ty), mask=offs_n[:, None] < S)


@tessera.jit
def attention_bwd_dq_steps(dq, q, do, q_src, do_src, k_src, v_src, k_offs, v_offs, lse,
                           delta, start, end, row0, offs_m, S, qk_scale, stride_ks, stride_vs,
                           BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                           RELOAD: tl.constexpr, TMA: tl.constexpr = False):
    """dQ from the key blocks starting in [start, end), as attention_fwd_steps walks them.
    RELOAD re-reads Q and dO (rows row0 .. row0 + BLOCK_M; the pointer path: q_src and do_src
    are their pointers) at each step. TMA: the sources are the head's descriptors."""
    for start_n in range(start, end, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        if RELOAD:
            q_step = q_src.load([row0, 0]) if TMA else load_rows(q_src, offs_m, S, True)
            do_step = do_src.load([row0, 0]) if TMA else load_rows(do_src, offs_m, S, True)
        else:
            q_step = q
            do_step = do
        k = tile_at(k_src, k_offs, start_n, cols, S, stride_ks, MASKED, TMA)
        v = tile_at(v_src, v_offs, start_n, cols, S, stride_vs, MASKED, TMA)
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
                            RELOAD: tl.constexpr = False, TMA: tl.constexpr = False):
    start_m = tl.num_programs(0) - 1 - tl.program_id(0) if CAUSAL else tl.program_id(0)
    off_bh = tl.program_id(axis=1)
    off_b, off_h = off_bh // H, off_bh % H
    row0 = start_m * BLOCK_M  # the first query row: a TMA box coordinate
    offs_m = row0 + tl.arange(0, BLOCK_M)
    in_range = offs_m < S
    if TMA:  # the head's (S, D) descriptors (head_tiles), as in the dK/dV kernel
        q_src = head_tiles(q_ptr + off_b * stride_qb + off_h * stride_qh, stride_qs, S, D,
                           BLOCK_M, TMA)
        do_src = head_tiles(do_ptr + off_b * stride_dob + off_h * stride_doh, stride_dos, S, D,
                            BLOCK_M, TMA)
    else:
        q_src = rows_of(q_ptr, stride_qb, stride_qh, stride_qs, off_b, off_h, offs_m, D)
        do_src = rows_of(do_ptr, stride_dob, stride_doh, stride_dos, off_b, off_h, offs_m, D)
    k_src = head_tiles(k_ptr + off_b * stride_kb + off_h * stride_kh, stride_ks, S, D, BLOCK_N,
                       TMA)
    v_src = head_tiles(v_ptr + off_b * stride_vb + off_h * stride_vh, stride_vs, S, D, BLOCK_N,
                       TMA)
    k_offs = None if TMA else offsets_of(tl.arange(0, BLOCK_N), stride_ks, D)
    v_offs = None if TMA else offsets_of(tl.arange(0, BLOCK_N), stride_vs, D)
    lse = tl.load(lse_ptr + off_bh * S + offs_m, mask=in_range, other=0.0)
    delta = tl.load(delta_ptr + off_bh * S + offs_m, mask=in_range, other=0.0)
    dq = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    split = (tl.minimum(row0, S) if CAUSAL else S) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M, S) if CAUSAL else S  # as in the forward
    dq = attention_bwd_dq_steps(  # masked, Q and dO re-read at each step
        dq, None, None, q_src, do_src, k_src, v_src, k_offs, v_offs, lse, delta, split, hi,
        row0, offs_m, S, qk_scale, stride_ks, stride_vs, BLOCK_N, True, CAUSAL, True, TMA)
    if RELOAD:
        q = None
        do = None
    elif TMA:
        q = q_src.load([row0, 0])
        do = do_src.load([row0, 0])
    else:
        q = load_rows(q_src, offs_m, S, True)
        do = load_rows(do_src, offs_m, S, True)
    dq = attention_bwd_dq_steps(  # unmasked
        dq, q, do, q_src, do_src, k_src, v_src, k_offs, v_offs, lse, delta, 0, split, row0,
        offs_m, S, qk_scale, stride_ks, stride_vs, BLOCK_N, False, CAUSAL, RELOAD, TMA)
    dq = dq * sm_scale
    tl.store(rows_of(dq_ptr, stride_dqb, stride_dqh, stride_dqs, off_b, off_h, offs_m, D),
             dq.to(dq_ptr.dtype.element_ty), mask=in_range[:, None])


# %% [markdown]
# ## The host wrapper
# `attention_backward(q, k, v, o, lse, do, causal, sm_scale)` returns `(dq, dk, dv)` (input
# dtype) from the forward's inputs, `O`, `lse2` and `dO`; a `dO` whose last dim is not
# contiguous (the gradient of `o.sum()`: one value broadcast) is copied first. The tiles are
# autotuned as the forward's, over `tessera.ops`' tables (`autotuned("dkdv", ...)` keeps the
# candidates of the launch's head dim and dtype); the delta kernel takes fixed tiles.

# %%
tuned_dkdv = autotuned("dkdv", attention_bwd_dkdv_kernel)
tuned_dq = autotuned("dq", attention_bwd_dq_kernel)


def strides(x) -> tuple:
    return tuple(s // x.itemsize for s in x.strides) if isinstance(x, np.ndarray) else x.stride()


def empty(like, shape, fp32: bool = False):
    """An uninitialized array/tensor on like's device, of like's dtype (or float32)."""
    if isinstance(like, np.ndarray):
        return np.empty(shape, np.float32 if fp32 else like.dtype)
    import torch
    return torch.empty(shape, device=like.device, dtype=torch.float32 if fp32 else like.dtype)


def last_dim_contiguous(x):
    if strides(x)[-1] == 1:
        return x
    return np.ascontiguousarray(x) if isinstance(x, np.ndarray) else x.contiguous()


def attention_backward(q, k, v, o, lse, do, causal: bool = False,
                       sm_scale: float | None = None, dq=None, dk=None, dv=None):
    """(dq, dk, dv) of attention_forward(q, k, v, causal, sm_scale) for the output gradient
    `do`, given its output `o` and `lse` (lse2). `dq`, `dk`, `dv` are written when given."""
    do = last_dim_contiguous(do)
    B, H, S, D = q.shape
    dq, dk, dv = (empty(x, x.shape) if g is None else g for x, g in ((q, dq), (k, dk), (v, dv)))
    delta = empty(q, (B, H, S), fp32=True)
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    attention_bwd_preprocess_kernel[(tessera.cdiv(S, preprocess_block(D)), B * H)](
        o, do, delta, H, S, *strides(o)[:3], *strides(do)[:3], D=D,
        BLOCK_M=preprocess_block(D), num_warps=4)
    st = (*strides(q)[:3], *strides(k)[:3], *strides(v)[:3], *strides(do)[:3])
    tuned_dkdv[lambda meta: (tessera.cdiv(S, meta["BLOCK_N"]), B * H)](
        q, k, v, do, dk, dv, lse, delta, sm_scale, sm_scale * LOG2E, H, S, *st,
        *strides(dk)[:3], *strides(dv)[:3], D=D, CAUSAL=causal, RELOAD=reload_tiles(q))
    tuned_dq[lambda meta: (tessera.cdiv(S, meta["BLOCK_M"]), B * H)](
        q, k, v, do, dq, lse, delta, sm_scale, sm_scale * LOG2E, H, S, *st,
        *strides(dq)[:3], D=D, CAUSAL=causal, RELOAD=reload_tiles(q))
    return dq, dk, dv


# %% [markdown]
# ## Correctness
# Fresh random inputs and output gradients, poisoned (NaN) gradients, against the float64
# formulas above computed the textbook way (full P, dP, dS). S = 1, 17 and 1000 are not
# multiples of any block. Bounds on ‖x − ref‖ / ‖ref‖: twice the forward's (1e-2 for fp16 and
# tf32, 2e-2 for bf16): each gradient is a sum of products of two rounded factors (`P` or `dS`
# in the input dtype).

# %%
BOUNDS = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-2}


def reference(q, k, v, do, causal: bool, sm_scale: float) -> dict:
    """O, dQ, dK and dV in float64 for float64 (B, H, S, D) arrays."""
    scores = q @ k.swapaxes(-1, -2) * sm_scale
    if causal:
        S = q.shape[2]
        scores = np.where(np.tril(np.ones((S, S), bool)), scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    dp = do @ v.swapaxes(-1, -2)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    return {"o": p @ v, "dq": ds @ k * sm_scale, "dk": ds.swapaxes(-1, -2) @ q * sm_scale,
            "dv": p.swapaxes(-1, -2) @ do}


def check(cases, dtypes, make, to_numpy):
    rng = np.random.default_rng()
    for B, H, S, D in cases:
        for causal in (False, True):
            for dtype_name in dtypes:
                q, k, v, do = (make(rng.standard_normal((B, H, S, D)).astype(np.float32),
                                    dtype_name) for _ in range(4))
                grads = [make(np.full((B, H, S, D), np.nan, np.float32), dtype_name)
                         for _ in range(3)]
                o, lse = attention_forward(q, k, v, causal, D ** -0.5)
                attention_backward(q, k, v, o, lse, do, causal, D ** -0.5, *grads)
                ref = reference(*(to_numpy(x).astype(np.float64) for x in (q, k, v, do)),
                                causal, D ** -0.5)
                label = (f"B={B} H={H} S={S:<5} D={D:<3} {'causal' if causal else 'full':<6} "
                         f"{dtype_name:<8}")
                errors = {name: tessera.testing.relative_error(to_numpy(g), ref[name])
                          for name, g in zip(("dq", "dk", "dv"), grads)}
                for name, err in errors.items():
                    assert err <= BOUNDS[dtype_name], f"{label}: {name} error {err:.2e}"
                print(label, "  ".join(f"{n} {e:.1e}" for n, e in errors.items()), " ok")


# %% [markdown]
# ## PyTorch integration
# `torch.compile` cannot look inside a Tessera launch, so the kernels become `torch.library`
# custom ops: opaque nodes in the traced graph, each with a *fake* implementation (the shapes
# and dtypes of its outputs, all that tracing needs), and an autograd formula that calls the
# backward op. Here they are registered as `tessera_tutorial::attention_forward` and
# `tessera_tutorial::attention_backward` (`tessera.ops` registers the same pair as
# `tessera::...`), with the function to call from a model:
# `attention(q, k, v, causal=False, sm_scale=None)`, differentiable in q, k and v (lse2 is an
# auxiliary output, not differentiable). On CPU tensors the ops run the same kernels through
# the interpreter (it takes CPU tensors as they are), so the whole flow runs without a GPU.

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
    Tensor = torch.Tensor

    @torch.library.custom_op("tessera_tutorial::attention_forward", mutates_args=())
    def forward_op(q: Tensor, k: Tensor, v: Tensor, causal: bool,
                   sm_scale: float) -> tuple[Tensor, Tensor]:
        q, k, v = (last_dim_contiguous(x) for x in (q, k, v))
        if q.is_cuda:
            return attention_forward(q, k, v, causal, sm_scale)
        return _on_cpu(attention_forward, q, k, v, causal, sm_scale)

    @forward_op.register_fake
    def _(q, k, v, causal, sm_scale):
        return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)

    @torch.library.custom_op("tessera_tutorial::attention_backward", mutates_args=())
    def backward_op(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, do: Tensor,
                    causal: bool, sm_scale: float) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v, o, do = (last_dim_contiguous(x) for x in (q, k, v, o, do))
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
    return torch.ops.tessera_tutorial.attention_forward(q, k, v, causal, sm_scale)[0]


if torch is not None:
    _register_torch_ops()

# %% [markdown]
# The PyTorch flow: `torch.compile(fullgraph=True)` of a function calling `attention` (a
# graph break would raise), forward and backward of `o.sum()` against the reference. Then
# the checks run, on the GPU or through the interpreter.

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
    bound = BOUNDS[dtype_name]
    for name, x in (("o", o), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
        err = tessera.testing.relative_error(x.detach().double().cpu().numpy(), ref[name])
        assert err <= bound, f"torch.compile'd attention on {device}: {name} error {err:.2e}"
    print(f"torch.compile(fullgraph=True) attention on {device}, {dtype_name}: forward and "
          "backward ok")


if gpu_available():
    def to_torch(x, dtype_name):
        return torch.from_numpy(x).to("cuda", getattr(torch, dtype_name))

    to_numpy = lambda t: t.float().cpu().numpy()  # noqa: E731
    check([(2, 3, S, D) for S in (1, 17, 128, 1000) for D in (16, 32, 64, 128, 256)]
          + [(1, 2, 4096, D) for D in (64, 128)], ["float16", "bfloat16"], to_torch, to_numpy)
    check([(2, 3, 1000, D) for D in (16, 64, 256)], ["float32"], to_torch, to_numpy)
    check_torch("cuda")
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
    if torch is not None:
        check_torch("cpu", S=37, D=32)

# %% [markdown]
# ## Benchmark
# TFLOP/s of the backward (2.5 x the forward's 4·B·H·S²·D, halved when causal) at
# B·S = 16384 tokens and H = 2048 / D (docs/benchmarks.md), against the backward of PyTorch's
# `scaled_dot_product_attention` with the flash backend (FlashAttention-2) and the cuDNN
# backend, in the same run. benchmarks/attention.py runs the full sweeps.

# %%
PROVIDERS = {"tessera": "Tessera", "FLASH_ATTENTION": "SDPA flash", "CUDNN_ATTENTION": "SDPA cuDNN"}


@tessera.testing.perf_report([tessera.testing.Benchmark(
    x_names=["S"], x_vals=[1024, 2048, 4096, 8192], line_arg="provider",
    line_vals=list(PROVIDERS), line_names=list(PROVIDERS.values()), ylabel="TFLOP/s",
    plot_name=f"fused-attention-bwd-d{D}{'-causal' if causal else ''}",
    args={"D": D, "causal": causal})
    for D in (64, 128) for causal in (False, True)])
def bench_backward(S, D, causal, provider, dtype=None):
    import torch.nn.functional as F
    from tessera.testing import do_bench
    from torch.nn.attention import SDPBackend, sdpa_kernel
    B, H = 16384 // S, 2048 // D
    q, k, v, do = (torch.randn((B, H, S, D), device="cuda", dtype=dtype or torch.float16)
                   for _ in range(4))
    flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
    if provider == "tessera":
        o, lse = attention_forward(q, k, v, causal)
        attention_backward(q, k, v, o, lse, do, causal)  # compiles and tunes, outside the timing
        return flops / do_bench(lambda: attention_backward(q, k, v, o, lse, do, causal)) / 1e9
    inputs = [x.requires_grad_() for x in (q, k, v)]
    try:
        with sdpa_kernel(getattr(SDPBackend, provider)):
            o = F.scaled_dot_product_attention(*inputs, is_causal=causal)
            ms = do_bench(lambda: torch.autograd.grad(o, inputs, do, retain_graph=True))
    except (RuntimeError, TypeError):  # no such backend, or it does not take these inputs
        return float("nan")
    return flops / ms / 1e9


if gpu_available() and "--no-bench" not in sys.argv:
    bench_backward.run(print_data=True, save_path=os.environ.get("TUTORIAL_PLOTS", "."))
