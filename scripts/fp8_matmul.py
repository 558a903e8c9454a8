"""A scaled fp8 matmul, C = (A @ B) * scale_a * scale_b, as torch._scaled_mm computes it: A
(M, K) and B (K, N) e4m3 or e5m2, any strides (B column-major, i.e. K-major, is the fast
layout: both tiles then reach shared memory by cp.async rings, which wgmma reads K-major),
float32 accumulation (wgmma's native fp8 products on sm_90a), per-tensor float32 scales, C in
C's dtype. Timed by benchmarks/matmul.py --fp8; compiled by tests/python/compiler/
test_fp8_wgmma_ptx.py."""
import tessera
import tessera.language as tl


@tessera.jit
def fp8_matmul_kernel(a_ptr, b_ptr, c_ptr, scale_a_ptr, scale_b_ptr, M, N, K,
                      stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_SIZE_M: tl.constexpr):
    # Programs in groups of GROUP_SIZE_M rows of tiles (neighbours share B's columns in L2);
    # rows and columns past M and N wrap around (never stored), the K tail loads zeros.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    scale = tl.load(scale_a_ptr) * tl.load(scale_b_ptr)
    c = (accumulator * scale).to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


# (meta, num_warps, num_stages): K steps of 128 bytes (wgmma's widest swizzle), one or two
# warpgroups; shared memory per stage 32-48 KiB.
CONFIGS = [
    ({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_SIZE_M": 8}, 8, 3),
    ({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_SIZE_M": 8}, 8, 3),
    ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_SIZE_M": 8}, 4, 4),
    ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_SIZE_M": 8}, 8, 4),
    ({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_SIZE_M": 8}, 8, 4),
]


def run(a, b, out, scale_a, scale_b, meta, num_warps, num_stages):
    """out = (a @ b) * scale_a * scale_b with one config."""
    m, k = a.shape
    n = b.shape[1]
    grid = (tessera.cdiv(m, meta["BLOCK_M"]) * tessera.cdiv(n, meta["BLOCK_N"]),)
    fp8_matmul_kernel[grid](a, b, out, scale_a, scale_b, m, n, k, *a.stride(), *b.stride(),
                            *out.stride(), num_warps=num_warps, num_stages=num_stages, **meta)
