"""The fused-attention kernels' tile configs, the autotuning over them and the host helpers
shared by the forward and backward wrappers (strides, outputs, argument checks).

Tiles per head dim and input width: the register file holds Q (BLOCK_M x D), the accumulator
(BLOCK_M x D, fp32) and the scores (BLOCK_M x BLOCK_N, fp32), so the larger D (or the wider
the inputs), the smaller the blocks. `@tessera.autotune` times each head dim's candidates once
per (S, D, causal, dtype) and keeps the fastest on disk. At float32 and D = 256 not even a
warp's 16 rows of Q fit beside the accumulators: there `RELOAD` makes the kernels read their
loop-invariant tiles again at every step (from L2).
"""
from __future__ import annotations

import numpy as np

import tessera
from tessera.compiler.target_limits import shared_memory_limit
from tessera.runtime.allocation import torch_allocator as scratch_allocator  # noqa: F401
from tessera.tools.tensor_descriptor import TensorDescriptor

LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x · log2(e))

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
# The forward's tiles that also run OVERLAP (forward.attention_fwd_pipelined: P V of one key
# tile in flight while the next tile's softmax runs, FlashAttention-3's order inside a
# warpgroup) on TMA launches without a producer warpgroup, tried first there. H200,
# `benchmarks/attention_schedules.py --quick` (fp16, x cuDNN, same run): D = 128 at 128 x 128
# 0.896 / 1.037 / 0.844 (S = 4k, 16k, 4k causal) against the plain loop's 0.844 / 0.925 /
# 0.787 at that tile and 0.722 / 0.812 / 0.750 at 128 x 64; at D = 64 it lost (0.869 against
# 1.016 at 128 x 128), so none there. docs/perf/attention_tma.md.
OVERLAP_TILES = {"fwd": {128: [(128, 128, 8, 2)]}}
# The first candidate for archs whose blocks get less shared memory than Hopper's 227 KiB
# (sm_80's 163 KiB): dK/dV fp32 at D = 256 with 3 stages needs 198 KiB there, so untuned
# launches (TESSERA_AUTOTUNE=off, first launches) would fail; 2 stages need 132 KiB. ptxas:
# 0 spills without causal, 16 bytes with it (no zero-spill tile found for sm_80 yet).
SMALL_SMEM_DEFAULTS = {("dkdv_fp32", 256): (16, 16, 8, 2)}
HEAD_DIMS = (16, 32, 64, 128, 256)


def preprocess_block(D: int) -> int:
    """Rows per program of the delta kernel: 8192 elements at most (few registers, many CTAs)."""
    return min(64, 8192 // D)


def _is_fp32(x) -> bool:
    return str(x.dtype) in ("float32", "torch.float32")


def _arch(x) -> str:
    """The target the kernels compile for: x's GPU (torch CUDA tensors), else none (or the
    arch a static ``tessera.report`` compiles for)."""
    device = getattr(x, "device", None)
    if getattr(device, "type", None) != "cuda":
        from tessera.report import static_arch
        return static_arch.get()
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
    table = kernel + ("_fp32" if _is_fp32(x) else "")
    first = SMALL_SMEM_DEFAULTS.get((table, D))
    limit = shared_memory_limit(arch) if arch else None
    if first is not None and limit is not None and limit < 200 * 1024:
        return [first] + [c for c in CONFIGS[table][D] if c != first]
    return CONFIGS[table][D]


def overlap_candidates(kernel: str, x, arch: str | None = None) -> list:
    """The OVERLAP_TILES of `kernel` for inputs like `x` on `arch` (default: x's GPU): where
    the candidates are WGMMA_CONFIGS' (OVERLAP's products are wgmma's), else none."""
    tiles = OVERLAP_TILES.get(kernel, {}).get(x.shape[-1], [])
    wgmma = WGMMA_CONFIGS[kernel].get(x.shape[-1])
    return list(tiles) if tiles and candidates(kernel, x, arch) is wgmma else []


def config(kernel: str, x, arch: str | None = None) -> tuple:
    """The default (first) candidate of `kernel` for inputs like `x`."""
    return candidates(kernel, x, arch)[0]


def autotuned(kernel: str, fn, key: tuple = (), pre_hook=None, reset_to_zero: tuple = ()):
    """`fn` autotuned over every candidate of CONFIGS[kernel] (and its _fp32 table), keyed on
    (S, D, CAUSAL), the dtypes and `key` (more constexprs that pick a variant, e.g. TMA); a
    launch keeps only its head dim's and dtype's list. `pre_hook`: each config's (e.g. to set
    the blocks of descriptor arguments to its tiles). `reset_to_zero`: arguments the kernel
    adds into (zeroed after the timed launches, before the real one)."""
    tables = (CONFIGS[kernel], CONFIGS[kernel + "_fp32"], WGMMA_CONFIGS[kernel])
    tuples = list(dict.fromkeys(t for table in tables for lst in table.values() for t in lst))
    configs = {t: tessera.Config({"BLOCK_M": t[0], "BLOCK_N": t[1]}, num_warps=t[2],
                                 num_stages=t[3], pre_hook=pre_hook) for t in tuples}
    overlapped = {t: tessera.Config({"BLOCK_M": t[0], "BLOCK_N": t[1], "OVERLAP": True},
                                    num_warps=t[2], num_stages=t[3], pre_hook=pre_hook)
                  for lst in OVERLAP_TILES.get(kernel, {}).values() for t in lst}

    def for_this_launch(_configs, nargs, **kwargs):
        q = nargs["q_ptr"]  # a tensor, or the TMA variant's descriptor of it
        q = q.base if isinstance(q, TensorDescriptor) else q
        plain = [configs[t] for t in candidates(kernel, q)]
        # OVERLAP holds Q in registers and issues its own products: TMA launches only (where
        # it was measured), neither RELOAD nor a producer warpgroup.
        if kwargs.get("TMA") and not kwargs.get("SPECIALIZE") and not kwargs.get("RELOAD"):
            return [overlapped[t] for t in overlap_candidates(kernel, q)] + plain
        return plain

    return tessera.autotune(configs=[*configs.values(), *overlapped.values()],
                            key=["S", "D", "CAUSAL", *key], reset_to_zero=list(reset_to_zero),
                            prune_configs_by={"early_config_prune": for_this_launch})(fn)


def reload_tiles(x) -> bool:
    """Whether the kernels re-read their loop-invariant tiles at every step instead of holding
    them: a warp's 16 x D rows take D · itemsize / 8 registers per lane (too many from 1 KiB)."""
    return x.shape[-1] * (4 if _is_fp32(x) else 2) >= 1024


TMA_ALIGN = 16  # bytes: the TMA's rule for a tensor map's base address and row stride


# Head dims per pass ("fwd", "bwd": the backward's dK/dV and dQ kernels) that `auto` sends
# through the TMA. Measured on an H200 (`benchmarks/attention.py --tma-ab --tma-ab-pass both
# --quick --dtypes float16`, S = 4096, same run, TMA over cp.async): fwd on (B, H, S, D) host
# descriptors D = 64 1.261x (causal 1.088x), D = 128 1.214x (causal 1.147x). bwd, after the
# cp.async owner guard cleared its racecheck hazards (0 now): D = 64 1.041x (causal 0.972x),
# D = 128 1.104x (causal 1.064x): D = 128, and D = 64 without the causal mask (an entry
# (D, causal) names one of the two; the session before measured it at 1.047x and 0.973x too;
# docs/perf/attention_tma.md, "The backward").
# "masked_fwd", "masked_dq": the masked-attention forward's and dQ kernel's K and V
# (ops/masked_attention/). The forward first read 0.47-0.64x of cp.async at sparse masks: the
# host time of a descriptor launch (maps encoded per call, the arguments expanded from their
# type texts), not the kernel; with both gone (runtime/tensor_map.py, descriptor_arguments.
# expand) the same run's A/B (bf16, mask + key bias, interleaved, H200) read 1.070x (S = 4096
# D = 64 10%-live), 1.008x (D = 128 document), 1.114x / 1.449x (all-true D = 64 / 128; 1.084x /
# 1.249x without the bias): D = 64 and 128. dQ: not measured since, none under auto
# (docs/perf/masked_attention.md "TMA"). TESSERA_ATTENTION_TMA=on takes every pass at every
# eligible D (tests and A/B).
TMA_FASTER_HEAD_DIMS: dict = {"fwd": (64, 128), "bwd": (128, (64, False)),
                              "masked_fwd": (64, 128), "masked_dq": ()}


def measured_faster(kernel: str, D: int, causal: bool | None = None) -> bool:
    """Whether TMA_FASTER_HEAD_DIMS[kernel] names head dim D (an entry D: causal or not; an
    entry (D, causal): that case only; `causal` None matches plain D entries alone)."""
    entries = TMA_FASTER_HEAD_DIMS[kernel]
    return D in entries or (causal is not None and (D, bool(causal)) in entries)


def tma_path(*tensors, arch: str | None = None, kernel: str = "fwd",
             causal: bool | None = None) -> bool:
    """Whether `kernel`'s pass (a key of TMA_FASTER_HEAD_DIMS) reads its tiles by the TMA: the
    forwards
    through (B, H, S, D) host tensor descriptors, the backward through per-head (S, D) device
    descriptors. Both need sm_90a with knobs.tma, 16-bit inputs on the wgmma configs (the TMA
    plan's slots are wgmma's swizzled tiles), and what a tensor map needs of every input: the
    last dim contiguous, the data pointer and the batch, head and row strides multiples of 16
    bytes, rows not overlapping. Otherwise (and in the interpreter, any other arch, strided
    inputs breaking a rule) the pointer path, which reads the same values.
    knobs.attention_tma: "auto" takes it only where TMA_FASTER_HEAD_DIMS[kernel] names the
    head dim (and `causal`, for entries that name it: measured_faster), "on" wherever
    the rules hold, "off" never."""
    x = tensors[0]
    arch = _arch(x) if arch is None else arch
    knobs = tessera.config.knobs
    mode = knobs.attention_tma
    if (mode == "off" or arch != "sm_90a" or not (knobs.tma and knobs.wgmma) or _is_fp32(x)
            or x.shape[-1] not in WGMMA_CONFIGS["fwd"]
            or (mode == "auto" and not measured_faster(kernel, x.shape[-1], causal))):
        return False
    for t in tensors:
        itemsize = t.itemsize if isinstance(t, np.ndarray) else t.element_size()
        address = (t.__array_interface__["data"][0] if isinstance(t, np.ndarray)
                   else t.data_ptr())
        stride_b, stride_h, stride_s, stride_d = _strides(t)
        if (stride_d != 1 or address % TMA_ALIGN or stride_s < t.shape[-1]
                or any(s * itemsize % TMA_ALIGN for s in (stride_b, stride_h, stride_s))):
            return False
    return True


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


def _zeros(like, shape):
    """A zeroed float32 array/tensor of `shape` on like's device."""
    out = _empty(like, shape, fp32=True)
    out[...] = 0
    return out


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


def _last_dim_contiguous(x):
    if _strides(x)[-1] == 1:
        return x
    return np.ascontiguousarray(x) if isinstance(x, np.ndarray) else x.contiguous()
