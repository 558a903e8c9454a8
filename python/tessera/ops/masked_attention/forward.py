"""The masked-attention forward: O = softmax(Q Kᵀ · sm_scale + bias, where mask) V and each
row's base-2 log-sum-exp, with the flash-attention forward's structure and tiles.

One program per (BLOCK_M query rows, batch x query head) reads its head's lists of live key
128-blocks (blocks.py) and walks them in BLOCK_N steps: first the full blocks (plain key
loads, the bias added, no mask), then the partial ones (the mask tile loaded and applied).
Dead blocks are never loaded. Grouped-query heads: query head h reads key/value head
h // G. Mask and bias are read through strides that are 0 along their broadcast dims.

On sm_90a (flash_attention.configs.tma_path, its "masked_fwd" entry) k and v come as
(B, Hkv, Sk, D) host tensor descriptors read at the listed rows (run-time box coordinates):
the pipeliner copies their tiles with the TMA in each loop that holds no 2-D pointer load (a
per-element mask or bias tile sends its loop back to cp.async; a key bias is read as a 1-D
row there). docs/perf/masked_attention.md, "TMA".

A row may see no key at all (a fully masked row): its running max stays -inf, so the
exponent subtracts 0 instead (m_use), giving p = 0, l = 0; the output is 0 and the stored
log-sum-exp +inf, which makes the backward's P, and so every gradient of that row, 0.
"""
import tessera
import tessera.language as tl

from ..flash_attention.configs import LOG2E, _empty, _strides, reload_tiles, tma_path
from ..flash_attention.forward import head_descriptors, head_tile, load_rows, offsets_of, rows_of
from tessera.tools.tensor_descriptor import TensorDescriptor
from .blocks import (KEYS, ROWS, SUPER, as_bytes, autotuned, block_lists, broadcast_strides,
                     check, layout_of, list_strides)


@tessera.jit
def scores(qk, qk_scale, bias_head, mask_head, rows, cols, Sq, Sk, stride_bm, stride_bn,
           stride_mm, stride_mn, PARTIAL: tl.constexpr, HAS_BIAS: tl.constexpr,
           HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr, keys=None,
           KEY_ROW: tl.constexpr = False):
    """Base-2 scores of a tile of queries `rows` x keys `cols` (either may be the column
    vector: the backward's tiles are transposed): qk · qk_scale (+ bias · log2 e); PARTIAL:
    -inf where the pair is not visible (outside Sq x Sk, masked out or, causal, j > i).

    HAS_BIAS / HAS_MASK: 0 none, ROWS (1) one value per (query, key), KEYS (2) one row of
    keys shared by every query (Sq dim 1: a key bias, a padding mask), read as a 1 x N (or
    N x 1) tile and broadcast in registers instead of re-reading the row for every query.
    A full tile (not PARTIAL) is inside Sq x Sk: its bias is read without bounds.
    KEY_ROW (KEYS bias): the row is read by a 1-D load over `keys` (the tile's keys as a
    vector) and broadcast: a TMA loop may hold 1-D pointer loads beside its descriptor loads,
    a 2-D one (the 1 x N tile) would send it back to cp.async."""
    s = qk * qk_scale
    if HAS_BIAS == KEYS and KEY_ROW:
        if PARTIAL:
            row = tl.load(bias_head + keys * stride_bn, mask=keys < Sk, other=0.0)
        else:
            row = tl.load(bias_head + keys * stride_bn)
        s = s + row[None, :].to(tl.float32) * 1.4426950408889634
    elif HAS_BIAS:
        bias_ptrs = bias_head + cols * stride_bn
        if HAS_BIAS == ROWS:
            bias_ptrs = bias_ptrs + rows * stride_bm
        if PARTIAL:
            if HAS_BIAS == ROWS:
                bias = tl.load(bias_ptrs, mask=(rows < Sq) & (cols < Sk), other=0.0)
            else:
                bias = tl.load(bias_ptrs, mask=cols < Sk, other=0.0)
        else:
            bias = tl.load(bias_ptrs)
        s = s + bias.to(tl.float32) * 1.4426950408889634
    if PARTIAL:
        keep = (rows < Sq) & (cols < Sk)
        if HAS_MASK:
            # Read within the bounds alone, causal or not: a predicate constant along 16-byte
            # runs lets the pipeliner copy the tile with cp.async (j <= i is not).
            mask_ptrs = mask_head + cols * stride_mn
            if HAS_MASK == ROWS:
                mask_ptrs = mask_ptrs + rows * stride_mm
                bits = tl.load(mask_ptrs, mask=keep, other=0)
            else:
                bits = tl.load(mask_ptrs, mask=cols < Sk, other=0)
            keep = keep & (bits != 0)
        if CAUSAL:
            keep = keep & (cols <= rows)
        s = tl.where(keep, s, float("-inf"))
    return s


@tessera.jit
def listed_keys(j, blocks, k_head, v_head, k_offs, v_offs, Sk, stride_ks, stride_vs,
                BLOCK_N: tl.constexpr, SUPER: tl.constexpr, PARTIAL: tl.constexpr,
                TMA: tl.constexpr, off_b, off_kh):
    """(cols, K tile, V tile) of step `j` of a walk over the key 128-blocks listed at
    `blocks`, BLOCK_N keys a step (the forward's and dQ's walks): through the host
    descriptors under TMA (rows past Sk are the TMA's zero fill, never the next head's), else
    pointer loads of the head's rows."""
    start_n = (tl.load(blocks + j // (SUPER // BLOCK_N)) * SUPER
               + (j % (SUPER // BLOCK_N)) * BLOCK_N)
    cols = start_n + tl.arange(0, BLOCK_N)
    if TMA:
        k = head_tile(k_head, off_b, off_kh, start_n)
        v = head_tile(v_head, off_b, off_kh, start_n)
    else:
        k = load_rows(k_head + (k_offs + start_n * stride_ks), cols, Sk, PARTIAL)
        v = load_rows(v_head + (v_offs + start_n * stride_vs), cols, Sk, PARTIAL)
    return cols, k, v


@tessera.jit
def masked_fwd_steps(acc, l_i, m_i, q, q_ptrs, k_head, v_head, k_offs, v_offs, bias_head,
                     mask_head, blocks, count, rows, Sq, Sk, qk_scale, stride_ks, stride_vs,
                     stride_bm, stride_bn, stride_mm, stride_mn, BLOCK_N: tl.constexpr,
                     SUPER: tl.constexpr, PARTIAL: tl.constexpr, HAS_BIAS: tl.constexpr,
                     HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr, RELOAD: tl.constexpr,
                     TMA: tl.constexpr = False, off_b=0, off_kh=0):
    """The online softmax over the `count` key 128-blocks listed at `blocks`, BLOCK_N keys a
    step. Unless PARTIAL, every pair of those blocks is visible and inside Sq x Sk. TMA:
    k_head and v_head are (B, Hkv, Sk, D) host descriptors read at key head (off_b, off_kh)
    and the step's listed row (a run-time box coordinate), k_offs and v_offs unused."""
    for j in range(0, count * (SUPER // BLOCK_N)):
        cols, k, v = listed_keys(j, blocks, k_head, v_head, k_offs, v_offs, Sk, stride_ks,
                                 stride_vs, BLOCK_N, SUPER, PARTIAL, TMA, off_b, off_kh)
        q_step = load_rows(q_ptrs, rows, Sq, True) if RELOAD else q
        qk = tl.dot(q_step, tl.trans(k), input_precision="tf32")
        s = scores(qk, qk_scale, bias_head, mask_head, rows[:, None], cols[None, :], Sq, Sk,
                   stride_bm, stride_bn, stride_mm, stride_mn, PARTIAL, HAS_BIAS, HAS_MASK,
                   CAUSAL, cols, TMA)
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_use = m_new
        if PARTIAL or HAS_BIAS:  # rows that saw no key yet (a full tile without bias sees)
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(k.dtype), v, acc * alpha[:, None], input_precision="tf32")
        m_i = m_new
    return acc, l_i, m_i


@tessera.jit
def attention_masked_fwd_kernel(
        q_ptr, k_ptr, v_ptr, bias_ptr, mask_ptr, o_ptr, lse_ptr, blocks_ptr, counts_ptr,
        qk_scale, H, G, Sq, Sk, NQ, NK, list_b, list_h,
        stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
        stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os,
        stride_bb, stride_bh, stride_bm, stride_bn, stride_mb, stride_mh, stride_mm, stride_mn,
        D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SUPER: tl.constexpr,
        CAUSAL: tl.constexpr, HAS_MASK: tl.constexpr, HAS_BIAS: tl.constexpr,
        RELOAD: tl.constexpr = False, TMA: tl.constexpr = False):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(axis=1)
    off_b, off_h = off_bh // H, off_bh % H
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q_ptrs = rows_of(q_ptr, stride_qb, stride_qh, stride_qs, off_b, off_h, rows, D)
    if TMA:
        # k_ptr, v_ptr are (B, Hkv, Sk, D) host descriptors, blocks (1, 1, BLOCK_N, D): the
        # pipeliner copies the loops' tiles with the TMA at the listed rows (where a loop has
        # no 2-D pointer load beside them: docs/perf/masked_attention.md, "TMA").
        k_head = k_ptr
        v_head = v_ptr
    else:
        k_head = k_ptr + off_b * stride_kb + (off_h // G) * stride_kh
        v_head = v_ptr + off_b * stride_vb + (off_h // G) * stride_vh
    bias_head = bias_ptr + off_b * stride_bb + off_h * stride_bh
    mask_head = mask_ptr + off_b * stride_mb + off_h * stride_mh
    k_offs = offsets_of(tl.arange(0, BLOCK_N), stride_ks, D)
    v_offs = offsets_of(tl.arange(0, BLOCK_N), stride_vs, D)
    entry = (off_b * list_b + off_h * list_h) * NQ + start_m * BLOCK_M // SUPER
    blocks = blocks_ptr + entry * NK
    full = tl.load(counts_ptr + entry * 2)
    partial = tl.load(counts_ptr + entry * 2 + 1)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    q = None if RELOAD else load_rows(q_ptrs, rows, Sq, True)
    acc, l_i, m_i = masked_fwd_steps(
        acc, l_i, m_i, q, q_ptrs, k_head, v_head, k_offs, v_offs, bias_head, mask_head,
        blocks, full, rows, Sq, Sk, qk_scale, stride_ks, stride_vs, stride_bm, stride_bn,
        stride_mm, stride_mn, BLOCK_N, SUPER, False, HAS_BIAS, HAS_MASK, CAUSAL, RELOAD, TMA,
        off_b, off_h // G)
    acc, l_i, m_i = masked_fwd_steps(
        acc, l_i, m_i, q, q_ptrs, k_head, v_head, k_offs, v_offs, bias_head, mask_head,
        blocks + full, partial, rows, Sq, Sk, qk_scale, stride_ks, stride_vs, stride_bm,
        stride_bn, stride_mm, stride_mn, BLOCK_N, SUPER, True, HAS_BIAS, HAS_MASK, CAUSAL,
        RELOAD, TMA, off_b, off_h // G)
    seen = l_i > 0.0
    acc = acc / tl.where(seen, l_i, 1.0)[:, None]
    o_ptrs = rows_of(o_ptr, stride_ob, stride_oh, stride_os, off_b, off_h, rows, D)
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=rows[:, None] < Sq)
    lse = tl.where(seen, m_i + tl.log2(tl.where(seen, l_i, 1.0)), float("inf"))
    tl.store(lse_ptr + off_bh * Sq + rows, lse, mask=rows < Sq)


def key_blocks(nargs) -> None:
    """Sets the blocks of the TMA variant's k and v descriptors to the config's BLOCK_N (a
    config's pre_hook: the host makes the descriptors before a config is chosen)."""
    for name in ("k_ptr", "v_ptr"):
        desc = nargs[name]
        if isinstance(desc, TensorDescriptor):
            desc.block_shape = [1, 1, nargs["BLOCK_N"], desc.shape[-1]]


# TMA joins the tuning key: each path keeps its own best config.
_tuned_fwd = autotuned("fwd", attention_masked_fwd_kernel, keys=("TMA",), pre_hook=key_blocks)


def prepare(q, k, mask, bias, causal: bool, backward: bool = False) -> tuple:
    """The launch arguments shared by the masked kernels: (mask, bias, lists, NQ, NK,
    list_b, list_h, bias strides, mask strides); lists = (blocks, counts) per query block,
    backward: then (blocks, counts) per key block too; absent inputs become q, 0 strides."""
    lists = block_lists(mask, tuple(q.shape), k.shape[2], causal, backward, like=q)
    NQ, NK = tessera.cdiv(q.shape[2], SUPER), tessera.cdiv(k.shape[2], SUPER)
    mask_arg = q if mask is None else as_bytes(mask)
    bias_arg = q if bias is None else bias
    return (mask_arg, bias_arg, lists, NQ, NK, *list_strides(mask, q.shape[1]),
            (0,) * 4 if bias is None else broadcast_strides(bias),
            (0,) * 4 if mask is None else broadcast_strides(mask))


def attention_masked_forward(q, k, v, mask=None, bias=None, causal: bool = False,
                             sm_scale: float | None = None, out=None, lse=None):
    """Masked attention forward: ``(o, lse2)`` of ``softmax(q kᵀ · sm_scale + bias) v`` over
    the keys where ``mask`` is true (and, causal, j <= i).

    Args:
        q: (B, Hq, Sq, D); k, v: (B, Hkv, Sk, D) with Hkv dividing Hq (grouped-query heads);
            one dtype, float16, bfloat16 or float32 (products in tf32), last dim contiguous.
            CUDA torch tensors run on the GPU, NumPy arrays (or CPU tensors with
            ``TESSERA_INTERPRET=1``) through the interpreter.
        mask: bool (B|1, Hq|1, Sq|1, Sk) or None; size-1 dims broadcast, never copied.
        bias: float16/bfloat16/float32 (B|1, Hq|1, Sq|1, Sk) or None, added to the scaled
            scores (natural-log units, like SDPA's float mask).
        causal: also hide keys j > i (top-left aligned, as SDPA's ``is_causal``).
        sm_scale: the score scale, default ``D ** -0.5``.
        out, lse: written when given (like q; contiguous float32 (B, Hq, Sq)).

    Returns:
        ``o`` (B, Hq, Sq, D) in q's dtype, 0 in rows that see no key, and ``lse2`` float32
        (B, Hq, Sq), the base-2 log-sum-exp of each row's scores (+inf where none is seen).

    Example::

        import torch
        from tessera.ops import attention_masked_forward
        q, k, v = (torch.randn(1, 8, 4096, 64, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        doc = torch.arange(4096, device="cuda") // 1024          # four documents
        mask = (doc[:, None] == doc[None, :])[None, None]         # (1, 1, S, S)
        o, lse2 = attention_masked_forward(q, k, v, mask=mask, causal=True)
    """
    check("attention_masked_forward", q, k, v, mask, bias)
    B, H, Sq, D = q.shape
    out = _empty(q) if out is None else out
    lse = _empty(q, (B, H, Sq), fp32=True) if lse is None else lse
    grid, args, kwargs = forward_launch(q, k, v, mask, bias, causal, sm_scale, out, lse)
    _tuned_fwd[grid](*args, **kwargs)
    return out, lse


def forward_launch(q, k, v, mask, bias, causal, sm_scale, out, lse) -> tuple:
    """(grid, args, kwargs) of the autotuned forward kernel for these inputs and outputs, as
    attention_masked_forward launches it (``_tuned_fwd.report(*args, grid=grid, **kwargs)``
    reports the config the autotuner picks)."""
    B, H, Sq, D = q.shape
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    mask_arg, bias_arg, lists, NQ, NK, list_b, list_h, bs, ms = prepare(
        q, k, mask, bias, causal)
    # sm_90a (the dense forward's rule and knob, TESSERA_ATTENTION_TMA, its "masked_fwd"
    # entry): k and v as (B, Hkv, Sk, D) host descriptors, their maps encoded once per call.
    # Not with a per-element bias: its 2-D tile in both loops keeps them on cp.async, and
    # descriptor arguments would cost the maps' encoding and the Python launch for nothing.
    tma = layout_of(bias) != ROWS.value and tma_path(k, v, kernel="masked_fwd")
    keys, values = head_descriptors(k, v) if tma else (k, v)
    args = (q, keys, values, bias_arg, mask_arg, out, lse, *lists, sm_scale * LOG2E, H,
            H // k.shape[1], Sq, k.shape[2], NQ, NK, list_b, list_h, *_strides(q)[:3],
            *_strides(k)[:3], *_strides(v)[:3], *_strides(out)[:3], *bs, *ms)
    kwargs = dict(D=D, SUPER=SUPER, CAUSAL=causal, HAS_MASK=layout_of(mask),
                  HAS_BIAS=layout_of(bias), RELOAD=reload_tiles(q), TMA=tma)
    return (lambda meta: (tessera.cdiv(Sq, meta["BLOCK_M"]), B * H)), args, kwargs
