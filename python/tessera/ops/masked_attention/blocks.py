"""Which blocks of a masked attention are worth visiting: the live-block table and its lists,
plus the host helpers of the masked kernels (argument checks, broadcast strides, autotuning).

The mask is known only at run time, so a first small kernel (`mask_blocks_kernel`, one program
per tile) reads it once and classes every SUPER x SUPER tile (SUPER = 128 query rows x 128 keys,
FlexAttention's block size) as dead (no visible pair: skipped), partial (some: the kernels load
the mask tile and select) or full (every pair visible and inside Sq x Sk: no mask load, no
select). Causal and the sequence ends enter the same table. The host then sorts each row of the
table into a list of block indices, full ones first, then partial ones, and counts them. The
attention kernels walk only those lists: a loop whose trip count is the number of live blocks
and whose body is the same as the dense one (so it pipelines as the dense kernel does), instead
of a test inside the loop before the loads. The table is 128-granular whatever the kernel's
tiles (all of them divide 128), so one table serves every autotuned config; a kernel with
smaller tiles visits a live 128-tile whole (its own sub-tiles masked by the element-level mask).
"""
from __future__ import annotations

import numpy as np

import tessera
import tessera.language as tl

from ..flash_attention.configs import (CONFIGS, WGMMA_CONFIGS, _arch, _is_fp32,
                                       _strides, candidates)

SUPER = 128  # query rows and keys per entry of the live-block table
# The kernels' HAS_MASK / HAS_BIAS: 0 (none), ROWS (a value per query and key) or KEYS (one row
# of keys shared by every query: Sq dim 1, read once per key tile and broadcast in registers).
ROWS = tl.constexpr(1)
KEYS = tl.constexpr(2)
_FLOATS = ("float16", "bfloat16", "float32")


@tessera.jit
def mask_blocks_kernel(mask_ptr, table_ptr, Hm, Sq, Sk, NQ, NK, stride_mb, stride_mh,
                       stride_mm, stride_mn, HAS_MASK: tl.constexpr, CAUSAL: tl.constexpr,
                       SUPER: tl.constexpr, CHUNK: tl.constexpr):
    """table[l, qb, kb] = 0 (no visible pair), 1 (some) or 2 (all, and inside Sq x Sk) for the
    SUPER x SUPER tile (qb, kb) of mask head l = b * Hm + h, one program per tile (many small
    programs: the mask, S² bytes, is read at full bandwidth); CHUNK rows are read at a time."""
    qb = tl.program_id(0)
    kb = tl.program_id(1)
    head = tl.program_id(2)
    base = mask_ptr + (head // Hm) * stride_mb + (head % Hm) * stride_mh
    cols = kb * SUPER + tl.arange(0, SUPER)
    live = 0
    for r in range(0, SUPER, CHUNK):
        rows = qb * SUPER + r + tl.arange(0, CHUNK)
        keep = (rows[:, None] < Sq) & (cols[None, :] < Sk)
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        if HAS_MASK:
            bits = tl.load(base + rows[:, None] * stride_mm + cols[None, :] * stride_mn,
                           mask=keep, other=0)
            keep = keep & (bits != 0)
        live += tl.sum(keep.to(tl.int32))
    kind = tl.where(live == 0, 0, tl.where(live == SUPER * SUPER, 2, 1))
    tl.store(table_ptr + (head * NQ + qb) * NK + kb, kind.to(tl.int32))


def _lists(table):
    """(indices, counts) of a (L, N, M) table: per row, the M indices ordered full, partial,
    dead (each ascending), int32; counts (L, N, 2) = (full, partial)."""
    if isinstance(table, np.ndarray):
        order = np.argsort(-table, axis=-1, kind="stable").astype(np.int32)
        counts = np.stack([(table == 2).sum(-1), (table == 1).sum(-1)], -1).astype(np.int32)
        return np.ascontiguousarray(order), np.ascontiguousarray(counts)
    import torch
    order = torch.sort(table, dim=-1, descending=True, stable=True).indices.to(torch.int32)
    counts = torch.stack([(table == 2).sum(-1), (table == 1).sum(-1)], -1).to(torch.int32)
    return order.contiguous(), counts.contiguous()


def _transpose(table):
    if isinstance(table, np.ndarray):
        return np.ascontiguousarray(np.swapaxes(table, -1, -2))
    return table.transpose(-1, -2).contiguous()


def as_bytes(mask):
    """A bool mask viewed as uint8 (no copy), the element type the kernels load."""
    if isinstance(mask, np.ndarray):
        return mask.view(np.uint8)
    import torch
    return mask.view(torch.uint8)


def broadcast_strides(x) -> tuple:
    """x's (batch, head, row, column) strides with 0 for each size-1 (broadcast) dim."""
    return tuple(0 if n == 1 else s for n, s in zip(x.shape, _strides(x)))


def block_table(mask, q_shape, Sk: int, causal: bool, like=None):
    """The (Lm, NQ, NK) int32 live-block table of `mask` (None: causal and bounds only), Lm =
    the mask's batch x heads (1 x 1 when it broadcasts, or there is none). The table lives
    where `mask` does, or without a mask where `like` (the query) does: a CUDA query's table
    is built by a GPU launch, which cannot write host memory."""
    Sq = q_shape[2]
    NQ, NK = tessera.cdiv(Sq, SUPER), tessera.cdiv(Sk, SUPER)
    Bm, Hm = (1, 1) if mask is None else tuple(mask.shape[:2])
    like = mask if mask is not None else like
    if like is None or isinstance(like, np.ndarray):
        table = np.empty((Bm * Hm, NQ, NK), np.int32)
    else:
        import torch
        table = torch.empty((Bm * Hm, NQ, NK), dtype=torch.int32, device=like.device)
    if mask is None:
        mask_arg, strides = table, (0, 0, 0, 0)
    else:
        mask_arg, strides = as_bytes(mask), broadcast_strides(mask)
    mask_blocks_kernel[(NQ, NK, Bm * Hm)](mask_arg, table, Hm, Sq, Sk, NQ, NK, *strides,
                                      HAS_MASK=mask is not None, CAUSAL=causal, SUPER=SUPER,
                                      CHUNK=32, num_warps=4)
    return table


def block_lists(mask, q_shape, Sk: int, causal: bool, transposed: bool = False,
                like=None) -> tuple:
    """(indices, counts): per (mask head, query 128-block) the key 128-blocks to visit, full
    ones first; `transposed`: then also (indices, counts) per key 128-block of the query
    128-blocks (for dK, dV), from the same table. A torch mask's table and lists are kept
    while the mask lives and is not written (its version counter), so the forward and the
    backward, and every later call with the same mask, read the mask once (as a
    FlexAttention BlockMask built once). `like`: where a table without a mask lives."""
    entry = _cached(mask, q_shape[2], Sk, causal)
    if "table" not in entry:
        entry["table"] = block_table(mask, q_shape, Sk, causal, like)
    if "rows" not in entry:
        entry["rows"] = _lists(entry["table"])
    if transposed and "cols" not in entry:
        entry["cols"] = _lists(_transpose(entry["table"]))
    return (*entry["rows"], *entry["cols"]) if transposed else entry["rows"]


_TABLES: dict = {}  # cache key -> {"table", "rows", "cols"} (see _cached)


def _cached(mask, Sq: int, Sk: int, causal: bool) -> dict:
    """The cache entry of a torch mask (or of no mask, per device) for these lengths; a fresh
    dict, not kept, for NumPy masks and tensors without a version counter (inference mode)."""
    if mask is None:
        return {}
    if isinstance(mask, np.ndarray):
        return {}
    try:
        version = mask._version
    except (AttributeError, RuntimeError):  # inference tensors count no versions
        return {}
    import weakref
    key = (id(mask), Sq, Sk, causal)
    state = (version, mask.data_ptr(), tuple(mask.shape), tuple(mask.stride()))
    found = _TABLES.get(key)
    if found is not None and found[0]() is mask and found[1] == state:
        return found[2]
    entry: dict = {}

    def forget(_ref) -> None:  # the mask is gone: so is its table
        _TABLES.pop(key, None)

    _TABLES[key] = (weakref.ref(mask, forget), state, entry)
    return entry


def list_strides(mask, H: int) -> tuple:
    """(per batch, per head) steps between a (b, h)'s lists: 0 along a broadcast dim."""
    if mask is None:
        return 0, 0
    Bm, Hm = mask.shape[:2]
    return (Hm if Bm > 1 else 0), (1 if Hm > 1 else 0)


def layout_of(x) -> int:
    """HAS_MASK / HAS_BIAS for a mask or bias `x` (B|1, Hq|1, Sq|1, Sk), or None."""
    if x is None:
        return 0
    return KEYS.value if x.shape[2] == 1 else ROWS.value


def check(fn: str, q, k, v, mask, bias) -> None:
    """q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D) with Hkv dividing Hq; mask bool and bias
    float16/bfloat16/float32, each (B|1, Hq|1, Sq|1, Sk)."""
    if q.ndim != 4 or k.ndim != 4 or tuple(k.shape) != tuple(v.shape):
        raise ValueError(f"{fn}: q must be (B, Hq, Sq, D), k and v (B, Hkv, Sk, D), got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    B, Hq, Sq, D = q.shape
    if k.shape[0] != B or k.shape[3] != D or Hq % k.shape[1]:
        raise ValueError(f"{fn}: k, v {tuple(k.shape)} must share q's batch and head dim and "
                         f"have a head count that divides q's {Hq}")
    for x in (q, k, v):
        if str(x.dtype).replace("torch.", "") not in _FLOATS or str(x.dtype) != str(q.dtype):
            raise ValueError(f"{fn}: q, k, v must share one dtype of {_FLOATS}, got "
                             f"{q.dtype}, {k.dtype}, {v.dtype}")
        if _strides(x)[3] != 1:
            raise ValueError(f"{fn}: q, k, v need a contiguous last dim")
    for name, x, kinds in (("mask", mask, ("bool",)), ("bias", bias, _FLOATS)):
        if x is None:
            continue
        allowed = all(n in (1, full) for n, full in zip(x.shape[:3], (B, Hq, Sq)))
        if x.ndim != 4 or not allowed or x.shape[3] != k.shape[2]:
            raise ValueError(f"{fn}: {name} must be (B|1, Hq|1, Sq|1, Sk) = ({B}|1, {Hq}|1, "
                             f"{Sq}|1, {k.shape[2]}), got {tuple(x.shape)}")
        if str(x.dtype).replace("torch.", "") not in kinds:
            raise ValueError(f"{fn}: {name} must be {' or '.join(kinds)}, got {x.dtype}")


# The masked kernels hold the mask and bias tiles beside the dense kernels' tiles, so a dense
# default may spill here: these candidates go first instead (ptxas, sm_80 / sm_90a, with mask,
# bias and causal, in every dBias mode: zero spills; test_default_configs_resources.py).
# (kernel, D, wgmma table?, fp32?) -> the default. Each is the nearest zero-spill tile to the
# dense default; the speed of the ones chosen from ptxas's figures alone is not measured yet
# (docs/perf/default_configs.md).
# dK/dV at D = 128 on wgmma: 16 x 64 with 4 warps is the one that fits in registers with the
# mask and bias tiles (253 registers, no spills); the dense candidates need 255 and spill.
# dK/dV at D = 64 on wgmma: every wgmma candidate spills 12-92 bytes; 32 x 128 on 8 warps
# (the 64 x 128 default with half the queries per step) needs 226-233 registers.
# dK/dV at D = 64 on mma.sync: 32 x 64 on 4 warps spilled 4 bytes with the per-element dBias
# once the mask tiles were read in the scores' layout; on 8 warps 168-173 registers, none.
# dK/dV at D = 128 on mma.sync: 32 x 64 on 8 warps spilled 4 bytes with the per-column
# dBias; 16 x 64 (the same keys per program, half the queries per step) spills none.
# dQ fp32 at D = 16: 64 x 32 on 4 warps spilled 4 bytes on sm_80; on 8 warps none.
# fwd at D = 64 on wgmma, pointer path: a cap of 128 registers (PTX .maxnreg; two 8-warp
# blocks per SM, as the dense kernels' 124 registers allow) spills with a bias per element
# (docs/perf/masked_attention.md): uncapped there; the TMA variant's capped tiles are
# MASKED_TMA_FIRST's. dQ: uncapped (a cap not measured). A fifth element is the cap.
MASKED_DEFAULTS = {("fwd", 64, True, False): (128, 64, 8, 2),
                   ("dq", 64, True, False): (128, 32, 8, 2),
                   ("dq", 128, True, False): (128, 32, 8, 2),
                   ("dkdv", 64, True, False): (32, 128, 8, 2),
                   ("dkdv", 64, False, False): (32, 64, 8, 3),
                   ("dkdv", 128, True, False): (16, 64, 4, 2),
                   ("dkdv", 128, False, False): (16, 64, 8, 2),
                   ("dq", 16, False, True): (64, 32, 8, 2),
                   ("dkdv", 256, False, True, "sm_90a"): (16, 16, 4, 2)}
# dK/dV fp32 at D = 256 (keys with the arch: that arch only): on sm_90a 16 x 16 on 8 warps with 3
# stages spilled 12 bytes with the per-element dBias; on 4 warps and 2 stages none. sm_80
# keeps the dense default for its shared memory (flash_attention/configs.py), which spills 4
# bytes with the per-element dBias only; no zero-spill tile was found there (4 warps: 4-24
# bytes, 16 warps: 4-268).


# The TMA variants (k and v by host descriptors, sm_90a; forward_launch's `tma`): (kernel, D)
# -> candidates put first. The forward at D = 64 capped at 128 registers runs two 8-warp
# blocks per SM: 1.34x faster than uncapped at an all-true mask (S = 8192, bf16, H200), 1.53x
# with a key bias (docs/perf/masked_attention.md, "Two blocks per SM"); ptxas: no spills for
# every mask and bias layout the TMA variant takes at S multiple of 16; 4 bytes with a mask
# per element and a key bias at ragged lengths, where the autotuner (spills="avoid") keeps
# to the configs that spill nothing.
MASKED_TMA_FIRST = {("fwd", 64): [(128, 64, 8, 2, 128), (128, 64, 8, 3, 128)]}
# ... and candidates tried after the others (never the untuned default): for short walks. A
# document mask (S = 4096, 8 documents, causal inside each) gives each 128-row program 1 to 4
# live key blocks, so its time is mostly the fixed cost per program (prologue, epilogue, one
# CTA per SM at 255 registers): one warpgroup on 64 x 64 tiles (about 150 registers, three
# CTAs per SM) overlaps one CTA's fixed cost with another's products. The tuner's timings
# (bf16, mask + key bias, H200): document 0.223 ms against 0.244 for 128 x 128; a window of
# 1024 keys at S = 16384 0.501 against 0.491; all-true at S = 8192 2.72 against 2.27 (so it
# is no default). 64 x 128 spills. docs/perf/masked_attention.md, "Short walks".
MASKED_TMA_LAST = {("fwd", 128): [(64, 64, 4, 2)]}


def masked_candidates(kernel: str, x, arch: str | None = None, tma: bool = False) -> list:
    """candidates(kernel, x, arch) with MASKED_DEFAULTS' choice first; `tma`: the TMA
    variant's, MASKED_TMA_FIRST's before them and MASKED_TMA_LAST's after."""
    found = candidates(kernel, x, arch)
    wgmma = any(found is table.get(x.shape[-1]) for table in (WGMMA_CONFIGS[kernel],))
    key = (kernel, x.shape[-1], wgmma, _is_fp32(x))
    first = MASKED_DEFAULTS.get((*key, _arch(x) if arch is None else arch),
                                MASKED_DEFAULTS.get(key))
    if first is not None:
        found = [first] + [c for c in found if c != first]
    ahead = MASKED_TMA_FIRST.get((kernel, x.shape[-1]), []) if tma and wgmma else []
    behind = MASKED_TMA_LAST.get((kernel, x.shape[-1]), []) if tma and wgmma else []
    found = ahead + [c for c in found if c not in ahead]
    return found + [c for c in behind if c not in found]


def launch_options(config: tuple) -> dict:
    """The launch options of a (BLOCK_M, BLOCK_N, num_warps, num_stages[, maxnreg]) tuple."""
    options = dict(zip(("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"), config))
    if len(config) > 4:
        options["maxnreg"] = config[4]
    return options


def autotuned(kernel: str, fn, reset=(), keys=(), pre_hook=None):
    """`fn` autotuned over the dense attention kernels' candidates for `kernel` (the masked
    kernels keep their structure), keyed on lengths, head dim, causal and which inputs exist
    (and `keys`: more constexprs that pick a variant, e.g. TMA); the results stay on disk like
    every @tessera.autotune. `pre_hook`: each config's (the blocks of descriptor arguments)."""
    tables = (CONFIGS[kernel], CONFIGS[kernel + "_fp32"], WGMMA_CONFIGS[kernel])
    tuples = list(dict.fromkeys([t for table in tables for lst in table.values() for t in lst]
                                + [t for (name, *_), t in MASKED_DEFAULTS.items()
                                   if name == kernel]
                                + [t for extra in (MASKED_TMA_FIRST, MASKED_TMA_LAST)
                                   for (name, _), ts in extra.items() if name == kernel
                                   for t in ts]))
    configs = {t: tessera.Config({"BLOCK_M": t[0], "BLOCK_N": t[1]}, num_warps=t[2],
                                 num_stages=t[3], maxnreg=t[4] if len(t) > 4 else None,
                                 pre_hook=pre_hook)
               for t in tuples}

    def for_this_launch(_configs, nargs, **kwargs):
        tma = bool(kwargs.get("TMA", nargs.get("TMA", False)))
        return [configs[t] for t in masked_candidates(kernel, nargs["q_ptr"], tma=tma)]

    # spills="avoid": a capped tile that spills at some lengths is not chosen there.
    return tessera.autotune(configs=list(configs.values()),
                            key=["Sq", "Sk", "D", "CAUSAL", "HAS_MASK", "HAS_BIAS", *keys],
                            reset_to_zero=list(reset),
                            prune_configs_by={"early_config_prune": for_this_launch},
                            spills="avoid")(fn)


__all__ = ["SUPER", "ROWS", "KEYS", "layout_of", "launch_options", "mask_blocks_kernel",
           "block_table", "block_lists", "list_strides", "broadcast_strides", "as_bytes", "check",
           "autotuned", "_is_fp32"]
