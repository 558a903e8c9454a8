"""tests/gpu/test_matmul.py's pipeline-depth kernel on the CPU, for num_stages 1 to 5 with a
ragged K (not a multiple of BLOCK_K, nor of 16): B becomes a cp.async ring while A (rows of K
elements, not 16-byte aligned) is loaded and converted through the shared scratch region
inside the loop. The pipelined IR runs in the interpreter against float64, and the loop's
conversion scratch (allocate_shared's scratch_offset, used as such in the LLVM IR) never lies
on the rings.

Regression: at num_stages = 2 the wait at the top of the loop is {pending = 0}, which codegen
took for the wait after the loop; the scratch then reused the ring's bytes and A's conversion
overwrote B's slot while it was read (relative error 0.72 on an H200).

Compiled for sm_80: the mma.sync path, whose A conversion goes through scratch (on sm_90a the
dot is a wgmma and A is staged in its own buffer instead: test_wgmma_ptx.py)."""
import re

import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera import interpreter
from tessera._tessera import codegen, ir


@tessera.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rm[:, None] % M) * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + (rn[None, :] % N) * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


BLOCKS = (64, 128, 32)
DEPTHS = [1, 2, 3, 4, 5]


def arguments(m: int, n: int, k: int, a, b, c) -> list:
    return [a, b, c, m, n, k, k, 1, n, 1, n, 1]


@pytest.fixture(scope="module")
def compiled():
    """tgir and unoptimized LLVM IR per depth, specialized as the GPU test's 640 x 384 x 1000."""
    m, n, k = 640, 384, 1000
    a, b = np.zeros((m, k), np.float16), np.zeros((k, n), np.float16)
    c = np.zeros((m, n), np.float32)
    result = {}
    for depth in DEPTHS:
        kernel = matmul_kernel.compile(*arguments(m, n, k, a, b, c), BLOCK_M=BLOCKS[0],
                                       BLOCK_N=BLOCKS[1], BLOCK_K=BLOCKS[2], GROUP_M=8,
                                       num_warps=4, num_stages=depth, arch="sm_80")
        tgir = kernel.asm["tgir"]
        generated = codegen.generate(ir.parse_module(tgir), arch="sm_80", num_warps=4)
        result[depth] = (tgir, generated["unoptimized_llvm_ir"])
    return result


@pytest.mark.parametrize("depth", DEPTHS)
def test_pipelined_ir_with_ragged_k_runs_exactly(compiled, depth):
    tgir, _ = compiled[depth]
    if depth > 1:
        # One ring (B), and the wait for the oldest of depth - 1 groups in flight.
        assert tgir.count("local_alloc {offset") == 1
        assert f"async_wait {{pending = {depth - 2}}}" in tgir
    rng = np.random.default_rng(depth)
    m, n, k = 128, 256, 200  # 6 whole K blocks and one of 8: the tail is predicated
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    grid = (-(-m // BLOCKS[0]) * -(-n // BLOCKS[1]),)
    interpreter.run(ir.parse_module(tgir), grid=grid, args=arguments(m, n, k, a, b, c))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-5


@pytest.mark.parametrize("depth", DEPTHS[1:])
def test_loop_conversion_scratch_stays_off_the_rings(compiled, depth):
    tgir, llvm_ir = compiled[depth]
    ring = int(re.search(r"local_alloc \{offset = (\d+)\}", tgir).group(1))
    ring_end = ring + depth * BLOCKS[2] * BLOCKS[1] * 2
    loop = tgir[tgir.index(" = for "):tgir.rindex("yield")]
    scratch = sorted({int(x) for x in re.findall(r"scratch_offset = (\d+)", loop)})
    assert scratch, "A's conversion in the loop has scratch"
    a_bytes = BLOCKS[0] * BLOCKS[2] * 2
    for offset in scratch:
        assert offset >= ring_end or offset + a_bytes <= ring, (depth, ring, ring_end, offset)
    # The loop body's constant offsets into shared memory are those (ring slots are indexed by
    # register, from the ring's base).
    body = llvm_ir[llvm_ir.index("\nfor.body:"):llvm_ir.index("\nfor.exit:")]
    offsets = {int(x) for x in re.findall(r"@global_smem, i32 (\d+)\)", body)}
    assert offsets <= set(scratch) | {ring}, (depth, sorted(offsets), scratch, ring)
