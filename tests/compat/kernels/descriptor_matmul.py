"""A matmul over device-side tensor descriptors, as Triton's persistent-matmul tutorial writes
its descriptor variant: ``tl.make_tensor_descriptor`` inside the kernel (global scratch from the
allocator given to ``triton.set_allocator``), ``desc.load``/``desc.store`` of whole tiles at
element offsets, a persistent grid looping over tiles with ``tl.range(..., flatten=True)``."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator


@triton.jit
def matmul_kernel_descriptor_persistent(a_ptr, b_ptr, c_ptr, M, N, K,
                                        BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                                        BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                                        NUM_SMS: tl.constexpr):
    dtype = c_ptr.dtype.element_ty
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BLOCK_SIZE_K, BLOCK_SIZE_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        offs_am = pid_m * BLOCK_SIZE_M
        offs_bn = pid_n * BLOCK_SIZE_N
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_SIZE_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            accumulator = tl.dot(a, b, accumulator)
        c_desc.store([offs_am, offs_bn], accumulator.to(dtype))


def matmul_descriptor_persistent(a, b):
    assert a.shape[1] == b.shape[0], "Incompatible dimensions"
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)

    def alloc_fn(size, alignment, stream):  # scratch for the descriptors built on the device
        return torch.empty(size, device=a.device, dtype=torch.int8)

    triton.set_allocator(alloc_fn)
    if a.device.type == "cpu":
        sms = 3
        meta = dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=2,
                    num_stages=2, num_warps=4)
    else:
        sms = torch.cuda.get_device_properties(a.device).multi_processor_count
        meta = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
                    num_stages=3, num_warps=8)
    tiles = triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"])
    grid = (min(sms, tiles),)
    matmul_kernel_descriptor_persistent[grid](a, b, c, M, N, K, NUM_SMS=sms, **meta)
    return c


def check(device):
    g = generator(device, 11)
    # Descriptors need 16-byte row strides: K and N multiples of 8 for 2-byte types.
    shapes = ((8, 8, 8), (72, 88, 40), (96, 64, 48)) if device == "cpu" else \
        ((8, 8, 8), (333, 520, 216), (1000, 1024, 776), (2048, 2048, 512))
    for M, N, K in shapes:
        for dtype in (torch.float16, torch.bfloat16):
            a = torch.randn(M, K, device=device, generator=g).to(dtype)
            b = torch.randn(K, N, device=device, generator=g).to(dtype)
            assert_close(matmul_descriptor_persistent(a, b), a.double() @ b.double(), dtype,
                         f"descriptor matmul {M}x{N}x{K} {dtype}")


def bench(device):
    a = torch.randn(8192, 8192, device=device).half()
    b = torch.randn(8192, 8192, device=device).half()
    return matmul_descriptor_persistent, (a, b)
