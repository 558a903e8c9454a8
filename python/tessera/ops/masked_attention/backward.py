"""The masked-attention backward: dQ, dK, dV and dBias, the flash-attention backward's three
kernels walking the live-block lists of blocks.py instead of every block.

With S = Q Kᵀ · sm_scale + bias (−inf where masked), P = softmax(S), O = P V:

    dV = Pᵀ dO    dP = dO Vᵀ    dS = P ⊙ (dP − Δ)
    dQ = dS K · sm_scale    dK = dSᵀ Q · sm_scale
    dBias = dS summed over the dims along which bias broadcasts

1. Δ = rowsum(dO ⊙ O): the dense backward's preprocess kernel.
2. attention_masked_bwd_dkdv_kernel: one program per BLOCK_N keys of a key/value head walks,
   for each of the G query heads sharing it, that head's live query 128-blocks (full, then
   partial) on transposed tiles. dBias: a bias with all Sq rows gets each dSᵀ tile added
   atomically (heads and batches that share a bias row add into it); a bias broadcast over
   rows gets each program's column sums, added once per query head.
3. attention_masked_bwd_dq_kernel: one program per BLOCK_M queries walks the live key blocks,
   as the forward; on sm_90a (TMA, the forward's rule: docs/perf/masked_attention.md "TMA")
   its K and V come from (B, Hkv, Sk, D) host descriptors at the listed rows.

A fully masked row has o = 0 (so Δ = 0) and lse = +inf (so P = 0): all its gradients are 0.
"""
import numpy as np

import tessera
import tessera.language as tl

from ..flash_attention.backward import attention_bwd_preprocess_kernel
from ..flash_attention.configs import (LOG2E, _empty, _last_dim_contiguous, _strides,
                                       preprocess_block, reload_tiles, tma_path)
from ..flash_attention.forward import head_descriptors, load_rows, offsets_of, rows_of
from .blocks import ROWS, SUPER, autotuned, check, layout_of
from .forward import key_blocks, listed_keys, prepare, scores


@tessera.jit
def masked_dkdv_steps(dk, dv, dbias_cols, k, v, k_ptrs, v_ptrs, q_head, do_head, q_offs,
                      do_offs, lse_head, delta_head, bias_head, mask_head, dbias_head, blocks,
                      count, cols, Sq, Sk, qk_scale, stride_qs, stride_dos, stride_bm,
                      stride_bn, stride_mm, stride_mn, stride_dbm, stride_dbn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SUPER: tl.constexpr,
                      PARTIAL: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr,
                      CAUSAL: tl.constexpr, DBIAS: tl.constexpr, RELOAD: tl.constexpr):
    """dK, dV (and dBias: DBIAS 1 per element, 2 per column) from the `count` query
    128-blocks listed at `blocks`, BLOCK_M queries a step; keys `cols` are this program's."""
    inv_scale = 1.0 / qk_scale
    for j in range(0, count * (SUPER // BLOCK_M)):
        start_m = (tl.load(blocks + j // (SUPER // BLOCK_M)) * SUPER
                   + (j % (SUPER // BLOCK_M)) * BLOCK_M)
        rows = start_m + tl.arange(0, BLOCK_M)
        k_step = load_rows(k_ptrs, cols, Sk, True) if RELOAD else k
        v_step = load_rows(v_ptrs, cols, Sk, True) if RELOAD else v
        q = load_rows(q_head + (q_offs + start_m * stride_qs), rows, Sq, PARTIAL)
        do = load_rows(do_head + (do_offs + start_m * stride_dos), rows, Sq, PARTIAL)
        if PARTIAL:  # lse = +inf past Sq gives P = 0 there
            lse = tl.load(lse_head + rows, mask=rows < Sq, other=float("inf"))
            delta = tl.load(delta_head + rows, mask=rows < Sq, other=0.0)
        else:
            lse = tl.load(lse_head + rows)
            delta = tl.load(delta_head + rows)
        shifted_qk_t = tl.dot(k_step, tl.trans(q), tl.broadcast_to(
            (lse * -inv_scale)[None, :], (BLOCK_N, BLOCK_M)), input_precision="tf32")
        dp_t = tl.dot(v_step, tl.trans(do), tl.broadcast_to(
            -delta[None, :], (BLOCK_N, BLOCK_M)), input_precision="tf32")
        p_t = tl.exp2(scores(shifted_qk_t, qk_scale, bias_head, mask_head, rows[None, :],
                             cols[:, None], Sq, Sk, stride_bm, stride_bn, stride_mm,
                             stride_mn, PARTIAL, HAS_BIAS, HAS_MASK, CAUSAL))
        dv = tl.dot(p_t.to(q.dtype), do, dv, input_precision="tf32")
        ds_t = p_t * dp_t
        dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision="tf32")
        if DBIAS == 1:
            tl.atomic_add(dbias_head + rows[None, :] * stride_dbm + cols[:, None] * stride_dbn,
                          ds_t, mask=(rows[None, :] < Sq) & (cols[:, None] < Sk),
                          sem="relaxed")
        if DBIAS == 2:
            dbias_cols += tl.sum(ds_t, axis=1)
    return dk, dv, dbias_cols


@tessera.jit
def attention_masked_bwd_dkdv_kernel(
        q_ptr, k_ptr, v_ptr, do_ptr, dk_ptr, dv_ptr, lse_ptr, delta_ptr, bias_ptr, mask_ptr,
        dbias_ptr, blocks_ptr, counts_ptr, sm_scale, qk_scale, H, G, Sq, Sk, NQ, NK, list_b,
        list_h, stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
        stride_vb, stride_vh, stride_vs, stride_dob, stride_doh, stride_dos,
        stride_dkb, stride_dkh, stride_dks, stride_dvb, stride_dvh, stride_dvs,
        stride_bb, stride_bh, stride_bm, stride_bn, stride_mb, stride_mh, stride_mm, stride_mn,
        stride_dbb, stride_dbh, stride_dbm, stride_dbn,
        D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SUPER: tl.constexpr,
        CAUSAL: tl.constexpr, HAS_MASK: tl.constexpr, HAS_BIAS: tl.constexpr,
        DBIAS: tl.constexpr, RELOAD: tl.constexpr = False):
    start_n = tl.program_id(0)
    off_bk = tl.program_id(axis=1)  # batch x key/value head
    Hkv = H // G
    off_b, off_hk = off_bk // Hkv, off_bk % Hkv
    cols = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_ptrs = rows_of(k_ptr, stride_kb, stride_kh, stride_ks, off_b, off_hk, cols, D)
    v_ptrs = rows_of(v_ptr, stride_vb, stride_vh, stride_vs, off_b, off_hk, cols, D)
    q_offs = offsets_of(tl.arange(0, BLOCK_M), stride_qs, D)
    do_offs = offsets_of(tl.arange(0, BLOCK_M), stride_dos, D)
    k = None if RELOAD else load_rows(k_ptrs, cols, Sk, True)
    v = None if RELOAD else load_rows(v_ptrs, cols, Sk, True)
    dk = tl.zeros((BLOCK_N, D), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, D), dtype=tl.float32)
    for g in range(0, G):  # the query heads that share this key/value head
        off_h = off_hk * G + g
        q_head = q_ptr + off_b * stride_qb + off_h * stride_qh
        do_head = do_ptr + off_b * stride_dob + off_h * stride_doh
        lse_head = lse_ptr + (off_b * H + off_h) * Sq
        delta_head = delta_ptr + (off_b * H + off_h) * Sq
        bias_head = bias_ptr + off_b * stride_bb + off_h * stride_bh
        mask_head = mask_ptr + off_b * stride_mb + off_h * stride_mh
        dbias_head = dbias_ptr + off_b * stride_dbb + off_h * stride_dbh
        entry = (off_b * list_b + off_h * list_h) * NK + start_n * BLOCK_N // SUPER
        full = tl.load(counts_ptr + entry * 2)
        partial = tl.load(counts_ptr + entry * 2 + 1)
        dbias_cols = tl.zeros((BLOCK_N,), dtype=tl.float32)
        dk, dv, dbias_cols = masked_dkdv_steps(
            dk, dv, dbias_cols, k, v, k_ptrs, v_ptrs, q_head, do_head, q_offs, do_offs,
            lse_head, delta_head, bias_head, mask_head, dbias_head, blocks_ptr + entry * NQ,
            full, cols, Sq, Sk, qk_scale, stride_qs, stride_dos, stride_bm, stride_bn,
            stride_mm, stride_mn, stride_dbm, stride_dbn, BLOCK_M, BLOCK_N, SUPER, False,
            HAS_BIAS, HAS_MASK, CAUSAL, DBIAS, RELOAD)
        dk, dv, dbias_cols = masked_dkdv_steps(
            dk, dv, dbias_cols, k, v, k_ptrs, v_ptrs, q_head, do_head, q_offs, do_offs,
            lse_head, delta_head, bias_head, mask_head, dbias_head,
            blocks_ptr + entry * NQ + full, partial, cols, Sq, Sk, qk_scale, stride_qs,
            stride_dos, stride_bm, stride_bn, stride_mm, stride_mn, stride_dbm, stride_dbn,
            BLOCK_M, BLOCK_N, SUPER, True, HAS_BIAS, HAS_MASK, CAUSAL, DBIAS, RELOAD)
        if DBIAS == 2:
            tl.atomic_add(dbias_head + cols * stride_dbn, dbias_cols, mask=cols < Sk,
                          sem="relaxed")
    dk = dk * sm_scale
    tl.store(rows_of(dk_ptr, stride_dkb, stride_dkh, stride_dks, off_b, off_hk, cols, D),
             dk.to(dk_ptr.dtype.element_ty), mask=cols[:, None] < Sk)
    tl.store(rows_of(dv_ptr, stride_dvb, stride_dvh, stride_dvs, off_b, off_hk, cols, D),
             dv.to(dv_ptr.dtype.element_ty), mask=cols[:, None] < Sk)


@tessera.jit
def masked_dq_steps(dq, q, do, q_ptrs, do_ptrs, k_head, v_head, k_offs, v_offs, bias_head,
                    mask_head, lse, delta, blocks, count, rows, Sq, Sk, qk_scale, stride_ks,
                    stride_vs, stride_bm, stride_bn, stride_mm, stride_mn,
                    BLOCK_N: tl.constexpr, SUPER: tl.constexpr, PARTIAL: tl.constexpr,
                    HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr,
                    RELOAD: tl.constexpr, TMA: tl.constexpr = False, off_b=0, off_kh=0):
    """dQ from the `count` key 128-blocks listed at `blocks`, as masked_fwd_steps walks them
    (TMA: K and V as there, through the host descriptors k_head and v_head)."""
    for j in range(0, count * (SUPER // BLOCK_N)):
        cols, k, v = listed_keys(j, blocks, k_head, v_head, k_offs, v_offs, Sk, stride_ks,
                                 stride_vs, BLOCK_N, SUPER, PARTIAL, TMA, off_b, off_kh)
        q_step = load_rows(q_ptrs, rows, Sq, True) if RELOAD else q
        do_step = load_rows(do_ptrs, rows, Sq, True) if RELOAD else do
        qk = tl.dot(q_step, tl.trans(k), input_precision="tf32")
        dp = tl.dot(do_step, tl.trans(v), input_precision="tf32")
        s = scores(qk, qk_scale, bias_head, mask_head, rows[:, None], cols[None, :], Sq, Sk,
                   stride_bm, stride_bn, stride_mm, stride_mn, PARTIAL, HAS_BIAS, HAS_MASK,
                   CAUSAL, cols, TMA)
        p = tl.exp2(s - lse[:, None])
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision="tf32")
    return dq


@tessera.jit
def attention_masked_bwd_dq_kernel(
        q_ptr, k_ptr, v_ptr, do_ptr, dq_ptr, lse_ptr, delta_ptr, bias_ptr, mask_ptr,
        blocks_ptr, counts_ptr, sm_scale, qk_scale, H, G, Sq, Sk, NQ, NK, list_b, list_h,
        stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
        stride_vb, stride_vh, stride_vs, stride_dob, stride_doh, stride_dos,
        stride_dqb, stride_dqh, stride_dqs,
        stride_bb, stride_bh, stride_bm, stride_bn, stride_mb, stride_mh, stride_mm, stride_mn,
        D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SUPER: tl.constexpr,
        CAUSAL: tl.constexpr, HAS_MASK: tl.constexpr, HAS_BIAS: tl.constexpr,
        RELOAD: tl.constexpr = False, TMA: tl.constexpr = False):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(axis=1)
    off_b, off_h = off_bh // H, off_bh % H
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q_ptrs = rows_of(q_ptr, stride_qb, stride_qh, stride_qs, off_b, off_h, rows, D)
    do_ptrs = rows_of(do_ptr, stride_dob, stride_doh, stride_dos, off_b, off_h, rows, D)
    if TMA:  # (B, Hkv, Sk, D) host descriptors, blocks (1, 1, BLOCK_N, D): as the forward's
        k_head = k_ptr
        v_head = v_ptr
    else:
        k_head = k_ptr + off_b * stride_kb + (off_h // G) * stride_kh
        v_head = v_ptr + off_b * stride_vb + (off_h // G) * stride_vh
    bias_head = bias_ptr + off_b * stride_bb + off_h * stride_bh
    mask_head = mask_ptr + off_b * stride_mb + off_h * stride_mh
    k_offs = offsets_of(tl.arange(0, BLOCK_N), stride_ks, D)
    v_offs = offsets_of(tl.arange(0, BLOCK_N), stride_vs, D)
    lse = tl.load(lse_ptr + off_bh * Sq + rows, mask=rows < Sq, other=float("inf"))
    delta = tl.load(delta_ptr + off_bh * Sq + rows, mask=rows < Sq, other=0.0)
    entry = (off_b * list_b + off_h * list_h) * NQ + start_m * BLOCK_M // SUPER
    blocks = blocks_ptr + entry * NK
    full = tl.load(counts_ptr + entry * 2)
    partial = tl.load(counts_ptr + entry * 2 + 1)
    q = None if RELOAD else load_rows(q_ptrs, rows, Sq, True)
    do = None if RELOAD else load_rows(do_ptrs, rows, Sq, True)
    dq = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    dq = masked_dq_steps(
        dq, q, do, q_ptrs, do_ptrs, k_head, v_head, k_offs, v_offs, bias_head, mask_head, lse,
        delta, blocks, full, rows, Sq, Sk, qk_scale, stride_ks, stride_vs, stride_bm,
        stride_bn, stride_mm, stride_mn, BLOCK_N, SUPER, False, HAS_BIAS, HAS_MASK, CAUSAL,
        RELOAD, TMA, off_b, off_h // G)
    dq = masked_dq_steps(
        dq, q, do, q_ptrs, do_ptrs, k_head, v_head, k_offs, v_offs, bias_head, mask_head, lse,
        delta, blocks + full, partial, rows, Sq, Sk, qk_scale, stride_ks, stride_vs,
        stride_bm, stride_bn, stride_mm, stride_mn, BLOCK_N, SUPER, True, HAS_BIAS, HAS_MASK,
        CAUSAL, RELOAD, TMA, off_b, off_h // G)
    dq = dq * sm_scale
    tl.store(rows_of(dq_ptr, stride_dqb, stride_dqh, stride_dqs, off_b, off_h, rows, D),
             dq.to(dq_ptr.dtype.element_ty), mask=rows[:, None] < Sq)


_tuned_dkdv = autotuned("dkdv", attention_masked_bwd_dkdv_kernel, reset=["dbias_ptr"],
                        keys=["DBIAS"])
_tuned_dq = autotuned("dq", attention_masked_bwd_dq_kernel, keys=["TMA"], pre_hook=key_blocks)


def _zeros_fp32(like, shape):
    out = _empty(like, shape, fp32=True)
    out[...] = 0
    return out


def attention_masked_backward(q, k, v, o, lse, do, mask=None, bias=None, causal: bool = False,
                              sm_scale: float | None = None, bias_grad: bool = False):
    """Masked attention backward: ``(dq, dk, dv, dbias)`` of ``attention_masked_forward(q, k,
    v, mask, bias, causal, sm_scale)`` for the output gradient ``do``.

    Args:
        q, k, v, mask, bias, causal, sm_scale: as given to the forward (float16, bfloat16 or
            float32 inputs); o, lse: its outputs.
        do: (B, Hq, Sq, D) like q (a last dim that is not contiguous is copied first).
        bias_grad: also compute dbias (else it is None).

    Returns:
        ``dq`` like q, ``dk``, ``dv`` like k (summed over the query heads sharing each key
        head), ``dbias`` of bias's shape and dtype (summed over its broadcast dims) or None.

    Example::

        o, lse2 = attention_masked_forward(q, k, v, mask=mask, bias=bias)
        dq, dk, dv, dbias = attention_masked_backward(q, k, v, o, lse2, torch.ones_like(o),
                                                      mask=mask, bias=bias, bias_grad=True)
    """
    do = _last_dim_contiguous(do)
    check("attention_masked_backward", q, k, v, mask, bias)
    B, H, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    dq, dk, dv = _empty(q), _empty(k), _empty(v)
    delta = _empty(q, (B, H, Sq), fp32=True)
    attention_bwd_preprocess_kernel[(tessera.cdiv(Sq, preprocess_block(D)), B * H)](
        o, do, delta, H, Sq, *_strides(o)[:3], *_strides(do)[:3], D=D,
        BLOCK_M=preprocess_block(D), num_warps=4)
    dbias_mode = 0 if not (bias_grad and bias is not None) else (1 if bias.shape[2] > 1 else 2)
    dbias = _zeros_fp32(q, tuple(bias.shape)) if dbias_mode else _empty(q, (1,), fp32=True)
    dbias_strides = tuple(0 if n == 1 else s for n, s in zip(dbias.shape, _strides(dbias))) \
        if dbias_mode else (0,) * 4
    mask_arg, bias_arg, lists, NQ, NK, list_b, list_h, bs, ms = prepare(
        q, k, mask, bias, causal, backward=True)
    strides = (*_strides(q)[:3], *_strides(k)[:3], *_strides(v)[:3], *_strides(do)[:3])
    flags = dict(D=D, SUPER=SUPER, CAUSAL=causal, HAS_MASK=layout_of(mask),
                 HAS_BIAS=layout_of(bias), RELOAD=reload_tiles(q))
    _tuned_dkdv[(lambda meta: (tessera.cdiv(Sk, meta["BLOCK_N"]), B * Hkv))](
        q, k, v, do, dk, dv, lse, delta, bias_arg, mask_arg, dbias, *lists[2:], sm_scale,
        sm_scale * LOG2E, H, H // Hkv, Sq, Sk, NQ, NK, list_b, list_h, *strides,
        *_strides(dk)[:3], *_strides(dv)[:3], *bs, *ms, *dbias_strides, DBIAS=dbias_mode,
        **flags)
    # dQ's K and V by the TMA under the forward's rule (masked_fwd.forward_launch), its own
    # entry "masked_dq" of TMA_FASTER_HEAD_DIMS.
    tma = layout_of(bias) != ROWS.value and tma_path(k, v, kernel="masked_dq")
    keys, values = head_descriptors(k, v) if tma else (k, v)
    _tuned_dq[(lambda meta: (tessera.cdiv(Sq, meta["BLOCK_M"]), B * H))](
        q, keys, values, do, dq, lse, delta, bias_arg, mask_arg, *lists[:2], sm_scale,
        sm_scale * LOG2E, H, H // Hkv, Sq, Sk, NQ, NK, list_b, list_h, *strides,
        *_strides(dq)[:3], *bs, *ms, TMA=tma, **flags)
    if not dbias_mode:
        return dq, dk, dv, None
    return dq, dk, dv, (dbias.astype(bias.dtype) if isinstance(dbias, np.ndarray)
                        else dbias.to(bias.dtype))
