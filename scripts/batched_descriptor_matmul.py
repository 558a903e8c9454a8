"""Batched matmuls through descriptors of rank 3 and 4 whose blocks are 2-D tiles after
leading dims of 1 (``[1, BM, BK]``, ``[1, 1, BM, BK]``, loaded and reshaped by the kernel, as
Triton's attention tutorial reads ``[B·H, S, D]``): under TESSERA_TMA on sm_90a their loads
are copied by ``cp.async.bulk.tensor.3d`` / ``.4d``, each batch's box bounded by its own M
(zero fill past it, never the next batch's rows). Shared by tests/python/compiler/
test_tma_rank_ptx.py (CPU: PTX, ptxas, interpreter) and tests/gpu/test_tma.py."""
import numpy as np

import tessera
import tessera.language as tl
from tessera.tools.tensor_descriptor import TensorDescriptor


@tessera.jit
def batched_matmul_kernel(a_desc, b_desc, c_ptr, M, N, K, stride_cb, stride_cm,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n, batch = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([batch, pid_m * BM, k]).reshape([BM, BK])
        b = b_desc.load([batch, k, pid_n * BN]).reshape([BK, BN])
        acc += tl.dot(a, b)
    _store(c_ptr + batch * stride_cb, acc, M, N, stride_cm, pid_m, pid_n, BM, BN)


@tessera.jit
def batched4_matmul_kernel(a_desc, b_desc, c_ptr, M, N, K, H, stride_cb, stride_cm,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # 4-D: a [G, H, M, K], b [G, H, K, N]; program_id(2) walks the G·H batches.
    pid_m, pid_n, batch = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    g, h = batch // H, batch % H
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([g, h, pid_m * BM, k]).reshape([BM, BK])
        b = b_desc.load([g, h, k, pid_n * BN]).reshape([BK, BN])
        acc += tl.dot(a, b)
    _store(c_ptr + batch * stride_cb, acc, M, N, stride_cm, pid_m, pid_n, BM, BN)


@tessera.jit
def device_batched_matmul_kernel(a_ptr, b_ptr, c_ptr, B, M, N, K, stride_ab, stride_am,
                                 stride_bb, stride_bk, BM: tl.constexpr, BN: tl.constexpr,
                                 BK: tl.constexpr):
    # The 3-D descriptors made in the kernel (their maps encoded there under TMA).
    a_desc = tl.make_tensor_descriptor(a_ptr, [B, M, K], [stride_ab, stride_am, 1], [1, BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, [B, K, N], [stride_bb, stride_bk, 1], [1, BK, BN])
    pid_m, pid_n, batch = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([batch, pid_m * BM, k]).reshape([BM, BK])
        b = b_desc.load([batch, k, pid_n * BN]).reshape([BK, BN])
        acc += tl.dot(a, b)
    _store(c_ptr + batch * M * N, acc, M, N, N, pid_m, pid_n, BM, BN)


@tessera.jit
def _store(c_ptr, acc, M, N, stride_cm, pid_m, pid_n, BM: tl.constexpr, BN: tl.constexpr):
    rows = pid_m * BM + tl.arange(0, BM)[:, None]
    cols = pid_n * BN + tl.arange(0, BN)[None, :]
    tl.store(c_ptr + rows * stride_cm + cols, acc.to(c_ptr.dtype.element_ty),
             mask=(rows < M) & (cols < N))


CONFIGS = [dict(BM=128, BN=128, BK=64, num_warps=4, num_stages=3),
           dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=4)]
CONFIG_IDS = ["{BM}x{BN}x{BK}-s{num_stages}".format(**c) for c in CONFIGS]
# (batches, M, N, K): M not a multiple of the block (boxes cross into the next batch's rows
# unless each batch is bounded), N and K multiples of 8 (16-byte rows, as the TMA needs).
SHAPES = [(3, 200, 136, 72), (2, 77, 64, 200), (4, 128, 128, 128)]
SHAPE_IDS = ["x".join(map(str, s)) for s in SHAPES]


def descriptors(a, b, meta, rank=3):
    """a [batch, M, K] and b [batch, K, N] (NumPy or torch) as descriptors of ``rank`` 3, or
    4 with the batch split as [batch // 2, 2]."""
    if rank == 4:
        a = a.reshape(a.shape[0] // 2, 2, *a.shape[1:])
        b = b.reshape(b.shape[0] // 2, 2, *b.shape[1:])
    ones = [1] * (rank - 2)
    return (TensorDescriptor.from_tensor(a, ones + [meta["BM"], meta["BK"]]),
            TensorDescriptor.from_tensor(b, ones + [meta["BK"], meta["BN"]]))


def launch(a, b, c, meta, rank=3, device=False):
    """c[i] = a[i] @ b[i] (torch tensors on the GPU) by the kernel of ``rank`` (3, or 4 for an
    even batch), or by the device-descriptor kernel, launched as ``kernel[grid](...)``."""
    batches, m, k = a.shape
    n = b.shape[2]
    grid = (tessera.cdiv(m, meta["BM"]), tessera.cdiv(n, meta["BN"]), batches)
    if device:
        device_batched_matmul_kernel[grid](a, b, c, batches, m, n, k, a.stride(0), a.stride(1),
                                           b.stride(0), b.stride(1), **meta)
    elif rank == 4:
        batched4_matmul_kernel[grid](*descriptors(a, b, meta, 4), c, m, n, k, 2,
                                     c.stride(0), c.stride(1), **meta)
    else:
        batched_matmul_kernel[grid](*descriptors(a, b, meta), c, m, n, k, c.stride(0),
                                    c.stride(1), **meta)


def reference(a, b):
    """a @ b per batch in float64 (NumPy)."""
    return np.einsum("bmk,bkn->bmn", np.asarray(a, np.float64), np.asarray(b, np.float64))
