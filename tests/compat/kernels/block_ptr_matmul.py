"""Matrix multiplication with block pointers (``tl.make_block_ptr``, ``tl.advance``, boundary
checks), as Triton's block-pointer tutorial wrote it; ragged shapes rely on boundary_check."""
import torch

import tessera as triton
import tessera.language as tl

from .common import assert_close, generator


@triton.jit
def matmul_kernel_with_block_pointers(a_ptr, b_ptr, c_ptr, M, N, K,
                                      stride_am, stride_ak, stride_bk, stride_bn,
                                      stride_cm, stride_cn,
                                      BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                                      BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (pid % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    a_block_ptr = tl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(stride_am, stride_ak),
                                    offsets=(pid_m * BLOCK_SIZE_M, 0),
                                    block_shape=(BLOCK_SIZE_M, BLOCK_SIZE_K), order=(1, 0))
    b_block_ptr = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(stride_bk, stride_bn),
                                    offsets=(0, pid_n * BLOCK_SIZE_N),
                                    block_shape=(BLOCK_SIZE_K, BLOCK_SIZE_N), order=(1, 0))
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_SIZE_K):
        a = tl.load(a_block_ptr, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_block_ptr, boundary_check=(0, 1), padding_option="zero")
        accumulator += tl.dot(a, b)
        a_block_ptr = tl.advance(a_block_ptr, (0, BLOCK_SIZE_K))
        b_block_ptr = tl.advance(b_block_ptr, (BLOCK_SIZE_K, 0))
    c = accumulator.to(tl.float16)

    c_block_ptr = tl.make_block_ptr(base=c_ptr, shape=(M, N), strides=(stride_cm, stride_cn),
                                    offsets=(pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N),
                                    block_shape=(BLOCK_SIZE_M, BLOCK_SIZE_N), order=(1, 0))
    tl.store(c_block_ptr, c, boundary_check=(0, 1))


def matmul(a, b):
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K = 128, 128, 64
    if not a.is_cuda:
        BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K = 32, 32, 32
    grid = (triton.cdiv(M, BLOCK_SIZE_M) * triton.cdiv(N, BLOCK_SIZE_N), )
    matmul_kernel_with_block_pointers[grid](a, b, c, M, N, K, a.stride(0), a.stride(1),
                                            b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                                            BLOCK_SIZE_M=BLOCK_SIZE_M, BLOCK_SIZE_N=BLOCK_SIZE_N,
                                            BLOCK_SIZE_K=BLOCK_SIZE_K, GROUP_SIZE_M=8,
                                            num_warps=8 if a.is_cuda else 4, num_stages=3)
    return c


def check(device):
    g = generator(device, 11)
    shapes = ((1, 1, 1), (45, 70, 33)) if device == "cpu" else ((1, 1, 1), (333, 517, 211),
                                                                 (1024, 1024, 1024))
    for M, N, K in shapes:
        a = torch.randn(M, K, device=device, generator=g).half()
        b = torch.randn(K, N, device=device, generator=g).half()
        assert_close(matmul(a, b), a.double() @ b.double(), torch.float16,
                     f"block-pointer matmul {M}x{N}x{K}")
        bt = torch.randn(N, K, device=device, generator=g).half().t()  # column-major B
        assert_close(matmul(a, bt), a.double() @ bt.double(), torch.float16,
                     f"block-pointer matmul, B transposed {M}x{N}x{K}")


def bench(device):
    a = torch.randn(4096, 4096, device=device).half()
    b = torch.randn(4096, 4096, device=device).half()
    return matmul, (a, b)
