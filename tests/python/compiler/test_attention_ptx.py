"""tessera.ops' fused-attention kernels (forward; backward delta, dK/dV and dQ) through every
stage for sm_80 and sm_90a with the library's own configs, for every head dim and fp16, bf16
and fp32 (tf32) inputs: the products on tensor cores (mma.sync; wgmma on sm_90a for 16-bit
inputs where the tile fits a warpgroup), exp2 as ex2.approx, and ptxas reporting zero
spills. The compiled (pipelined) IR run by the interpreter matches a float64 reference."""
import re

import ml_dtypes
import numpy as np
import pytest
from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.config import knobs
import tessera.ops.flash_attention as fa
from tessera.errors import OutOfResources

DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}
HEAD_DIMS = [16, 32, 64, 128, 256]
MMA = {"fp16": r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32",
       "bf16": r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32",
       "fp32": r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32"}
WGMMA = {"fp16": r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.f16\.f16",
         "bf16": r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.bf16\.bf16"}


def kernel_arguments(name, x, lse, H, S):
    """The runtime arguments the library's wrappers pass, for (1, H, S, D) tensors like x."""
    st = tuple(s // x.itemsize for s in x.strides[:3])
    if name == "fwd":
        return (x, x, x, x, lse, 0.125 * fa.LOG2E, H, S, *st * 4)
    if name == "dkdv":
        return (x, x, x, x, x, x, lse, lse, 0.125, 0.125 * fa.LOG2E, H, S, *st * 6)
    return (x, x, x, x, x, lse, lse, 0.125, 0.125 * fa.LOG2E, H, S, *st * 5)


def compile_attention(name, D, dtype, causal, arch, S=1024, H=2, config=None):
    x = np.zeros((1, H, S, D), DTYPES[dtype])
    lse = np.zeros((1, H, S), np.float32)
    config = fa.config(name, x, arch) if config is None else config
    block_m, block_n, num_warps, num_stages = config
    kernel = {"fwd": fa.attention_fwd_kernel, "dkdv": fa.attention_bwd_dkdv_kernel,
              "dq": fa.attention_bwd_dq_kernel}[name]
    compiled = kernel.compile(*kernel_arguments(name, x, lse, H, S), D=D,
                              BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                              RELOAD=fa.reload_tiles(x), num_warps=num_warps,
                              num_stages=num_stages, arch=arch)
    return compiled, config


def compile_preprocess(D, dtype, arch, S=1024, H=2):
    x = np.zeros((1, H, S, D), DTYPES[dtype])
    delta = np.zeros((1, H, S), np.float32)
    st = tuple(s // x.itemsize for s in x.strides[:3])
    return fa.attention_bwd_preprocess_kernel.compile(
        x, x, delta, H, S, *st, *st, D=D, BLOCK_M=fa.preprocess_block(D), num_warps=4,
        arch=arch)


def count(ptx: str, pattern: str) -> int:
    return len(re.findall(pattern, ptx))


def test_configs_cover_every_kernel_and_head_dim():
    assert fa.HEAD_DIMS == tuple(HEAD_DIMS)
    for name in ("fwd", "dkdv", "dq"):
        for suffix in ("", "_fp32"):
            assert sorted(fa.CONFIGS[name + suffix]) == HEAD_DIMS, name + suffix


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype,causal", [("fp16", True), ("fp16", False), ("bf16", True),
                                          ("fp32", True), ("fp32", False)])
@pytest.mark.parametrize("D", HEAD_DIMS)
@pytest.mark.parametrize("name", ["fwd", "dkdv", "dq"])
def test_candidate_configs_on_tensor_cores_without_spills(name, D, dtype, causal, arch):
    # Every config autotuning may pick: the default (first) without spills, the others with at
    # most a few bytes (autotuning times them; a small spill may still be the fastest: dK/dV
    # at D = 128 on wgmma, 64 x 128 on 8 warps, spills 104-188 bytes, more since S^T and dP^T
    # are in flight together, and is still the fastest at S = 4k on an H200).
    x = np.zeros((1, 1, 16, D), DTYPES[dtype])
    fitted = 0
    for index, config in enumerate(fa.candidates(name, x, arch)):
        try:
            kernel, _ = compile_attention(name, D, dtype, causal, arch, config=config)
        except OutOfResources:
            # More shared memory than this arch gives a block (e.g. an H100-sized config on
            # sm_80): the autotuner skips it there; another candidate must fit (below).
            continue
        fitted += 1
        ptx = kernel.asm["ptx"]
        tensor_core = count(ptx, MMA[dtype])
        if arch == "sm_90a" and dtype in WGMMA:
            tensor_core += count(ptx, WGMMA[dtype])
        else:
            assert "wgmma" not in ptx
        assert tensor_core > 0
        assert count(ptx, r"ex2\.approx") > 0
        if ptxas.find_ptxas() is None:
            pytest.skip("ptxas not found: PTX not assembled")
        limit = 0 if index == 0 else 192
        if (name, D, dtype, arch, causal, index) == ("dkdv", 256, "fp32", "sm_80", True, 0):
            # The tile that fits sm_80's shared memory (configs.py): 16 bytes, 24 since exp2
            # became ex2.approx.ftz (fewer instructions, another register assignment).
            limit = 24
        assert kernel.metadata["spill_stores"] <= limit, (
            f"{name} D={D} {dtype} {arch} {config}: {kernel.metadata}")
    assert fitted > 0, f"{name} D={D} {dtype} {arch}: no candidate fits the shared memory"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_preprocess_without_spills(dtype, arch):
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    for D in HEAD_DIMS:
        kernel = compile_preprocess(D, dtype, arch)
        assert kernel.metadata["spill_stores"] == 0, (D, kernel.metadata)


@pytest.mark.parametrize("arch", ["sm_80"])  # mma.sync (sm_90a's wgmma: test_wgmma_count_per_step)
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("name", ["fwd", "dkdv", "dq"])
def test_mma_count_per_step(name, D, arch):
    # One loop step: the forward's two products are BLOCK_M x BLOCK_N x D each, the backward's
    # four too (K Qᵀ, Pᵀ dO, V dOᵀ, dSᵀ Q for dK/dV; Q Kᵀ, dO Vᵀ, dS K for dQ: three). Each
    # m16n8k16 covers 16 x 8 x 16, shared by num_warps warps where the tiles go round. Each
    # kernel has two loops over that step's body (masked blocks, then unmasked ones).
    kernel, (block_m, block_n, num_warps, _) = compile_attention(name, D, "fp16", True,
                                                                 arch)
    products = {"fwd": 2, "dkdv": 4, "dq": 3}[name]
    expected = products * block_m * block_n * D // (16 * 8 * 16) // num_warps
    assert count(kernel.asm["ptx"], MMA["fp16"]) == 2 * expected
    assert count(kernel.asm["ptx"], r"ldmatrix\.sync\.aligned") > 0


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("name", ["fwd", "dkdv", "dq"])
def test_wgmma_count_per_step(name, D):
    # On sm_90a the default configs' products are wgmma: a warpgroup's m64nNk16 covers 64 rows
    # (of the program's M: BLOCK_M, or BLOCK_N keys for dK/dV) x N x 16, N the product's whole
    # width, and the warpgroups split M. The same two loops, and no ldmatrix: the operands are
    # read from shared memory through descriptors, or from registers (P, dS).
    kernel, (block_m, block_n, num_warps, _) = compile_attention(name, D, "fp16", True,
                                                                 "sm_90a")
    rows, cols = (block_n, block_m) if name == "dkdv" else (block_m, block_n)
    if rows % (16 * num_warps):
        pytest.skip(f"{name} D={D}: {rows} rows on {num_warps} warps stay on mma.sync")
    # (n, k) of each product; a warpgroup issues rows / (16 * num_warps) instructions (its
    # 64-row slices) per 16 of K and per 256 of N.
    products = {"fwd": [(cols, D), (D, cols)],
                "dkdv": [(block_m, D), (D, block_m), (block_m, D), (D, block_m)],
                "dq": [(block_n, D), (block_n, D), (D, block_n)]}[name]
    reps = rows // (16 * num_warps)
    expected = sum(reps * (-(-n // 256)) * (k // 16) for n, k in products)
    ptx = kernel.asm["ptx"]
    assert count(ptx, WGMMA["fp16"]) == 2 * expected
    assert count(ptx, r"ldmatrix\.sync\.aligned") == 0
    assert count(ptx, r"mma\.sync") == 0


def run_compiled(name, causal, S, H, D, args, arch):
    """Runs the tgir stage of `name` (layouts, pipelined rings) in the interpreter."""
    kernel, (block_m, block_n, *_) = compile_attention(name, D, "bf16", causal, arch,
                                                       S=S, H=H)
    block = block_n if name == "dkdv" else block_m
    interpreter.run(ir.parse_module(kernel.asm["tgir"]), grid=(-(-S // block), H),
                    args=list(args))


@pytest.mark.parametrize("arch, D", [("sm_80", 64), ("sm_90a", 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_compiled_ir_runs_in_the_interpreter(causal, arch, D):
    # The forward and both backward kernels after every tgir pass compute attention and its
    # gradients: S = 80 is a multiple of 16 (the specialization) but not of the blocks. On
    # sm_90a at D = 128, dK/dV reads lse and delta from rings of their own.
    S, H = 80, 2
    rng = np.random.default_rng(3)
    q, k, v, do = (rng.standard_normal((1, H, S, D)).astype(ml_dtypes.bfloat16)
                   for _ in range(4))
    o, dq, dk, dv = (np.full((1, H, S, D), np.nan, ml_dtypes.bfloat16) for _ in range(4))
    lse = np.full((1, H, S), np.nan, np.float32)
    st = tuple(s // q.itemsize for s in q.strides[:3])
    scale = 0.125
    run_compiled("fwd", causal, S, H, D,
                 (q, k, v, o, lse, scale * fa.LOG2E, H, S, *st * 4), arch)
    delta = (o.astype(np.float32) * do.astype(np.float32)).sum(-1)
    run_compiled("dkdv", causal, S, H, D, (q, k, v, do, dk, dv, lse, delta, scale,
                                           scale * fa.LOG2E, H, S, *st * 6),
                 arch)
    run_compiled("dq", causal, S, H, D, (q, k, v, do, dq, lse, delta, scale,
                                         scale * fa.LOG2E, H, S, *st * 5),
                 arch)
    q64, k64, v64, do64 = (x.astype(np.float64) for x in (q, k, v, do))
    scores = q64 @ k64.swapaxes(-1, -2) * scale
    if causal:
        scores = np.where(np.tril(np.ones((S, S), bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    ref_lse = np.log(p.sum(-1)) + scores.max(-1)
    p /= p.sum(-1, keepdims=True)
    dp = do64 @ v64.swapaxes(-1, -2)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    refs = {"o": (o, p @ v64), "dq": (dq, ds @ k64 * scale),
            "dk": (dk, ds.swapaxes(-1, -2) @ q64 * scale), "dv": (dv, p.swapaxes(-1, -2) @ do64)}
    for name, (got, ref) in refs.items():
        got = got.astype(np.float64)
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-2, name
    assert np.abs(lse - ref_lse * fa.LOG2E).max() < 1e-3 * np.abs(ref_lse).max() + 1e-6


def test_dkdv_reads_its_rows_of_scalars_from_rings():
    # lse and delta (BLOCK_M fp32 per step) are copied by cp.async a step ahead, like Q and
    # dO, and read from their rings straight in the layout of the dK/dV products' columns: no
    # global load waited for and no conversion through shared memory (two barriers) per step.
    # Measured on an H200 (benchmarks/attention.py --quick): backward at D = 128 went from
    # 0.96-1.06x to 1.05-1.16x SDPA flash.
    kernel, (block_m, *_) = compile_attention("dkdv", 128, "fp16", False, "sm_90a")
    tgir = kernel.asm["tgir"]
    rings = re.findall(r"(%\d+) = local_alloc .*: \(\) -> tensor<2x" + str(block_m) + r"xf32,",
                       tgir)
    # lse and delta of the unmasked loop (the masked one reads lse past S as +inf, which a
    # zero-filling copy cannot: only its delta gets a ring)
    assert len(rings) == 3, rings
    unmasked = tgir[tgir.rindex(" = for "):]
    unmasked = unmasked[:unmasked.index("\n    }")]
    for ring in rings[1:]:
        assert re.search(r"local_load " + ring + r", %\d+ : .* -> tensor<" + str(block_m) +
                         r"xf32, #slice", unmasked)
    assert not re.search(r"convert_layout [^\n]*scratch_offset", unmasked)
    # One barrier per step; two with products in flight across steps (the copies wait behind
    # a second one for the previous step's products: docs/perf/wgmma_across_iterations.md).
    assert unmasked.count("barrier") == (2 if knobs.wgmma_pipeline else 1)
    assert not re.search(r" = load ", unmasked)
