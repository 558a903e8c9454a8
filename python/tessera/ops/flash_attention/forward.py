"""The fused-attention forward (FlashAttention-2): O = softmax(Q Kᵀ · sm_scale) V and each
row's base-2 log-sum-exp, without writing the S x S scores to memory.

One program per (BLOCK_M query rows, batch x head) walks the keys and values in blocks of
BLOCK_N with the online softmax (running row max m and sum l, the accumulator rescaled when m
grows), in base 2 with the scale folded in (qk_scale = sm_scale · log2 e): one fused
multiply-add and one ex2 per score. The walk is two loops over one body: the few blocks that
need masks (the one crossing S and, causal, those crossing the diagonal) first, then the
blocks inside S seen whole by every row, with plain loads and no selects.
tutorials/06-fused-attention.py derives it step by step. On sm_90a (configs.tma_path) Q, K
and V come as host tensor descriptors of rank 4 over (B, H, S, D), blocks (1, 1, BLOCK, D):
the pipeliner copies their tiles with the TMA, each head bounded by its own S
(docs/perf/attention_tma.md).
"""
import tessera
import tessera.language as tl

from tessera.tools.tensor_descriptor import TensorDescriptor

from .configs import LOG2E, _check, _empty, _strides, autotuned, reload_tiles, tma_path


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



def head_blocks(nargs) -> None:
    """Sets the blocks of the TMA variant's descriptors to the config's tiles (a config's
    pre_hook, as Triton's tutorial: the host makes the descriptors before a config is
    chosen)."""
    for name, block in (("q_ptr", "BLOCK_M"), ("k_ptr", "BLOCK_N"), ("v_ptr", "BLOCK_N")):
        desc = nargs[name]
        if isinstance(desc, TensorDescriptor):
            desc.block_shape = [1, 1, nargs[block], desc.shape[-1]]


# The @jit kernel stays plain (.asm()); the variants' constexprs join the tuning key.
_tuned_fwd = autotuned("fwd", attention_fwd_kernel, key=("TMA", "SPECIALIZE"),
                       pre_hook=head_blocks)


def head_descriptors(*tensors, block_m: int = 64, block_n: int = 64) -> list:
    """The TMA variant's q, k, v arguments: (B, H, S, D) descriptors of blocks (1, 1, BLOCK_M,
    D) for q and (1, 1, BLOCK_N, D) for k and v (head_blocks resets them per config)."""
    return [TensorDescriptor(t, list(t.shape), list(_strides(t)),
                             [1, 1, block_m if i == 0 else block_n, t.shape[-1]])
            for i, t in enumerate(tensors)]


def attention_forward(q, k, v, causal: bool = False, sm_scale: float | None = None,
                      out=None, lse=None):
    """Fused attention forward: ``(o, lse2)`` of ``softmax(q kᵀ · sm_scale) v``.

    Args:
        q, k, v: (B, H, S, D) arrays of one dtype, float16, bfloat16 or float32 (float32 runs
            the products in tf32), D in (16, 32, 64, 128, 256), last dim contiguous (any
            batch, head and row strides). CUDA torch tensors run on the GPU; NumPy arrays (or
            CPU tensors with ``TESSERA_INTERPRET=1``) run through the interpreter.
        causal: query i sees keys j <= i only.
        sm_scale: the score scale, default ``D ** -0.5``.
        out, lse: written when given (like q, and contiguous float32 (B, H, S)).

    Returns:
        ``o``, (B, H, S, D) in q's dtype, and ``lse2``, float32 (B, H, S): each row's
        log-sum-exp in base 2, ``lse2[b, h, i] = log2 Σ_j 2^(q_i·k_j · sm_scale · log2 e)``
        (the natural-log value is ``lse2 / log2 e``), which the backward takes.

    Example::

        import torch
        from tessera.ops import attention_forward
        q, k, v = (torch.randn(2, 8, 1024, 64, device="cuda", dtype=torch.float16)
                   for _ in range(3))
        o, lse2 = attention_forward(q, k, v, causal=True)
    """
    _check("attention_forward", tuple(q.shape), q=q, k=k, v=v, out=out, lse=lse)
    B, H, S, D = q.shape
    out = _empty(q) if out is None else out
    lse = _empty(q, (B, H, S), fp32=True) if lse is None else lse
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    tma = tma_path(q, k, v)
    # Under knobs.warp_specialize the long unmasked loop asks for the producer warpgroup
    # itself: the compiler specializes one loop per kernel, a loop's own request first.
    specialize = tma and tessera.config.knobs.warp_specialize
    # The TMA path reads q, k, v through host descriptors (their maps encoded once per call).
    inputs = head_descriptors(q, k, v) if tma else (q, k, v)
    _tuned_fwd[(lambda meta: (tessera.cdiv(S, meta["BLOCK_M"]), B * H))](
        *inputs, out, lse, sm_scale * LOG2E, H, S,
        *_strides(q)[:3], *_strides(k)[:3], *_strides(v)[:3], *_strides(out)[:3],
        D=D, CAUSAL=causal, RELOAD=reload_tiles(q), TMA=tma, SPECIALIZE=specialize)
    return out, lse
