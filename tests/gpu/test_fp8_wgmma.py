"""Native fp8 products on Hopper (wgmma m64nNk32 .e4m3/.e5m2) against float64 of the fp8
values, on ragged shapes: B as a [K, N] row-major tile (stored K-major through registers) and
as the transpose of an [N, K] tile (K-major rings), 1 to 3 stages, 4 and 8 warps; the
accumulator of fp8 wgmma keeps fewer bits than float32 (Triton's default on Hopper), and
max_num_imprecise_acc adds the partial sums into float32. The f16 path (knobs.wgmma off)
stays exact to float32 sums."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs an sm_90 GPU", allow_module_level=True)

import tessera
import tessera.language as tl
from tessera.config import knobs


@tessera.jit
def fp8_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_bk, stride_bn, BM: tl.constexpr,
               BN: tl.constexpr, BK: tl.constexpr, IMPRECISE: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        if IMPRECISE > 0:
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=IMPRECISE)
        else:
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@tessera.jit
def fp8_matmul_trans_b(a_ptr, bt_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        bt = tl.load(bt_ptr + rn[:, None] * K + (k + rk)[None, :],
                     mask=(rn[:, None] < N) & ((k + rk)[None, :] < K), other=0.0)
        acc = tl.dot(a, tl.trans(bt), acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


DTYPES = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
# wgmma's fp8 accumulation keeps fewer mantissa bits than float32 (DeepSeek-V3 reports about
# 14): the error of the sums, not of the products (exact), relative to the product's norm; a
# wrong operand layout gives errors near 1.
HARDWARE_SUMS = 1e-2
F32_SUMS = 1e-5


def operands(m, n, k, a_kind, b_kind, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn((m, k), device="cuda", generator=gen).to(DTYPES[a_kind])
    b = torch.randn((k, n), device="cuda", generator=gen).to(DTYPES[b_kind])
    return a, b


def error(c, a, b):
    ref = a.double() @ b.double()
    return ((c.double() - ref).norm() / ref.norm()).item()


def run(a, b, blocks, num_stages, num_warps=4, b_view=False, imprecise=0):
    m, k = a.shape
    n = b.shape[1]
    bm, bn, bk = blocks
    c = torch.full((m, n), float("nan"), device="cuda")
    grid = (tessera.cdiv(m, bm), tessera.cdiv(n, bn))
    if b_view:  # B [K, N] column-major: the transpose of the row-major Bt [N, K]
        bt = b.t().contiguous()
        fp8_matmul_trans_b[grid](a, bt, c, m, n, k, BM=bm, BN=bn, BK=bk, num_warps=num_warps,
                                 num_stages=num_stages)
    else:
        fp8_matmul[grid](a, b, c, m, n, k, b.stride(0), b.stride(1), BM=bm, BN=bn, BK=bk,
                         IMPRECISE=imprecise, num_warps=num_warps, num_stages=num_stages)
    return c


SHAPES = [(256, 256, 256), (1000, 520, 336), (129, 65, 48)]


@pytest.mark.parametrize("num_stages", [1, 2, 3])
@pytest.mark.parametrize("b_view", [False, True], ids=["b_kn", "b_transposed"])
@pytest.mark.parametrize("a_kind,b_kind", [("e4m3", "e4m3"), ("e5m2", "e4m3")])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fp8_wgmma_against_float64(shape, a_kind, b_kind, b_view, num_stages):
    m, n, k = shape
    a, b = operands(m, n, k, a_kind, b_kind, m + n + k + num_stages)
    c = run(a, b, (128, 128, 64), num_stages, b_view=b_view)
    assert not c.isnan().any()
    assert error(c, a, b) < HARDWARE_SUMS


@pytest.mark.parametrize("blocks,num_warps", [((64, 64, 32), 4), ((128, 256, 128), 8),
                                              ((128, 128, 128), 8), ((64, 128, 256), 4)],
                         ids=["64x64x32w4", "128x256x128w8", "128x128x128w8",
                              "64x128x256w4"])  # the last: K-major rows of 2 x 128 bytes
def test_fp8_wgmma_tilings(blocks, num_warps):
    a, b = operands(1000, 520, 336, "e4m3", "e5m2", 5)
    for b_view in (False, True):
        c = run(a, b, blocks, 3, num_warps=num_warps, b_view=b_view)
        assert error(c, a, b) < HARDWARE_SUMS, b_view


def test_max_num_imprecise_acc_adds_partial_sums_in_f32():
    # Promotion every 32 products: each wgmma's sum is added into float32 at once.
    a, b = operands(520, 264, 4096, "e4m3", "e4m3", 9)
    default = error(run(a, b, (128, 128, 64), 3), a, b)
    promoted = error(run(a, b, (128, 128, 64), 3, imprecise=32), a, b)
    assert default < HARDWARE_SUMS
    assert promoted <= default * 1.01 + 1e-7 and promoted < 1e-4, (promoted, default)


def test_f16_path_sums_in_f32():
    a, b = operands(1000, 520, 336, "e4m3", "e5m2", 3)
    with knobs.scope(wgmma=False):
        c = run(a, b, (128, 128, 64), 3)
    assert error(c, a, b) < F32_SUMS
