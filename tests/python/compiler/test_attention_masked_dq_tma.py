"""The masked-attention backward's dQ kernel through the TMA (TMA=True: k and v as (B, Hkv, Sk,
D) host descriptors read at the live lists' rows, as the forward's; test_attention_masked_tma.py
has the forward): for sm_90a without a GPU, which loops copy K and V with
cp.async.bulk.tensor.4d for each mask / bias layout, ptxas spills, the pipelined IR in the
interpreter against float64 dQ on ragged lengths with NaN rows past Sk in every K/V head, and
the host's choice in attention_masked_backward. docs/perf/masked_attention.md, "TMA".
"""
import re

import ml_dtypes
import numpy as np
import pytest
from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.config import knobs
from tessera.tools.tensor_descriptor import TensorDescriptor
import tessera.ops.flash_attention as fa
import tessera.ops.masked_attention as ma
from tessera.ops.flash_attention.configs import tma_path
from tessera.ops.flash_attention.forward import head_descriptors
from tessera.ops.masked_attention import backward as mb
from tessera.ops.masked_attention.blocks import layout_of, masked_candidates
from tessera.ops.masked_attention.forward import prepare

from test_attention_masked_tma import KEYS, LAYOUTS, ROWS, inputs, loops, tma_loops


@pytest.fixture(autouse=True)
def tma_wherever_allowed():
    with knobs.scope(attention_tma="on"):
        yield


def dq_arguments(q, k, v, do, dq, lse, delta, mask, bias, causal, scale, block_n, tma=True):
    """attention_masked_bwd_dq_kernel's runtime arguments as attention_masked_backward passes
    them, k and v as host descriptors of blocks BLOCK_N."""
    st = lambda x: tuple(s // x.itemsize for s in x.strides[:3])  # noqa: E731
    with knobs.scope(interpret=True):
        mask_arg, bias_arg, lists, NQ, NK, lb, lh, bs, ms = prepare(q, k, mask, bias, causal)
    kd, vd = head_descriptors(k, v, block_m=block_n, block_n=block_n) if tma else (k, v)
    H, Sq, Sk = q.shape[1], q.shape[2], k.shape[2]
    return (q, kd, vd, do, dq, lse, delta, bias_arg, mask_arg, *lists, scale, scale * fa.LOG2E,
            H, H // k.shape[1], Sq, Sk, NQ, NK, lb, lh, *st(q), *st(k), *st(v), *st(do),
            *st(dq), *bs, *ms)


def compile_dq(args, D, has_mask, has_bias, causal, config, tma=True):
    block_m, block_n, num_warps, num_stages = config
    return ma.attention_masked_bwd_dq_kernel.compile(
        *args, D=D, SUPER=ma.SUPER, CAUSAL=causal, HAS_MASK=has_mask, HAS_BIAS=has_bias,
        RELOAD=False, TMA=tma, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps,
        num_stages=num_stages, arch="sm_90a")


@pytest.mark.parametrize("has_mask, has_bias", [(0, 0), (0, KEYS), (ROWS, KEYS), (KEYS, KEYS)],
                         ids=lambda x: LAYOUTS[x])
@pytest.mark.parametrize("D", [64, 128])
def test_dq_loops_copy_by_tma_spilling_no_more_than_the_pointer_path(D, has_mask, has_bias):
    rng = np.random.default_rng(D)
    q, k, v, mask, bias = inputs(rng, 1, 2, 2, 256, D, np.float16, has_mask, has_bias)
    lse = np.zeros(q.shape[:3], np.float32)
    for index, config in enumerate(masked_candidates("dq", q, "sm_90a")):
        kernels = [compile_dq(dq_arguments(q, k, v, q, q, lse, lse, mask, bias, False, 0.1,
                                           config[1], tma), D, has_mask, has_bias, False,
                              config, tma) for tma in (False, True)]
        ptx, tgir = kernels[1].asm["ptx"], kernels[1].asm["tgir"]
        assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx)) == 2
        assert "cp.async.bulk.tensor.4d" in ptx and "global_scratch_size" not in (
            kernels[1].metadata)
        rows = ((has_bias == KEYS), (has_bias == KEYS) + (has_mask == KEYS))
        for body, tma, row_count in zip(loops(tgir), tma_loops(has_mask, has_bias), rows):
            if tma:  # a 1-D key row may ride beside the tiles by cp.async (a mixed TMA loop)
                assert body.count("tma_load") == 2 and body.count("async_copy") <= row_count
                assert body.count("mbarrier_wait") == 2 and "mbarrier_arrive" in body
            else:
                assert "tma_load" not in body and body.count("async_copy") >= 2
        if ptxas.find_ptxas() is None:
            pytest.skip("ptxas not found: PTX not assembled")
        spills = [kernel.metadata["spill_stores"] for kernel in kernels]
        # The default spills nothing; the others no more than the pointer path (the 128 x 128
        # tile with a mask tile and a key bias spills 80-84 bytes either way at D = 64).
        assert spills[1] <= (0 if index == 0 else spills[0]), (config, spills)


def reference_dq(q, k, v, do, mask, bias, causal, scale):
    """dQ, lse (base 2) and Δ = rowsum(dO ⊙ O) in float64 (rows seeing no key: 0, +inf, 0)."""
    G = q.shape[1] // k.shape[1]
    q64, k64, v64, do64 = (x.astype(np.float64) for x in (q, np.repeat(k, G, 1),
                                                         np.repeat(v, G, 1), do))
    S = q.shape[2]
    s = q64 @ k64.swapaxes(-1, -2) * scale
    if bias is not None:
        s = s + bias.astype(np.float64)
    keep = np.ones((S, S), bool) if mask is None else np.broadcast_to(mask, s.shape)
    if causal:
        keep = keep & np.tril(np.ones((S, S), bool))
    s = np.where(keep, s, -np.inf)
    top = s.max(-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    total = e.sum(-1, keepdims=True)
    p = e / np.where(total > 0, total, 1)
    o = p @ v64
    delta = (o * do64).sum(-1)
    ds = p * (do64 @ v64.swapaxes(-1, -2) - delta[..., None])
    with np.errstate(divide="ignore"):
        lse = np.where(total[..., 0] > 0, (np.log(total[..., 0]) + top[..., 0]) * fa.LOG2E,
                       np.inf)
    return ds @ k64 * scale, lse, delta


@pytest.mark.parametrize("S, D, has_mask, has_bias, causal, G",
                         [(77, 64, 0, 0, True, 2), (200, 128, ROWS, KEYS, False, 1),
                          (150, 64, KEYS, KEYS, True, 2), (200, 64, ROWS, 0, True, 1)])
def test_pipelined_dq_tma_ir_runs_in_the_interpreter(S, D, has_mask, has_bias, causal, G):
    rng = np.random.default_rng(S + D)
    Hkv, scale = 2, 0.1
    q, k, v, mask, bias = inputs(rng, 1, Hkv * G, Hkv, S, D, ml_dtypes.bfloat16, has_mask,
                                 has_bias, pad=16)
    do = rng.standard_normal(q.shape).astype(q.dtype)
    ref, lse, delta = reference_dq(q, k, v, do, mask, bias, causal, scale)
    lse, delta = lse.astype(np.float32), delta.astype(np.float32)
    config = masked_candidates("dq", q, "sm_90a")[0]
    dq = np.full(q.shape, np.nan, q.dtype)
    args = dq_arguments(q, k, v, do, dq, lse, delta, mask, bias, causal, scale, config[1])
    kernel = compile_dq(args, D, layout_of(mask), layout_of(bias), causal, config)
    assert loops(kernel.asm["tgir"])[0].count("tma_load") == 2  # the full tiles' loop
    flat = []
    for arg in args:
        flat += ([arg.base, *arg.shape, *arg.strides, arg] if isinstance(arg, TensorDescriptor)
                 else [arg])
    interpreter.run(ir.parse_module(kernel.asm["tgir"]), grid=(-(-S // config[0]), Hkv * G),
                    args=flat)
    got = dq.astype(np.float64)
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - ref) <= 2e-2 * np.linalg.norm(ref)


def test_the_backward_passes_descriptors_to_dq_where_the_rule_holds(monkeypatch):
    # attention_masked_backward in the interpreter with the sm_90a rule: the dQ launch gets
    # k and v as descriptors and TMA=True (not with a per-element bias), dK/dV plain tensors;
    # the gradients match the pointer path's.
    launches = []
    tuned = mb._tuned_dq

    class Recording:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                launches.append((args, kwargs))
                return tuned[grid](*args, **kwargs)
            return launch

    monkeypatch.setattr(mb, "_tuned_dq", Recording())
    monkeypatch.setattr(mb, "tma_path", lambda *tensors, kernel: tma_path(
        *tensors, kernel=kernel, arch="sm_90a"))
    rng = np.random.default_rng(9)
    for has_bias in (KEYS, ROWS):
        q, k, v, mask, bias = inputs(rng, 1, 4, 2, 150, 64, np.float16, ROWS, has_bias, pad=8)
        do = rng.standard_normal(q.shape).astype(q.dtype)
        with knobs.scope(interpret=True):
            o, lse = ma.attention_masked_forward(q, k, v, mask, bias, True, 0.1)
            grads = ma.attention_masked_backward(q, k, v, o, lse, do, mask, bias, True, 0.1)
            with knobs.scope(attention_tma="off"):
                plain = ma.attention_masked_backward(q, k, v, o, lse, do, mask, bias, True, 0.1)
        (args, kwargs), tma = launches[-2], has_bias != ROWS
        assert kwargs["TMA"] == tma and isinstance(args[1], TensorDescriptor) == tma
        assert not launches[-1][1]["TMA"]
        for got, want in zip(grads[:3], plain[:3]):
            assert np.array_equal(got, want)
