"""The attention forward's OVERLAP schedule (P V of one tile issued right after Q Kᵀ of the next,
the tile's P carried across the step; ops/flash_attention/forward.py,
attention_fwd_pipelined): the same results as the plain loop against float64 (interpreter,
ragged lengths, causal), and on sm_90a the product of Q Kᵀ waited for with P V still in flight
(wgmma.wait_group 1), both products one ping-pong turn under TESSERA_PINGPONG, no spills.
benchmarks/attention_schedules.py times it on the GPU."""
import re

import numpy as np
import pytest
import tessera
import tessera.ops.flash_attention as fa
from tessera.compiler import ptxas
from tessera.config import knobs
from tessera.ops.flash_attention.forward import head_descriptors
from tessera.report import static_arch


def reference(q, k, v, causal):
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k.astype(np.float64))
    s *= q.shape[-1] ** -0.5
    if causal:
        n = q.shape[2]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)


@pytest.mark.parametrize("S, D, causal", [(200, 64, False), (77, 32, True), (128, 64, True),
                                          (45, 16, False), (16, 32, False)])
@pytest.mark.parametrize("overlap", [False, True])
def test_overlap_matches_float64_in_the_interpreter(S, D, causal, overlap):
    rng = np.random.default_rng(S * D + causal)
    B, H, bm, bn = 1, 2, 32, 16
    q, k, v = (rng.standard_normal((B, H, S, D)).astype(np.float32) for _ in range(3))
    o = np.full_like(q, np.nan)
    lse = np.full((B, H, S), np.nan, np.float32)
    st = lambda x: tuple(s // 4 for s in x.strides[:3])  # noqa: E731
    with knobs.scope(interpret=True):
        fa.attention_fwd_kernel[(tessera.cdiv(S, bm), B * H)](
            q, k, v, o, lse, D ** -0.5 * fa.LOG2E, H, S, *st(q), *st(k), *st(v), *st(o), D=D,
            CAUSAL=causal, RELOAD=False, TMA=False, SPECIALIZE=False, OVERLAP=overlap,
            BLOCK_M=bm, BLOCK_N=bn, num_warps=4, num_stages=2)
    np.testing.assert_allclose(o, reference(q, k, v, causal), atol=3e-3, rtol=3e-3)


def compile_forward(D, config, overlap, causal=False, S=1024, H=2):
    x = np.zeros((1, H, S, D), np.float16)
    lse = np.zeros((1, H, S), np.float32)
    st = tuple(s // x.itemsize for s in x.strides[:3])
    bm, bn, warps, stages = config
    return fa.attention_fwd_kernel.compile(
        *head_descriptors(x, x, x, block_m=bm, block_n=bn), x, lse, 0.125 * fa.LOG2E, H, S,
        *st * 4, D=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, RELOAD=False, TMA=True,
        SPECIALIZE=False, OVERLAP=overlap, num_warps=warps, num_stages=stages, arch="sm_90a")


def loops(tgir: str) -> list:
    """The bodies of the `for` loops, innermost text included (4+ space indented IR)."""
    return [tgir[m.end():tgir.index("\n" + m.group(1) + "}", m.end())]
            for m in re.finditer(r"\n( +)[^\n]* = for [^\n]*\n", tgir)]


@pytest.mark.parametrize("D", [64, 128])
def test_q_k_waited_for_with_p_v_in_flight_and_one_turn_a_step(D):
    plain = compile_forward(D, (128, 128, 8, 2), overlap=False)
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+)", plain.asm["ptx"]) == ["0"] * 4
    kernel = compile_forward(D, (128, 128, 8, 2), overlap=True)
    assert "1" in re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+)", kernel.asm["ptx"])
    with knobs.scope(pingpong=True):
        turned = compile_forward(D, (128, 128, 8, 2), overlap=True)
    # The pipelined loop (the last) issues Q Kᵀ and P V in one turn; the masked loop two.
    last = loops(turned.asm["tgir"])[-1]
    assert last.count('warpgroup_turn {turn = "wait"}') == 1, last
    assert re.search(r'turn = "wait"[^\n]*\n[^\n]*= dot[^\n]*\n(?:[^\n]*\n){0,4}[^\n]*= dot'
                     r'[^\n]*\n[^\n]*turn = "pass"', last)
    if ptxas.find_ptxas() is not None:
        for compiled in (kernel, turned):
            assert compiled.metadata["spill_stores"] == 0


@pytest.mark.parametrize("dtype", [np.float16, "bf16"])
@pytest.mark.parametrize("causal", [False, True])
def test_overlap_tiles_compile_on_the_tma_without_spills(causal, dtype):
    # The autotuner times OVERLAP_TILES first on TMA launches: each must build, and spill
    # nothing (the untuned default is the first of them there).
    from test_attention_ptx import DTYPES
    dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
    for D, tiles in fa.OVERLAP_TILES["fwd"].items():
        x = np.zeros((1, 2, 1000, D), dtype)
        lse = np.zeros((1, 2, 1000), np.float32)
        st = tuple(s // x.itemsize for s in x.strides[:3])
        for bm, bn, warps, stages in tiles:
            kernel = fa.attention_fwd_kernel.compile(
                *head_descriptors(x, x, x, block_m=bm, block_n=bn), x, lse, 0.1, 2, 1000,
                *st * 4, D=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, RELOAD=False, TMA=True,
                SPECIALIZE=False, OVERLAP=True, num_warps=warps, num_stages=stages,
                arch="sm_90a")
            assert "wgmma.wait_group.sync.aligned 1" in kernel.asm["ptx"]
            if ptxas.find_ptxas() is not None:
                assert kernel.metadata["spill_stores"] == 0, (D, bm, bn, causal)


@pytest.mark.parametrize("tma, specialize", [(True, False), (True, True), (False, False)])
def test_the_tuner_tries_overlap_first_on_plain_tma_launches_only(tma, specialize):
    from tessera.ops.flash_attention.forward import _tuned_fwd
    x = np.zeros((1, 2, 1024, 128), np.float16)
    # The launch's first argument: the TMA variant's descriptor of q, else q.
    q = head_descriptors(x, x, x)[0] if tma else x
    token = static_arch.set("sm_90a")  # the arch of NumPy inputs (no GPU)
    try:
        kept = _tuned_fwd.prune_configs({"TMA": tma, "SPECIALIZE": specialize,
                                         "RELOAD": False}, {"q_ptr": q})
    finally:
        static_arch.reset(token)
    overlap = [c for c in kept if c.kwargs.get("OVERLAP")]
    if tma and not specialize:
        assert kept[:len(overlap)] == overlap and [
            (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages)
            for c in overlap] == fa.OVERLAP_TILES["fwd"][128]
    else:
        assert overlap == []
    assert len(kept) - len(overlap) == len(fa.candidates("fwd", x, "sm_90a"))
