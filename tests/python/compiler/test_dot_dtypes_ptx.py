"""tl.dot on int8 (mma.sync m16n8k32 s8, int32 sums), float64 (FMA), fp8 (native wgmma k32 on
sm_90a; widened to f16 in registers for mma.sync on sm_80) and 3-D tiles compiles for sm_80
and sm_90a, and ptxas accepts it."""
import ml_dtypes
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas


@tessera.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=c_ptr.dtype.element_ty)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@tessera.jit
def batched_kernel(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                   K: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, M)[None, :, None]
    rn = tl.arange(0, N)[None, None, :]
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rb * M * K + rm * K + rk[None, None, :])
    b = tl.load(b_ptr + rb * K * N + rk[None, :, None] * N + rn)
    tl.store(c_ptr + rb * M * N + rm * N + rn, tl.dot(a, b))


def compile_matmul(arch, operand, result, blocks=(64, 64, 32)):
    a = np.zeros((256, 256), operand)
    c = np.zeros((256, 256), result)
    bm, bn, bk = blocks
    return matmul_kernel.asm(a, a, c, 256, 256, 256, BM=bm, BN=bn, BK=bk, arch=arch,
                             num_warps=4)["ptx"]


def assemble(ptx, arch):
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    ptxas.assemble(ptx, arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("blocks", [(32, 32, 32), (64, 64, 64), (128, 64, 32)])
def test_int8_dot_is_an_s8_mma(arch, blocks):
    ptx = compile_matmul(arch, np.int8, np.int32, blocks=blocks)
    bm, bn, bk = blocks
    # One m16n8k32 per 16x8 tile and 32 of K per loop step, shared by the 4 warps.
    assert ptx.count("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") == \
        (bm // 16) * (bn // 8) * (bk // 32) // 4
    assemble(ptx, arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_float64_dot_uses_fma_f64(arch):
    ptx = compile_matmul(arch, np.float64, np.float64, blocks=(16, 16, 16))
    assert "fma.rn.f64" in ptx
    assemble(ptx, arch)


def test_fp8_dot_on_sm90a_is_a_native_fp8_wgmma():
    # test_fp8_wgmma_ptx.py covers the native path in depth
    ptx = compile_matmul("sm_90a", ml_dtypes.float8_e4m3fn, np.float32)
    assert "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3" in ptx
    assert "cvt.rn.f16x2.e4m3x2" not in ptx
    assemble(ptx, "sm_90a")


def test_fp8_dot_on_sm80_is_an_f16_mma():
    ptx = compile_matmul("sm_80", ml_dtypes.float8_e5m2, np.float32)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assemble(ptx, "sm_80")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("batch", [2, 8])
@pytest.mark.parametrize("operand,result", [(np.float16, np.float32), (np.int8, np.int32),
                                            (np.float32, np.float32)])
def test_batched_dot_compiles(arch, batch, operand, result):
    a = np.zeros((batch, 16, 32), operand)
    ptx = batched_kernel.asm(a, np.zeros((batch, 32, 16), operand),
                             np.zeros((batch, 16, 16), result), B=batch, M=16, N=16, K=32,
                             arch=arch)["ptx"]
    # One 2-D tensor-core dot per batch index.
    assert "mma.sync" in ptx
    assemble(ptx, arch)


@tessera.jit
def precision_kernel(a_ptr, b_ptr, c_ptr, PRECISION: tl.constexpr):
    r = tl.arange(0, 64)
    a = tl.load(a_ptr + r[:, None] * 64 + r[None, :])
    b = tl.load(b_ptr + r[:, None] * 64 + r[None, :])
    tl.store(c_ptr + r[:, None] * 64 + r[None, :], tl.dot(a, b, input_precision=PRECISION))


@pytest.mark.parametrize("precision,products", [("bf16x3", 3), ("bf16x6", 6)])
def test_bf16_split_precisions_are_bf16_mmas(precision, products):
    x = np.zeros((64, 64), np.float32)
    ptx = precision_kernel.asm(x, x, x, PRECISION=precision, arch="sm_80", num_warps=4)["ptx"]
    # 64x64x64 over 4 warps: 4 * 8 * 4 / 4 = 32 m16n8k16 per product.
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 32 * products
    assemble(ptx, "sm_80")
