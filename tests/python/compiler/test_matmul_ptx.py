"""tessera.ops' matmul kernel through every stage for sm_80 and sm_90a: the PTX shows the
mma.sync path (16-byte cp.async into rings, ldmatrix, mma.sync m16n8k16, the wait of an
S-stage pipeline; on sm_90a with wgmma turned off), ptxas assembles it with zero spills; the
pipelined IR (rings, async copies) run by the interpreter matches float64; tf32, tf32x3, "ieee"
and chained dots compile."""
import re

import ml_dtypes
import numpy as np
import pytest
import tessera.language as tl
from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import compiler, ptxas
from tessera.config import knobs
from tessera.ops import gemm

DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}


@pytest.fixture(scope="module")
def matmul_kernel():
    return gemm.matmul_kernel


def compile_matmul(kernel, dtype, arch, num_stages, blocks=(128, 128, 32), num_warps=4,
                   size=256, wgmma=True):
    x = np.zeros((size, size), DTYPES[dtype])
    if not wgmma:
        knobs.wgmma = False
        try:
            return compile_matmul(kernel, dtype, arch, num_stages, blocks, num_warps, size)
        finally:
            knobs.reset("wgmma")
    block_m, block_n, block_k = blocks
    return kernel.compile(x, x, x, x, size, size, size, size, 1, size, 1, size, 1,
                          BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_SIZE_M=8,
                          HAS_BIAS=True, ACTIVATION="leaky_relu", num_warps=num_warps,
                          num_stages=num_stages, arch=arch)


def count(ptx: str, pattern: str) -> int:
    return len(re.findall(pattern, ptx))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("num_stages", [3, 4])
def test_tensor_core_pipeline_in_ptx(matmul_kernel, arch, dtype, num_stages):
    kernel = compile_matmul(matmul_kernel, dtype, arch, num_stages, wgmma=False)
    ptx = kernel.asm["ptx"]
    suffix = "f16.f16" if dtype == "fp16" else "bf16.bf16"
    # Per iteration, per warp (64 x 64 of the 128 x 128 tile, K = 32): 4 x 8 x 2 mma.
    assert count(ptx, rf"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.{suffix}\.f32") == 64
    # A (row-major; 4 x 2 fragments of 16 x 16 per warp, one x4 each) and B (N-major rows,
    # read transposed; 8 x 2 fragments of 16 x 8, two per x4): 8 x4 loads each per iteration.
    assert count(ptx, r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16") == 8
    assert count(ptx, r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16") == 8
    # 2 x 4 16-byte copies per thread and iteration: the prologue's S-1 and the loop's.
    assert count(ptx, r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16") == 8 * num_stages
    assert count(ptx, r"cp\.async\.commit_group") == num_stages
    assert count(ptx, rf"cp\.async\.wait_group\s+{num_stages - 2};") == 1
    assert count(ptx, r"cp\.async\.wait_group\s+0;") == 1
    ring_bytes = num_stages * (128 * 32 + 32 * 128) * 2
    # The epilogue runs in the accumulator's layout; only its 16-bit result is converted for
    # the store, through scratch that reuses the rings' bytes once they are dead.
    assert kernel.metadata["shared_bytes"] == max(ring_bytes, 128 * 128 * 2)
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    assert kernel.asm["cubin"][:4] == b"\x7fELF"
    assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["spill_loads"] == 0


@pytest.mark.parametrize("blocks,num_warps", [((64, 64, 32), 4), ((128, 256, 32), 8),
                                              ((256, 128, 32), 8), ((128, 128, 64), 8)])
def test_library_configs_do_not_spill(matmul_kernel, blocks, num_warps):
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found")
    for arch in ("sm_80", "sm_90a"):
        kernel = compile_matmul(matmul_kernel, "fp16", arch, 3, blocks, num_warps, size=512)
        assert kernel.metadata["spill_stores"] == 0, (arch, blocks)


def test_pipelined_ir_runs_exactly_in_the_interpreter(matmul_kernel):
    # The compiled stage (async copies into 3-slot rings, slots carried by the loop) computes
    # the product: M, N, K multiples of 16 (the specialization) but not of the blocks.
    kernel = compile_matmul(matmul_kernel, "fp16", "sm_80", 3)
    tgir = kernel.asm["tgir"]
    assert "async_copy" in tgir and "local_load" in tgir
    module = ir.parse_module(tgir)
    rng = np.random.default_rng(7)
    m, n, k = 208, 144, 112
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    grid = (((m + 127) // 128) * ((n + 127) // 128),)
    interpreter.run(module, grid=grid, args=[a, b, c, bias, m, n, k, k, 1, n, 1, n, 1])
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    ref = np.where(ref >= 0, ref, 0.01 * ref)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


def f32_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
            PRECISION: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, input_precision=PRECISION))


# 64 x 64 x 32 on 2 x 2 warps: 2 x 4 tiles of m16n8 per warp, 4 k steps of 8 (x 3 for tf32x3);
# the FMA path ("ieee") holds whole rows and columns per thread: a small tile.
@pytest.mark.parametrize("precision,shape,mma_count", [("tf32", (64, 64, 32), 32),
                                                       ("tf32x3", (64, 64, 32), 96),
                                                       ("ieee", (32, 32, 16), 0)])
def test_f32_precisions(precision, shape, mma_count):
    signature = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"}
    m, n, k = shape
    kernel = compiler.compile_kernel(f32_dot, signature,
                                     {"M": m, "N": n, "K": k, "PRECISION": precision},
                                     {"a_ptr", "b_ptr", "c_ptr"},
                                     options=compiler.CompileOptions(arch="sm_80"))
    ptx = kernel.asm["ptx"]
    assert count(ptx, r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32") == mma_count
    if precision != "ieee":
        assert count(ptx, r"cvt\.rna\.tf32\.f32") > 0
    else:
        assert count(ptx, r"fma\.rn\.f32") >= m * n * k // 128
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0


def chained_dots(q_ptr, k_ptr, v_ptr, o_ptr):
    rm = tl.arange(0, 64)
    rd = tl.arange(0, 64)
    q = tl.load(q_ptr + rm[:, None] * 64 + rd[None, :])
    kt = tl.load(k_ptr + rd[:, None] * 64 + rm[None, :])
    v = tl.load(v_ptr + rm[:, None] * 64 + rd[None, :])
    p = tl.dot(q, kt).to(tl.float16)
    tl.store(o_ptr + rm[:, None] * 64 + rd[None, :], tl.dot(p, v))


def test_chained_dot_keeps_p_in_registers():
    signature = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp32"}
    kernel = compiler.compile_kernel(chained_dots, signature, {},
                                     {"q_ptr", "k_ptr", "v_ptr", "o_ptr"},
                                     options=compiler.CompileOptions(arch="sm_80"))
    ptx = kernel.asm["ptx"]
    # Q, K^T and V go through shared memory, the epilogue too: one barrier each between its
    # stores and its loads. K^T's scratch lies beside Q's and V's reuses Q's after K^T's
    # barrier, so membar adds one barrier only, before the epilogue reuses V's bytes. P stays in
    # registers.
    assert count(ptx, r"bar\.sync") == 5
    assert count(ptx, r"mma\.sync\.aligned\.m16n8k16") == 64
