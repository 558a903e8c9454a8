"""The byte and FLOP model of masked attention, for ``tessera.report`` and the benchmarks,
and ``report_cases`` (``python -m tessera.report tessera.ops.masked_attention.model``).

Bytes are the compulsory DRAM traffic: every input read once and every output written once
(K and V are re-read per query block, but from L2), plus the mask bytes of the partial
128-blocks and the bias bytes of the live ones (a broadcast bias at most its own size).
FLOPs count the tensor-core products over the visited 128-blocks only: 2 · Sq' · Sk' · D
per product, 2 products forward, 5 backward (S and dP recomputed, dV, dK, dQ).
"""
from __future__ import annotations

import numpy as np

from .blocks import KEYS, SUPER, launch_options, masked_candidates


def _count(table) -> tuple:
    table = np.asarray(table.cpu() if hasattr(table, "cpu") else table)
    return int((table > 0).sum()), int((table == 1).sum())


def model(q, k, table, mask=None, bias=None, backward: bool = False) -> tuple:
    """(bytes, flops) of the forward (or backward) for inputs like q (B, Hq, Sq, D), k (B,
    Hkv, Sk, D), and the live-block table of blocks.block_table (per mask head)."""
    B, H, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    item = q.element_size() if hasattr(q, "element_size") else q.itemsize
    live, partial = _count(table)
    heads = B * H // table.shape[0]  # (b, h) pairs sharing each table (broadcast mask)
    pairs = live * heads * SUPER * SUPER
    tiles = (B * H * Sq * D, 2 * B * Hkv * Sk * D)  # q (and o), k + v
    moved = (2 * tiles[0] + tiles[1]) * item + B * H * Sq * 4
    if backward:  # reads q, k, v, o, do, lse; writes dq, dk, dv (+ delta written and read)
        moved = (4 * tiles[0] + 2 * tiles[1]) * item + 3 * B * H * Sq * 4
    if mask is not None:
        moved += min(partial * heads * SUPER * SUPER, B * H * Sq * Sk)
    if bias is not None:
        size = int(np.prod(bias.shape)) * (bias.element_size() if hasattr(bias, "element_size")
                                           else bias.itemsize)
        moved += min(size, pairs * (bias.element_size() if hasattr(bias, "element_size")
                                    else bias.itemsize))
    products = 5 if backward else 2
    return float(moved), float(products * 2 * pairs * D)


def report_cases(S: int = 4096, D: int = 128, live: float = 0.5, heads: int = 8):
    """The three masked-attention kernels for a block-sparse mask with `live` of the 128-blocks
    live and a per-head row bias, as ``tessera.report`` cases (NumPy inputs: static part)."""
    from tessera.report import case
    from .backward import attention_masked_bwd_dkdv_kernel, attention_masked_bwd_dq_kernel
    from .blocks import block_table
    from .forward import attention_masked_fwd_kernel, prepare
    from ..flash_attention.configs import LOG2E
    import tessera
    rng = np.random.default_rng(0)
    q = np.zeros((1, heads, S, D), np.float16)
    lse = np.zeros(q.shape[:3], np.float32)
    n = S // SUPER
    blocks = rng.random((n, n)) < live
    mask = np.repeat(np.repeat(blocks, SUPER, 0), SUPER, 1)[None, None]
    bias = np.zeros((1, heads, 1, S), np.float16)
    with tessera.config.knobs.scope(interpret=True):
        mask_arg, bias_arg, lists, NQ, NK, lb, lh, bs, ms = prepare(q, q, mask, bias, False,
                                                                  backward=True)
        table = block_table(mask, q.shape, S, False)
    st = tuple(s // 2 for s in q.strides[:3])
    common = (heads, 1, S, S, NQ, NK, lb, lh)
    flags = dict(D=D, SUPER=SUPER, CAUSAL=False, HAS_MASK=True, HAS_BIAS=KEYS.value,
                 RELOAD=False)
    from tessera.report import static_arch
    arch = static_arch.get() or "sm_90a"
    tiles = {name: launch_options(masked_candidates(name, q, arch)[0])
             for name in ("fwd", "dkdv", "dq")}
    fwd = model(q, q, table, mask, bias)
    bwd = model(q, q, table, mask, bias, backward=True)
    dbias = np.zeros(bias.shape, np.float32)
    return [
        case(attention_masked_fwd_kernel, q, q, q, bias_arg, mask_arg, q, lse, *lists[:2],
             0.1 * LOG2E, *common, *st * 4, *bs, *ms,
             grid=(S // tiles["fwd"]["BLOCK_M"], heads), bytes=fwd[0], flops=fwd[1],
             **tiles["fwd"], **flags),
        case(attention_masked_bwd_dkdv_kernel, q, q, q, q, q, q, lse, lse, bias_arg, mask_arg,
             dbias, *lists[2:], 0.1, 0.1 * LOG2E, *common, *st * 6, *bs, *ms, 0, 0, 0, 1,
             grid=(S // tiles["dkdv"]["BLOCK_N"], heads), bytes=bwd[0] * 0.6,
             flops=bwd[1] * 0.8, DBIAS=2, **tiles["dkdv"], **flags),  # 4 of the 5 products
        case(attention_masked_bwd_dq_kernel, q, q, q, q, q, lse, lse, bias_arg, mask_arg,
             *lists[:2], 0.1, 0.1 * LOG2E, *common, *st * 5, *bs, *ms,
             grid=(S // tiles["dq"]["BLOCK_M"], heads), bytes=bwd[0] * 0.4, flops=bwd[1] * 0.6,
             **tiles["dq"], **flags),  # 3 of the 5 products
    ]
