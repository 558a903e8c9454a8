"""Descriptor matmuls (host TensorDescriptor and device tl.make_tensor_descriptor) compiled
by scripts/check_ptx_identical.py and the TMA tests: the kernels the Hopper path targets."""
import numpy as np

import tessera
import tessera.language as tl
from tessera.tools.tensor_descriptor import TensorDescriptor


@tessera.jit
def descriptor_matmul_kernel(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                             BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]))
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@tessera.jit
def device_descriptor_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr,
                                    BN: tl.constexpr, BK: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]))
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@tessera.jit
def shifted_descriptor_matmul_kernel(a_desc, b_desc, c_desc, K, SHIFT: tl.constexpr,
                                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # C[i, :] = A[i - SHIFT, :] @ B: boxes start above the tensor's first row (negative
    # coordinates) and end past its last, so both edges read the padding.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_desc.load([pid_m * BM - SHIFT, k]), b_desc.load([k, pid_n * BN]))
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


CONFIGS = [dict(BM=128, BN=128, BK=64, num_warps=4, num_stages=3),
           dict(BM=128, BN=256, BK=64, num_warps=8, num_stages=3),
           dict(BM=64, BN=128, BK=32, num_warps=4, num_stages=4)]


def descriptors(a, b, c, meta):
    return (TensorDescriptor.from_tensor(a, [meta["BM"], meta["BK"]]),
            TensorDescriptor.from_tensor(b, [meta["BK"], meta["BN"]]),
            TensorDescriptor.from_tensor(c, [meta["BM"], meta["BN"]]))


# The launches of tests/gpu/test_tma.py, which tests/python/compiler/test_tma_ptx.py makes
# through the same entry point on the CPU (a faked driver): one list, so the CPU check cannot
# drift from what the GPU compiles. Ragged shapes (not multiples of 16 or of the blocks)
# specialize differently from aligned ones.
CONFIG_IDS = ["{BM}x{BN}x{BK}-s{num_stages}".format(**c) for c in CONFIGS]  # pytest ids
TMA_SHAPES = [(256, 256, 256), (336, 264, 200), (72, 520, 40), (1000, 1000, 1000)]
TMA_SHAPE_IDS = ["x".join(map(str, s)) for s in TMA_SHAPES]
TMA_DTYPES = ["float16", "bfloat16"]
SHIFT_SHAPE, SHIFTS, SHIFT_CONFIG = (200, 136, 72), [8, 24], 2


def launch_matmul(a, b, c, meta, tma, shift=None, warp_specialize=False):
    """c = a @ b by the host-descriptor matmul (the shifted one for ``shift``), launched as
    ``kernel[grid](...)`` with TESSERA_TMA set to ``tma`` and TESSERA_WARP_SPECIALIZE to
    ``warp_specialize``; a, b, c are torch tensors."""
    from tessera.config import knobs
    m, k = a.shape
    n = b.shape[1]
    grid = (tessera.cdiv(m, meta["BM"]), tessera.cdiv(n, meta["BN"]))
    with knobs.scope(tma=tma, warp_specialize=warp_specialize):
        if shift is None:
            descriptor_matmul_kernel[grid](*descriptors(a, b, c, meta), k, **meta)
        else:
            shifted_descriptor_matmul_kernel[grid](*descriptors(a, b, c, meta), k, SHIFT=shift,
                                                   **meta)


def launch_device_matmul(a, b, c, meta, tma):
    """c = a @ b by the device-descriptor matmul (its maps encoded in the kernel under TMA,
    in scratch from tessera.set_allocator), launched as ``kernel[grid](...)``."""
    from tessera.config import knobs
    m, k = a.shape
    n = b.shape[1]
    grid = (tessera.cdiv(m, meta["BM"]), tessera.cdiv(n, meta["BN"]))
    with knobs.scope(tma=tma):
        device_descriptor_matmul_kernel[grid](a, b, c, m, n, k, **meta)


def descriptor_cases(size=512):
    """(label, kernel, args, meta) of each descriptor matmul, as check_ptx_identical's cases."""
    a = np.zeros((size, size), np.float16)
    for i, meta in enumerate(CONFIGS):
        yield (f"descriptor_matmul_kernel config {i}", descriptor_matmul_kernel,
               (*descriptors(a, a, a, meta), size), meta)
        yield (f"device_descriptor_matmul_kernel config {i}", device_descriptor_matmul_kernel,
               (a, a, a, size, size, size), meta)
