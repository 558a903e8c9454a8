"""ops.matmul's second kernel family on Hopper: persistent, TMA-fed (docs/perf/matmul_ops_tma.md).

NUM_SMS programs (at most one per tile) walk the tiles in steps of NUM_SMS, each tile's K loop
reading A and B through device-side tensor descriptors: on sm_90a with knobs.tma the pipeliner
copies those tiles with the TMA into mbarrier rings, and since the tile loop asks for
``flatten=True`` the rings live across tiles (the next tile's first stages copied during this
tile's last steps: docs/perf/matmul_sass.md). The descriptors' bounds do the masking: rows,
columns and the K tail past the tensor read zeros, so no index wraps. The epilogue is
gemm.matmul_kernel's (bias and activation in float32, the output's dtype).

A or B given transposed (``x.t()`` of a row-major tensor: the custom op's backward passes
``b.t()`` for dA and ``a.t()`` for dB) is described as the row-major tensor it is and its
tiles transposed into the product (wgmma reads a 16-bit operand of either orientation from
shared memory: its transpose bits).

`tma_rules` says which inputs may take this family; gemm.py's prune hook keeps its configs
only then. Anywhere else (sm_80, the interpreter, TESSERA_TMA=0, fp32, unaligned or strided
inputs) ops.matmul runs the pointer kernel alone, as before.
"""
import numpy as np

import tessera
import tessera.language as tl
from tessera.runtime.allocation import torch_allocator as scratch_allocator  # noqa: F401

TMA_ALIGN = 16  # bytes: a tensor map's base address and row stride are multiples of it


@tessera.jit
def matmul_tma_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                      stride_bn, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_SIZE_M: tl.constexpr, HAS_BIAS: tl.constexpr,
                      ACTIVATION: tl.constexpr, NUM_SMS: tl.constexpr, A_TRANS: tl.constexpr,
                      B_TRANS: tl.constexpr):
    if A_TRANS:  # a[m, k] at a_ptr + k * stride_ak + m: the (K, M) tensor, rows of M
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[stride_ak, 1],
                                           block_shape=[BLOCK_K, BLOCK_M])
    else:
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                           block_shape=[BLOCK_M, BLOCK_K])
    if B_TRANS:  # b[k, n] at b_ptr + n * stride_bn + k: the (N, K) tensor, rows of K
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                           block_shape=[BLOCK_K, BLOCK_N])
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            if A_TRANS:
                a = tl.trans(a_desc.load([offs_k, offs_am]))
            else:
                a = a_desc.load([offs_am, offs_k])
            if B_TRANS:
                b = tl.trans(b_desc.load([offs_bn, offs_k]))
            else:
                b = b_desc.load([offs_k, offs_bn])
            accumulator = tl.dot(a, b, accumulator)

        # The fused epilogue, as gemm.matmul_kernel's.
        offs_cn = offs_bn + tl.arange(0, BLOCK_N)
        if HAS_BIAS:
            bias = tl.load(bias_ptr + offs_cn, mask=offs_cn < N, other=0.0)
            accumulator = accumulator + bias.to(tl.float32)[None, :]
        if ACTIVATION == "leaky_relu":
            accumulator = tl.where(accumulator >= 0, accumulator, 0.01 * accumulator)
        # Masked pointer stores: the compiler has no TMA store yet, and a descriptor's store
        # (the same masked store) costs registers here (256x128: 255 and spills, against 195).
        c = accumulator.to(c_ptr.dtype.element_ty)
        offs_cm = offs_am + tl.arange(0, BLOCK_M)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


# The candidates: cuBLAS's and Triton's large tiles on two warpgroups. Each keeps its rings
# across tiles, i.e. rings plus the epilogue's conversion tile fit 227 KiB at once (213 KiB,
# 213 KiB, 160 KiB), and ptxas (sm_90a, CUDA 13) spills nothing: 166, 195, 120 registers at
# 8192^3 (255, 255, 162 for ragged shapes). 256x128x64 with 4 stages does not fit with the
# conversion (256 KiB): it would fill and drain its ring per tile, so it stays a pointer
# config only.
CONFIGS = [
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=4),
]


def _strides(x) -> tuple:
    if isinstance(x, np.ndarray):
        return tuple(s // x.itemsize for s in x.strides)
    return tuple(x.stride())


def _address(x) -> int:
    return x.__array_interface__["data"][0] if isinstance(x, np.ndarray) else x.data_ptr()


def _itemsize(x) -> int:
    return x.itemsize if isinstance(x, np.ndarray) else x.element_size()


def _arch(x) -> str:
    """The arch x's kernels compile for: its GPU's (CUDA tensors), else none (or the arch a
    static ``tessera.report`` compiles for)."""
    device = getattr(x, "device", None)
    if getattr(device, "type", None) != "cuda":
        from tessera.report import static_arch
        return static_arch.get()
    from tessera.runtime.launcher import arch_of
    return arch_of(device.index or 0)


def _rows(x, transposed: bool = False):
    """(row stride) when x (2-D) is rows with a contiguous last dim (or, transposed, x.T is),
    the rows not overlapping; None otherwise."""
    stride_r, stride_c = _strides(x)[::-1] if transposed else _strides(x)
    extent = x.shape[0] if transposed else x.shape[1]
    if stride_c != 1 or (stride_r < extent and x.shape[1 if transposed else 0] > 1):
        return None
    return stride_r


def describable(x, transposed: bool = False) -> bool:
    """Whether a tensor map can describe x (2-D; x.T when `transposed`): the last dim
    contiguous, the base address and the row stride in bytes multiples of 16."""
    stride = _rows(x, transposed)
    return (stride is not None and _address(x) % TMA_ALIGN == 0
            and stride * _itemsize(x) % TMA_ALIGN == 0)


def tma_rules(a, b, arch: str | None = None) -> tuple:
    """``(eligible, a_trans, b_trans)`` for ``a @ b``: whether this family may run it (sm_90a,
    knobs.tma and knobs.wgmma, knobs.matmul_tma not off, fp16/bf16 inputs of one dtype, no
    empty dim (a tensor map's dims are >= 1), a tensor map for each of A and B, row-major or
    transposed: ``x.t()`` of a row-major tensor), and whether A and B are read transposed.
    The output is stored through pointers: any strides."""
    knobs = tessera.config.knobs
    arch = _arch(a) if arch is None else arch
    if (arch != "sm_90a" or not (knobs.tma and knobs.wgmma) or knobs.matmul_tma == "off"
            or str(a.dtype).replace("torch.", "") not in ("float16", "bfloat16")
            or str(a.dtype) != str(b.dtype) or 0 in (*a.shape, *b.shape)):
        return False, False, False
    a_trans = not describable(a) and describable(a, transposed=True)
    b_trans = not describable(b) and describable(b, transposed=True)
    return ((a_trans or describable(a)) and (b_trans or describable(b)), a_trans, b_trans)


_SMS: dict = {}


def sm_count(x) -> int:
    """The number of SMs of x's GPU (the persistent grid's width); 1 off the GPU."""
    device = getattr(x, "device", None)
    if getattr(device, "type", None) != "cuda":
        return 1
    index = device.index or 0
    if index not in _SMS:
        import torch
        _SMS[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _SMS[index]
