"""Native fp8 products on sm_90a without a GPU: a tl.dot of e4m3/e5m2 tiles (any mix) into
float32 compiles to wgmma.mma_async m64nNk32.f32.<a>.<b> with no widening to f16 (no
cvt.rn.f16x2 from e4m3x2/e5m2x2) and ptxas accepts it; operands are in shared memory K-major
(A [M, K] and a transposed [N, K] B through cp.async rings; a [K, N] row-major B stored
transposed from registers in each step, as Triton); max_num_imprecise_acc adds the partial
sums into float32; sm_80 and knobs.wgmma off keep the f16 path. The compiled IR runs in the
interpreter against float64 of the fp8 values on ragged shapes."""
import re

import ml_dtypes
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.config import knobs

FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


@tessera.jit
def fp8_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_bk, stride_bn, BM: tl.constexpr,
               BN: tl.constexpr, BK: tl.constexpr, IMPRECISE: tl.constexpr):
    # B is read through its strides: (N, 1) for a [K, N] row-major B, (1, K) for the
    # transposed view of an [N, K] row-major one (contiguous along K).
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
    # B given as its transpose Bt [N, K] (row-major), multiplied as tl.trans of the Bt tile.
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


def compile_matmul(a_kind, b_kind, arch="sm_90a", blocks=(128, 128, 64), num_stages=3,
                   size=256, imprecise=0, b_transposed_view=False):
    a = np.zeros((size, size), FP8[a_kind])
    b = np.zeros((size, size), FP8[b_kind])
    c = np.zeros((size, size), np.float32)
    bm, bn, bk = blocks
    strides = (1, size) if b_transposed_view else (size, 1)
    return fp8_matmul.compile(a, b, c, size, size, size, *strides, BM=bm, BN=bn, BK=bk,
                              IMPRECISE=imprecise, arch=arch, num_warps=4,
                              num_stages=num_stages)


def compile_trans_b(a_kind, b_kind, blocks=(128, 128, 64), num_stages=3, size=256):
    a = np.zeros((size, size), FP8[a_kind])
    bt = np.zeros((size, size), FP8[b_kind])
    c = np.zeros((size, size), np.float32)
    bm, bn, bk = blocks
    return fp8_matmul_trans_b.compile(a, bt, c, size, size, size, BM=bm, BN=bn, BK=bk,
                                      arch="sm_90a", num_warps=4, num_stages=num_stages)


def wgmma_shapes(ptx):
    return set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k\d+\.f32\.\w+\.\w+)", ptx))


def assemble(kernel, spills=False):
    """ptxas accepts the PTX (without spills unless `spills`)."""
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    result = ptxas.assemble(kernel.asm["ptx"], "sm_90a")
    assert spills or result.report["spill_stores"] == 0


def fp8_values(rng, shape, kind):
    return (rng.standard_normal(shape) * 2).astype(FP8[kind])


def run_tgir(kernel, a, b, m, n, k, blocks, b_strides=None):
    c = np.full((m, n), np.nan, np.float32)
    bm, bn, _ = blocks
    grid = (-(-m // bm), -(-n // bn))
    args = [a, b, c, m, n, k] + ([] if b_strides is None else list(b_strides))
    interpreter.run(ir.parse_module(kernel.asm["tgir"]), grid=grid, args=args)
    return c


def relative_error(out, ref):
    return float(np.linalg.norm(out.astype(np.float64) - ref) / np.linalg.norm(ref))


KINDS = [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e5m2")]


@pytest.mark.parametrize("a_kind,b_kind", KINDS, ids=lambda k: k)
def test_fp8_dot_is_a_native_fp8_wgmma(a_kind, b_kind):
    kernel = compile_matmul(a_kind, b_kind)
    ptx = kernel.asm["ptx"]
    assert wgmma_shapes(ptx) == {f"m64n128k32.f32.{a_kind}.{b_kind}"}
    # 128x128x64 over 4 warps: one warpgroup, 2 along M, 2 k32 steps
    assert len(re.findall(r"wgmma\.mma_async", ptx)) == 4
    assert "cvt.rn.f16x2.e4m3x2" not in ptx and "cvt.rn.f16x2.e5m2x2" not in ptx
    assert "xf16" not in kernel.asm["tgir"]  # nothing widened
    assemble(kernel)


def test_row_major_b_is_stored_k_major_and_a_is_pipelined():
    # A [M, K] is K-major: a cp.async ring. B [K, N] row-major is contiguous along N, which
    # wgmma cannot read for 8-bit kinds: loaded in the loop, stored K-major (order [0, 1]).
    kernel = compile_matmul("e4m3", "e4m3")
    tgir = kernel.asm["tgir"]
    assert re.search(r"local_alloc \{offset = \d+\} : \(\) -> tensor<3x128x64xf8e4m3", tgir)
    loop = tgir[tgir.index(" = for "):tgir.rindex("yield")]
    stored = re.search(r"local_alloc %\d+ \{offset = \d+\} : \(tensor<64x128xf8e4m3, #\w+>\) "
                       r"-> tensor<64x128xf8e4m3, #(\w+)>", loop)
    assert stored, loop
    assert re.search(rf"#{stored.group(1)} = #shared<\{{[^}}]*order = \[0, 1\]", tgir)
    assert "cp.async" in kernel.asm["ptx"]


@pytest.mark.parametrize("a_kind,b_kind", [("e4m3", "e4m3"), ("e5m2", "e4m3")])
def test_transposed_b_is_pipelined_too(a_kind, b_kind):
    kernel = compile_trans_b(a_kind, b_kind)
    tgir = kernel.asm["tgir"]
    assert re.search(rf"-> tensor<3x128x64xf8{b_kind}", tgir)  # Bt's ring, K-major
    assert re.search(rf"-> tensor<3x128x64xf8{a_kind}", tgir)
    assert wgmma_shapes(kernel.asm["ptx"]) == {f"m64n128k32.f32.{a_kind}.{b_kind}"}
    assemble(kernel)


@pytest.mark.parametrize("num_stages", [1, 2, 3])
@pytest.mark.parametrize("blocks", [(64, 64, 32), (128, 64, 128), (64, 128, 256),
                                    (128, 128, 128)], ids=lambda b: "x".join(map(str, b)))
def test_k_major_tilings_and_depths_compile(blocks, num_stages):
    kernel = compile_trans_b("e4m3", "e5m2", blocks=blocks, num_stages=num_stages)
    shapes = wgmma_shapes(kernel.asm["ptx"])
    assert len(shapes) == 1 and shapes.pop().endswith("k32.f32.e4m3.e5m2")
    # Unpipelined (1 stage), both tiles pass through registers: big tiles spill, as f16's.
    assemble(kernel, spills=num_stages == 1 and blocks[0] * blocks[1] * blocks[2] > 2**19)


@pytest.mark.parametrize("num_stages", [1, 2, 3])
@pytest.mark.parametrize("blocks", [(64, 64, 32), (128, 128, 64)],
                         ids=lambda b: "x".join(map(str, b)))
def test_row_major_b_tilings_and_depths_compile(blocks, num_stages):
    # B [K, N] row-major is turned K-major byte by byte through registers (as Triton): its
    # 64 bytes per thread fit; a deep BLOCK_K (256 bytes per thread) spills (docs/limits.md).
    kernel = compile_matmul("e4m3", "e5m2", blocks=blocks, num_stages=num_stages)
    shapes = wgmma_shapes(kernel.asm["ptx"])
    assert len(shapes) == 1 and shapes.pop().endswith("k32.f32.e4m3.e5m2")
    # Unpipelined (1 stage), both tiles pass through registers: big tiles spill, as f16's.
    assemble(kernel, spills=num_stages == 1 and blocks[0] * blocks[1] * blocks[2] > 2**19)


@pytest.mark.parametrize("b_transposed_view", [False, True], ids=["b_kn", "b_view"])
@pytest.mark.parametrize("a_kind,b_kind", [("e4m3", "e4m3"), ("e5m2", "e4m3")])
def test_compiled_ir_runs_exactly_in_the_interpreter(a_kind, b_kind, b_transposed_view):
    # M, N, K not multiples of the blocks (nor K of 32): masked loads, zero-filled tiles.
    blocks = (64, 64, 64)
    kernel = compile_matmul(a_kind, b_kind, blocks=blocks, num_stages=3,
                            b_transposed_view=b_transposed_view)
    assert "k32.f32" in kernel.asm["ptx"]
    rng = np.random.default_rng(7)
    m, n, k = 80, 112, 80
    a = fp8_values(rng, (m, k), a_kind)
    b = fp8_values(rng, (k, n), b_kind)
    # The transposed view reads B [K, N] with strides (1, K): its memory is Bt [N, K].
    b_memory = np.ascontiguousarray(b.T) if b_transposed_view else b
    strides = (1, k) if b_transposed_view else (n, 1)
    c = run_tgir(kernel, a, b_memory, m, n, k, blocks, strides)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert relative_error(c, ref) < 1e-6


def test_trans_b_ir_runs_exactly_in_the_interpreter():
    blocks = (128, 128, 64)
    kernel = compile_trans_b("e4m3", "e5m2", blocks=blocks)
    rng = np.random.default_rng(3)
    m, n, k = 144, 176, 96  # multiples of 16 (the specialization), not of the blocks
    a = fp8_values(rng, (m, k), "e4m3")
    bt = fp8_values(rng, (n, k), "e5m2")
    c = run_tgir(kernel, a, bt, m, n, k, blocks)
    ref = a.astype(np.float64) @ bt.astype(np.float64).T
    assert relative_error(c, ref) < 1e-6


def test_max_num_imprecise_acc_adds_partial_sums_in_f32():
    # BK = 128, promotion every 64: 2 k32 steps per partial sum, 2 partial sums per dot, each
    # waited for and added (add.f32) into the accumulator.
    kernel = compile_matmul("e4m3", "e4m3", blocks=(64, 64, 128), imprecise=64)
    ptx = kernel.asm["ptx"]
    assert len(re.findall(r"wgmma\.mma_async", ptx)) == 4
    assert len(re.findall(r"wgmma\.commit_group", ptx)) == 2
    assert len(re.findall(r"add\.f32", ptx)) >= 2 * 64 * 64 // 128
    assemble(kernel)
    default = compile_matmul("e4m3", "e4m3", blocks=(64, 64, 128))
    assert len(re.findall(r"wgmma\.commit_group", default.asm["ptx"])) == 1


def test_max_num_imprecise_acc_above_k_is_refused():
    with pytest.raises(Exception, match="max_num_imprecise_acc"):
        compile_matmul("e4m3", "e4m3", blocks=(64, 64, 32), imprecise=64)


def test_sm80_and_knob_off_keep_the_f16_path():
    ptx = compile_matmul("e4m3", "e5m2", arch="sm_80").asm["ptx"]
    assert "e4m3.e5m2" not in ptx and "mma.sync.aligned.m16n8k16" in ptx
    with knobs.scope(wgmma=False):
        ptx = compile_matmul("e4m3", "e5m2").asm["ptx"]
    assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k16" in ptx


def load_fp8_matmul_script():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).parents[3] / "scripts" / "fp8_matmul.py"
    spec = importlib.util.spec_from_file_location("fp8_matmul_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("index", range(5))
def test_benchmark_kernel_configs_pipeline_both_operands(index):
    # benchmarks/matmul.py --fp8's kernel, B column-major (K-major), as torch._scaled_mm's.
    script = load_fp8_matmul_script()
    meta, num_warps, num_stages = script.CONFIGS[index]
    size = 512
    a = np.zeros((size, size), FP8["e4m3"])
    b = np.zeros((size, size), FP8["e4m3"])
    c = np.zeros((size, size), ml_dtypes.bfloat16)
    scale = np.ones(1, np.float32)
    kernel = script.fp8_matmul_kernel.compile(
        a, b, c, scale, scale, size, size, size, size, 1, 1, size, size, 1, arch="sm_90a",
        num_warps=num_warps, num_stages=num_stages, **meta)
    tgir = kernel.asm["tgir"]
    bm, bn, bk = meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"]
    assert f"tensor<{num_stages}x{bm}x{bk}xf8e4m3" in tgir
    assert f"tensor<{num_stages}x{bk}x{bn}xf8e4m3" in tgir  # B's ring, K-major
    assert all(s.split(".")[0].endswith("k32") for s in wgmma_shapes(kernel.asm["ptx"]))
    assert wgmma_shapes(kernel.asm["ptx"])
    assemble(kernel)


def test_benchmark_kernel_runs_in_the_interpreter():
    script = load_fp8_matmul_script()
    rng = np.random.default_rng(1)
    m, n, k = 48, 80, 112
    a = fp8_values(rng, (m, k), "e4m3")
    b = np.asfortranarray(fp8_values(rng, (k, n), "e4m3"))
    c = np.full((m, n), np.nan, np.float32)
    scale_a, scale_b = np.full(1, 0.5, np.float32), np.full(1, 4.0, np.float32)
    with knobs.scope(interpret=True):
        script.fp8_matmul_kernel[(tessera.cdiv(m, 32) * tessera.cdiv(n, 32),)](
            a, b, c, scale_a, scale_b, m, n, k, k, 1, 1, k, n, 1, BLOCK_M=32, BLOCK_N=32,
            BLOCK_K=32, GROUP_SIZE_M=2)
    ref = a.astype(np.float64) @ b.astype(np.float64) * 2.0
    assert relative_error(c, ref) < 1e-6


@tessera.jit
def fp8_dot_f16_out(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b, out_dtype=tl.float16))


def test_f16_accumulation_keeps_the_widened_path():
    # Only an f32 accumulator takes the native kinds; out_dtype=float16 multiplies the f16
    # widenings (mma.sync: wgmma here takes f32 accumulators only).
    a = np.zeros((64, 64), FP8["e4m3"])
    kernel = fp8_dot_f16_out.compile(a, a, np.zeros((64, 64), np.float16), BM=64, BN=64,
                                     BK=64, arch="sm_90a", num_warps=4)
    assert "e4m3.e4m3" not in kernel.asm["ptx"] and "f16.f16" in kernel.asm["ptx"]


def test_sm80_pipelined_fp8_ir_runs_exactly_in_the_interpreter():
    # On sm_80 the fp8 loads (other=0: a cast of zero) are pipelined too, then widened.
    blocks = (64, 64, 64)
    kernel = compile_matmul("e5m2", "e4m3", arch="sm_80", blocks=blocks, num_stages=3)
    assert "async_copy" in kernel.asm["tgir"]
    rng = np.random.default_rng(5)
    m, n, k = 80, 112, 80
    a, b = fp8_values(rng, (m, k), "e5m2"), fp8_values(rng, (k, n), "e4m3")
    c = run_tgir(kernel, a, b, m, n, k, blocks, (n, 1))
    assert relative_error(c, a.astype(np.float64) @ b.astype(np.float64)) < 1e-6
