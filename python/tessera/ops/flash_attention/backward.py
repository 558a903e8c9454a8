"""The fused-attention backward: dQ, dK, dV from Q, K, V, O, dO and the forward's base-2
log-sum-exp, in three kernels, none of which needs the S x S matrices or atomics.

With S = Q Kᵀ · sm_scale, P = softmax(S) and O = P V, for an incoming gradient dO:

    dV = Pᵀ dO      dP = dO Vᵀ      dS = P ⊙ (dP − Δ)      dQ = dS K · sm_scale
    dK = dSᵀ Q · sm_scale,    where  Δ_i = Σ_j P_ij dP_ij = Σ_d dO_id O_id

1. attention_bwd_preprocess_kernel: Δ = rowsum(dO ⊙ O) in float32.
2. attention_bwd_dkdv_kernel: one program per BLOCK_N keys keeps K, V and the dK, dV
   accumulators on chip and walks the queries, rebuilding Pᵀ = 2^(K Qᵀ · qk_scale − lse2) on
   transposed tiles so that Pᵀ and dSᵀ feed the next products straight from registers.
3. attention_bwd_dq_kernel: one program per BLOCK_M queries walks the keys, as the forward.

As in the forward, masks run only in a first loop over the blocks that cross S or the causal
diagonal. tutorials/07-attention-backward.py derives it step by step.
"""
import tessera
import tessera.language as tl

from .configs import (LOG2E, _check, _empty, _last_dim_contiguous, _strides, _zeros, autotuned,
                      preprocess_block, reload_tiles, scratch_allocator, tma_path)
from .forward import load_rows, offsets_of, rows_of, visible
from tessera.runtime.allocation import default_allocator


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
def head_tiles(base, stride_s, S, D: tl.constexpr, BLOCK: tl.constexpr, TMA: tl.constexpr):
    """Where a head's (BLOCK, D) tiles come from: TMA, its (S, D) tensor descriptor (the
    head's bounds, so a block crossing S reads the TMA's zero fill, never the next head's
    rows); else `base` itself (the head's row 0, read by `tile_at`'s pointer loads)."""
    if TMA:
        return tl.make_tensor_descriptor(base, shape=[S, D], strides=[stride_s, 1],
                                         block_shape=[BLOCK, D])
    return base


@tessera.jit
def tile_at(src, offs, start, rows, S, stride_s, MASKED: tl.constexpr, TMA: tl.constexpr):
    """The tile of rows `rows` = start + (0 .. BLOCK) of `src` (head_tiles'; offs: the pointer
    path's offsets of rows 0 .. BLOCK): rows past S read as zeros, by the descriptor's fill or
    (MASKED) the mask; unless MASKED, every row is in S."""
    if TMA:
        return src.load([start, 0])
    return load_rows(src + (offs + start * stride_s), rows, S, MASKED)


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


@tessera.jit
def attention_bwd_dq_convert_kernel(acc_ptr, dq_ptr, sm_scale, H, S, stride_dqb, stride_dqh,
                                    stride_dqs, D: tl.constexpr, BLOCK_M: tl.constexpr):
    """dQ = sm_scale · the ATOMIC_DQ accumulator (contiguous float32), in dQ's dtype."""
    off_bh = tl.program_id(axis=1)
    offs_m = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    in_range = offs_m < S
    acc = tl.load(acc_ptr + off_bh.to(tl.int64) * S * D + offsets_of(offs_m, D, D),
                  mask=in_range[:, None], other=0.0)
    tl.store(rows_of(dq_ptr, stride_dqb, stride_dqh, stride_dqs, off_bh // H, off_bh % H,
                     offs_m, D), (acc * sm_scale).to(dq_ptr.dtype.element_ty),
             mask=in_range[:, None])


# The autotuned launchers (the @jit kernels themselves stay plain, for .compile()/.asm()); the
# TMA variant's constexpr joins the tuning key.
# ATOMIC_DQ adds into dq_acc_ptr: the timed launches of tuning must not leave their sums.
_tuned_dkdv = autotuned("dkdv", attention_bwd_dkdv_kernel, key=("TMA", "ATOMIC_DQ"),
                        reset_to_zero=("dq_acc_ptr",))
_tuned_dq = autotuned("dq", attention_bwd_dq_kernel, key=("TMA",))


def attention_backward(q, k, v, o, lse, do, causal: bool = False,
                       sm_scale: float | None = None, dq=None, dk=None, dv=None,
                       atomic_dq: bool = False):
    """Fused attention backward: ``(dq, dk, dv)`` of ``attention_forward(q, k, v, causal,
    sm_scale)`` for the output gradient ``do``.

    Args:
        q, k, v: the forward's (B, H, S, D) inputs (float16, bfloat16 or float32, last dim
            contiguous); o, lse: its outputs (``lse`` the float32 (B, H, S) base-2
            log-sum-exp); do: (B, H, S, D) like q (a last dim that is not contiguous, as the
            gradient of ``o.sum()``, is copied first).
        causal, sm_scale: as given to the forward (sm_scale default ``D ** -0.5``).
        dq, dk, dv: written when given (like q).
        atomic_dq: dQ accumulated by the dK/dV kernel (atomic adds of each step's dS K into
            a float32 buffer; on the TMA path one reduction per tile) instead of a second
            kernel walking K and V again; FlashAttention-2/3's scheme. Not yet the default:
            on an H200 at D = 64 it runs at the two-kernel backward's speed without the
            causal mask and at half of it with it (docs/perf/attention_tma.md).

    Returns:
        ``(dq, dk, dv)``, each (B, H, S, D) in q's dtype.

    Example::

        from tessera.ops import attention_backward, attention_forward
        o, lse2 = attention_forward(q, k, v, causal=True)
        dq, dk, dv = attention_backward(q, k, v, o, lse2, torch.ones_like(o), causal=True)
    """
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
    # The TMA variant (configs.tma_path, the forward's rule for each tensor both kernels read
    # by descriptor) writes its maps in global scratch from the caller's allocator or q's.
    tma = tma_path(q, k, v, do, kernel="bwd", causal=causal)
    with default_allocator(scratch_allocator(q) if tma else None):
        dq_acc = _zeros(q, (B, H, S, D)) if atomic_dq else None
        _tuned_dkdv[(lambda meta: (tessera.cdiv(S, meta["BLOCK_N"]), B * H))](
            q, k, v, do, dk, dv, lse, delta, sm_scale, sm_scale * LOG2E, H, S, *strides,
            *_strides(dk)[:3], *_strides(dv)[:3], D=D, CAUSAL=causal,
            RELOAD=reload_tiles(q), TMA=tma, dq_acc_ptr=dq_acc, ATOMIC_DQ=atomic_dq)
        if atomic_dq:
            attention_bwd_dq_convert_kernel[(tessera.cdiv(S, preprocess_block(D)), B * H)](
                dq_acc, dq, sm_scale, H, S, *_strides(dq)[:3], D=D,
                BLOCK_M=preprocess_block(D), num_warps=4)
            return dq, dk, dv
        _tuned_dq[(lambda meta: (tessera.cdiv(S, meta["BLOCK_M"]), B * H))](
            q, k, v, do, dq, lse, delta, sm_scale, sm_scale * LOG2E, H, S, *strides,
            *_strides(dq)[:3], D=D, CAUSAL=causal, RELOAD=reload_tiles(q), TMA=tma)
    return dq, dk, dv

