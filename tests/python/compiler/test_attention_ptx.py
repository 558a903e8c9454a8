"""The fused-attention tutorial's forward kernel through every stage for sm_80 and sm_90a, with
the tutorial's own per-head-dim configs: both products on mma.sync, exp2 as ex2.approx, P kept
in registers (no shared-memory round trip between the dots) and ptxas reporting zero spills.
The compiled (pipelined) IR run by the interpreter matches a float64 reference."""
import re

import ml_dtypes
import numpy as np
import pytest
from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.testing.tutorials import load_tutorial_section

DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}


@pytest.fixture(scope="module")
def tutorial():
    # The kernel, CONFIGS and the wrapper only: the tutorial runs its checks when imported.
    return load_tutorial_section("06-fused-attention.py", "LOG2E =",
                                 "# %% [markdown]\n# ## Correctness")


def compile_forward(tutorial, D, causal, arch, dtype="fp16", S=1024, H=2):
    block_m, block_n, num_warps, num_stages = tutorial.CONFIGS[D]
    x = np.zeros((1, H, S, D), DTYPES[dtype])
    lse = np.zeros((1, H, S), np.float32)
    st = tuple(s // x.itemsize for s in x.strides[:3])
    kernel = tutorial.attention_fwd_kernel.compile(
        x, x, x, x, lse, 0.125 * tutorial.LOG2E, H, S, *st, *st, *st, *st,
        D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
        num_warps=num_warps, num_stages=num_stages, arch=arch)
    return kernel, (block_m, block_n, num_warps, num_stages)


def count(ptx: str, pattern: str) -> int:
    return len(re.findall(pattern, ptx))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_on_tensor_cores_without_spills(tutorial, arch, D, causal):
    kernel, (block_m, block_n, num_warps, _) = compile_forward(tutorial, D, causal, arch)
    ptx = kernel.asm["ptx"]
    # Per loop iteration: Q Kᵀ is BLOCK_M x BLOCK_N x D and P V is BLOCK_M x D x BLOCK_N, each
    # m16n8k16 instruction covers 16 x 8 x 16, shared by num_warps warps (32 lanes each).
    mma = count(ptx, r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32")
    assert mma == 2 * block_m * block_n * D // (16 * 8 * 16) // num_warps
    assert count(ptx, r"ex2\.approx") > 0
    assert count(ptx, r"ldmatrix\.sync\.aligned") > 0
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    report = ptxas.assemble(ptx, arch).report
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, report
    assert kernel.metadata["spill_stores"] == 0


@pytest.mark.parametrize("D", [16, 32])
def test_small_head_dims_compile(tutorial, D):
    kernel, _ = compile_forward(tutorial, D, True, "sm_80")
    assert count(kernel.asm["ptx"], r"mma\.sync\.aligned\.m16n8k16") > 0
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0


@pytest.mark.parametrize("causal", [False, True])
def test_compiled_ir_runs_in_the_interpreter(tutorial, causal):
    # The tgir stage (layouts, pipelined K/V loads) computes attention: S = 80 is a multiple of
    # 16 (the specialization) but not of the blocks.
    S, H, D = 80, 2, 64
    kernel, (block_m, *_) = compile_forward(tutorial, D, causal, "sm_80", dtype="bf16", S=S, H=H)
    module = ir.parse_module(kernel.asm["tgir"])
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, H, S, D)).astype(ml_dtypes.bfloat16) for _ in range(3))
    o = np.full((1, H, S, D), np.nan, ml_dtypes.bfloat16)
    lse = np.full((1, H, S), np.nan, np.float32)
    st = tuple(s // q.itemsize for s in q.strides[:3])
    interpreter.run(module, grid=((S + block_m - 1) // block_m, H),
                    args=[q, k, v, o, lse, 0.125 * tutorial.LOG2E, H, S, *st, *st, *st, *st])
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    scores = np.einsum("bhid,bhjd->bhij", q64, k64) * 0.125
    if causal:
        scores = np.where(np.tril(np.ones((S, S), bool)), scores, -np.inf)
    m = scores.max(-1, keepdims=True)
    e = np.exp(scores - m)
    ref = np.einsum("bhij,bhjd->bhid", e / e.sum(-1, keepdims=True), v64)
    ref_lse = (m[..., 0] + np.log(e.sum(-1))) * tutorial.LOG2E
    out = o.astype(np.float64)
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-2
    assert np.abs(lse - ref_lse).max() < 1e-3 * np.abs(ref_lse).max()
