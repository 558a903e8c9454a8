"""A persistent matmul over device-side tensor descriptors (Triton's persistent tutorial, as
tests/compat/kernels/descriptor_matmul.py), with its tile loop's ``flatten`` a parameter: with
it, the TMA pipeline of the K loop copies across tiles (transforms/pipeline/cross_tile.h).
The cases launch fewer programs than tiles, so every program runs several tiles and the
copies cross tile boundaries; shared by tests/gpu/test_cross_tile.py and
tests/python/compiler/test_cross_tile.py (which runs them in the interpreter)."""
import tessera
import tessera.language as tl


@tessera.jit
def persistent_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                             BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                             GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr,
                             FLATTEN: tl.constexpr):
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
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=FLATTEN):
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


def config(bm, bn, bk, warps, stages):
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=2,
                num_warps=warps, num_stages=stages)


# The compat benchmark's config first; then a 4-stage ring (distance 3) and a small one.
GPU_CONFIGS = [config(128, 256, 64, 8, 3), config(128, 128, 64, 4, 4), config(64, 64, 32, 4, 3)]
GPU_CONFIG_IDS = ["{BLOCK_SIZE_M}x{BLOCK_SIZE_N}x{BLOCK_SIZE_K}-s{num_stages}".format(**c)
                  for c in GPU_CONFIGS]
# (M, N, K, programs): ragged M; N and K multiples of 8 (16-byte rows, as the TMA needs); K
# of fewer steps than the ring's distance too (the next tile's first stages then are copied
# by its own prologue), and of one step.
CASES = [(336, 520, 216, 3), (1000, 1024, 776, 7), (130, 264, 40, 5), (200, 136, 8, 2),
         (72, 88, 1000, 4)]
CASE_IDS = ["{}x{}x{}-p{}".format(*case) for case in CASES]


def launch(a, b, c, meta, programs, flatten=True):
    """C = A @ B by `programs` persistent programs (each runs every programs-th tile)."""
    m, k = a.shape
    n = b.shape[1]
    persistent_matmul_kernel[(programs,)](a, b, c, m, n, k, NUM_SMS=programs, FLATTEN=flatten,
                                          **meta)
