"""TESSERA_WGMMA_INNER_KEEP (knobs.wgmma_inner_keep, with wgmma_pipeline): the bar.sync inside
an op that stages through shared memory keeps in flight the wgmma products whose operands
nothing written after it (before the next barrier) may overlap, as membar's own barriers do;
membar gives the op `inner_wgmma_pending`, the wgmma_waits pass its `inner_wgmma_wait`.

Checked on the CPU with the masked dK/dV kernel with a bias per element: each step reduces
dbias across warps through shared memory while the step's products run. With the knob that
reduction's barrier leaves them in flight; off, it waits for all of them first. Both ways: no
write into what an in-flight product reads (test_wgmma_hazards, independent of membar),
ptxas without spills or serialized wgmma. And the attention dK/dV kernel that also computes
dQ (`ATOMIC_DQ`, whose dS staging kept its dV and dK products in flight this way) in the
interpreter, its compiled IR against float64 on a ragged length.
"""
import re

import numpy as np
import pytest
import tessera.ops.flash_attention as fa
from tessera import interpreter
from tessera._tessera import ir
from tessera.config import knobs
from tessera.ops.flash_attention import backward as bwd

from test_attention_masked_ptx import arguments, case, compile_masked
from test_wgmma_pipeline_ptx import assert_no_hazard, assert_no_spills


def test_the_knob_is_part_of_the_cache_key_and_on_by_default():
    from tessera.launch_options import CODE_KNOBS
    assert "wgmma_inner_keep" in CODE_KNOBS and knobs.wgmma_inner_keep is True


def compile_atomic_dkdv(config, keep: bool, S=1024, H=2, D=64):
    x = np.zeros((1, H, S, D), np.float16)
    lse = np.zeros((1, H, S), np.float32)
    acc = np.zeros((1, H, S, D), np.float32)
    st = tuple(s // x.itemsize for s in x.strides[:3])
    block_m, block_n, num_warps, num_stages = config
    with knobs.scope(attention_tma="on", wgmma_inner_keep=keep):
        return bwd.attention_bwd_dkdv_kernel.compile(
            x, x, x, x, x, x, lse, lse, 0.125, 0.125 * fa.LOG2E, H, S, *st * 6, D=D,
            BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=False, RELOAD=False, TMA=True,
            dq_acc_ptr=acc, ATOMIC_DQ=True, num_warps=num_warps, num_stages=num_stages,
            arch="sm_90a")


def inner_waits(tgir: str) -> list:
    """The inner_wgmma_wait of each op with a barrier of its own in the compiled IR."""
    return [int(w) for w in re.findall(r"inner_wgmma_wait = (\d+)", tgir)]


@pytest.mark.parametrize("D", [64, 128])
def test_dbias_reduction_keeps_the_products_in_flight(D):
    # The masked dK/dV kernel with a bias per element reduces dbias across warps at each
    # step (a reduction through shared memory): its barrier leaves the step's products in
    # flight with the knob, waits for all of them without.
    rng = np.random.default_rng(D)
    q, k, v, do, mask, bias = case(rng, 256, D)
    lse = np.zeros(q.shape[:3], np.float32)
    dbias = np.zeros(bias.shape, np.float32)
    args = arguments("dkdv", q, k, v, q, lse, lse, do, (q, q, q), mask, bias, dbias, True, 0.1)
    kernels = {}
    for keep in (True, False):
        with knobs.scope(wgmma_inner_keep=keep):
            kernels[keep], _ = compile_masked("dkdv", args, D, True, "sm_90a", dbias_mode=2)
    assert max(inner_waits(kernels[True].asm["tgir"])) >= 1
    assert "inner_wgmma_pending" in kernels[True].asm["tgir"]
    assert set(inner_waits(kernels[False].asm["tgir"])) <= {0}
    assert "inner_wgmma_pending" not in kernels[False].asm["tgir"]
    for kernel in kernels.values():
        assert_no_hazard(kernel.asm["tgir"])
        assert_no_spills(kernel)


def test_compiled_ir_runs_in_the_interpreter():
    # The compiled IR (waits and barriers as the GPU gets them) against float64: dQ, dK, dV
    # of a ragged length, many key programs adding into dQ.
    rng = np.random.default_rng()
    S, H, D = 200, 2, 64
    config = fa.WGMMA_CONFIGS["dkdv"][64][0]
    q, k, v, do = (rng.standard_normal((1, H, S, D)).astype(np.float16) for _ in range(4))
    scale = D ** -0.5
    q64, k64, v64, do64 = (t.astype(np.float64) for t in (q, k, v, do))
    s = q64 @ k64.transpose(0, 1, 3, 2) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    lse = np.log(p.sum(-1)) + s.max(-1)
    p /= p.sum(-1, keepdims=True)
    o = p @ v64
    dp = do64 @ v64.transpose(0, 1, 3, 2)
    ds = p * (dp - (do64 * o).sum(-1, keepdims=True))
    want = (ds @ k64, ds.transpose(0, 1, 3, 2) @ q64 * scale, p.transpose(0, 1, 3, 2) @ do64)
    lse2 = (lse / np.log(2)).astype(np.float32)
    delta = (do64 * o).sum(-1).astype(np.float32)
    dk, dv = np.zeros_like(k), np.zeros_like(v)
    acc = np.zeros((1, H, S, D), np.float32)
    st = tuple(s // q.itemsize for s in q.strides[:3])
    kernel = compile_atomic_dkdv(config, True, S=S, H=H, D=D)
    module = ir.parse_module(kernel.asm["tgir"])
    args = [q, k, v, do, dk, dv, lse2, delta, scale, scale * fa.LOG2E, H, S, *st * 6]
    interpreter.run(module, grid=(-(-S // config[1]), H), args=args + [acc])
    got = (acc * 1.0, dk.astype(np.float64), dv.astype(np.float64))
    for g, w in zip(got, want):
        rel = np.linalg.norm(g - w) / np.linalg.norm(w)
        assert rel < 2e-2, rel
