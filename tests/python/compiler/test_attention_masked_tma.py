"""The masked-attention forward's TMA variant (TMA=True: k and v as (B, Hkv, Sk, D) host tensor
descriptors of blocks (1, 1, BLOCK_N, D), read at the live lists' run-time rows) for sm_90a
without a GPU: which of its two loops (full tiles, partial tiles) the pipeliner copies with
cp.async.bulk.tensor.4d for each mask / bias layout (a 2-D pointer load of a mask or bias tile
sends its loop back to cp.async), ptxas (CUDA 13) assembles every wgmma candidate without
spills, the pipelined IR runs in the interpreter against float64 on ragged lengths with NaN
rows between the heads (the TMA's zero fill bounds each head), the kernel itself with TMA=True
runs in the interpreter, and the host rule (flash_attention.configs.tma_path, its
"masked_fwd" entry). docs/perf/masked_attention.md, "TMA".
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
from tessera.ops.flash_attention.configs import TMA_FASTER_HEAD_DIMS, tma_path
from tessera.ops.flash_attention.forward import head_descriptors
from tessera.ops.masked_attention import forward as mf
from tessera.ops.masked_attention.forward import prepare

ROWS, KEYS = ma.ROWS.value, ma.KEYS.value
LAYOUTS = {0: "none", ROWS: "rows", KEYS: "keys"}


@pytest.fixture(autouse=True)
def tma_wherever_allowed():
    """The kernel and rule tests pin TESSERA_ATTENTION_TMA=on: `auto` takes the masked
    forward's TMA variant nowhere until it is measured (TMA_FASTER_HEAD_DIMS)."""
    with knobs.scope(attention_tma="on"):
        yield


def loops(tgir: str) -> list:
    """The bodies of the func's top-level `for` loops (4-space indented IR): full, partial."""
    bodies = []
    for match in re.finditer(r"\n    [^\n]* = for [^\n]*\n", tgir):
        end = tgir.index("\n    }", match.end())
        bodies.append(tgir[match.end():end])
    return bodies


def inputs(rng, B, H, Hkv, S, D, dtype, has_mask, has_bias, pad=0):
    """q (B, H, S, D); k, v (B, Hkv, S, D) inside buffers whose rows past S are NaN (`pad`
    of them per head); a mask / bias of layout has_mask / has_bias (ROWS: (1, 1, S, S) mask
    and (1, H, S, S) bias, KEYS: (B, 1, 1, S) padding mask and (1, H, 1, S) key bias)."""
    q = rng.standard_normal((B, H, S, D)).astype(dtype)
    kv = []
    for _ in range(2):
        buf = np.full((B, Hkv, S + pad, D), np.nan, dtype)
        buf[:, :, :S] = rng.standard_normal((B, Hkv, S, D)).astype(dtype)
        kv.append(buf[:, :, :S])
    mask = bias = None
    if has_mask == ROWS:  # some 128-blocks dead, the others element-masked
        blocks = rng.random((-(-S // 128),) * 2) < 0.7
        blocks[:, 0] = True
        mask = (np.repeat(np.repeat(blocks, 128, 0), 128, 1)[:S, :S]
                & (rng.random((S, S)) < 0.8))[None, None]
    elif has_mask == KEYS:
        mask = np.ones((B, 1, 1, S), bool)
        mask[:, :, :, S * 2 // 3:] = False  # padding keys
        mask[:, :, :, 0] = True
    if has_bias == ROWS:
        bias = rng.standard_normal((1, H, S, S)).astype(dtype)
    elif has_bias == KEYS:
        bias = rng.standard_normal((1, H, 1, S)).astype(dtype)
    return q, kv[0], kv[1], mask, bias


def arguments(q, k, v, o, lse, mask, bias, causal, scale, config, tma=True):
    """attention_masked_fwd_kernel's runtime arguments as forward_launch passes them, k and
    v as host descriptors of config's BLOCK_N."""
    st = lambda x: tuple(s // x.itemsize for s in x.strides[:3])  # noqa: E731
    with knobs.scope(interpret=True):  # the live-block table, on the CPU
        mask_arg, bias_arg, lists, NQ, NK, lb, lh, bs, ms = prepare(q, k, mask, bias, causal)
    kd, vd = head_descriptors(k, v, block_m=config[1], block_n=config[1]) if tma else (k, v)
    H, Sq, Sk = q.shape[1], q.shape[2], k.shape[2]
    return (q, kd, vd, bias_arg, mask_arg, o, lse, *lists, scale * fa.LOG2E, H,
            H // k.shape[1], Sq, Sk, NQ, NK, lb, lh, *st(q), *st(k), *st(v), *st(o), *bs, *ms)


def compile_tma(D, has_mask, has_bias, causal, config, dtype=np.float16, S=256, H=2):
    rng = np.random.default_rng(0)
    q, k, v, mask, bias = inputs(rng, 1, H, H, S, D, dtype, has_mask, has_bias)
    lse = np.zeros(q.shape[:3], np.float32)
    args = arguments(q, k, v, q, lse, mask, bias, causal, 0.1, config)
    options = ma.blocks.launch_options(config)  # a fifth element: the register cap
    return ma.attention_masked_fwd_kernel.compile(
        *args, D=D, SUPER=ma.SUPER, CAUSAL=causal, HAS_MASK=has_mask, HAS_BIAS=has_bias,
        RELOAD=False, TMA=True, arch="sm_90a", **options)


def tma_loops(has_mask, has_bias) -> tuple:
    """Which loops (full, partial) copy K and V by TMA: those holding no 2-D pointer load. A
    per-element bias is a 2-D tile in both; a per-element mask in the partial one; a key bias
    and a padding mask are 1-D rows (KEY_ROW) or plain loads, which a TMA loop may hold."""
    return has_bias != ROWS, has_bias != ROWS and has_mask != ROWS


def check_kernel(kernel, has_mask, has_bias, strict=True):
    """The loops tma_loops names copy K and V by TMA; `strict`: the others by cp.async (on
    ragged lengths a mask or bias tile may not be pipelinable at all, read in the loop: its
    loop then takes the TMA too)."""
    ptx, tgir = kernel.asm["ptx"], kernel.asm["tgir"]
    full, partial = loops(tgir)
    expected = tma_loops(has_mask, has_bias)
    # Two maps (K, V) the host encoded, kernel parameters; the kernel writes none.
    assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx)) == 2
    assert "global_scratch_size" not in kernel.metadata and "tensormap.replace" not in ptx
    assert "cp.async.bulk.tensor.4d" in ptx or not any(expected)
    for body, tma, rows in zip((full, partial), expected,
                               ((has_bias == KEYS), (has_bias == KEYS) + (has_mask == KEYS))):
        if not tma and not strict:
            continue
        if tma:  # K and V by TMA, waited on mbarriers, no cp.async and no barrier per step
            assert body.count("tma_load") == 2 and body.count("mbarrier_wait") == 2
            assert "mbarrier_arrive" in body and "async_copy" not in body
            # ...but where a 1-D key row (bias, padding mask) is converted into the scores'
            # layout through shared memory (the 4-warp 64 x 128 tile): one per row.
            assert len(re.findall(r"barrier [{:]", body)) <= rows
        else:  # the cp.async plan, K and V among its copies
            assert "tma_load" not in body and body.count("async_copy") >= 2


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("has_mask, has_bias", [(0, 0), (0, KEYS), (ROWS, 0), (ROWS, KEYS),
                                                (KEYS, KEYS), (KEYS, 0)],
                         ids=lambda x: LAYOUTS[x])
@pytest.mark.parametrize("D", [64, 128])
def test_loops_without_2d_pointer_loads_copy_by_tma_without_spills(D, has_mask, has_bias,
                                                                     causal):
    # Every candidate of a TMA launch: the dense tiles and the capped ones put first.
    q = np.zeros((1, 2, 256, D), np.float16)
    tiles = ma.blocks.masked_candidates("fwd", q, "sm_90a", tma=True)
    assert set(fa.WGMMA_CONFIGS["fwd"][D]) <= set(tiles)
    for config in tiles:
        kernel = compile_tma(D, has_mask, has_bias, causal, config)
        check_kernel(kernel, has_mask, has_bias)
        if ptxas.find_ptxas() is None:
            pytest.skip("ptxas not found: PTX not assembled")
        assert kernel.metadata["spill_stores"] == 0, (D, has_mask, has_bias, causal, config)
        if len(config) > 4:  # the cap holds: two 8-warp blocks per SM at 128 registers
            assert kernel.metadata["registers"] <= config[4], config


@pytest.mark.parametrize("has_mask", [0, ROWS, KEYS], ids=lambda x: LAYOUTS[x])
def test_a_per_element_bias_keeps_both_loops_on_cp_async(has_mask):
    # The (Sq, Sk) bias tile is a 2-D pointer load in both loops: the TMA plan rejects them,
    # the descriptor loads drop their maps (masked loads) and the cp.async plan copies all.
    config = fa.WGMMA_CONFIGS["fwd"][64][0]
    kernel = compile_tma(64, has_mask, ROWS, False, config, dtype=ml_dtypes.bfloat16)
    check_kernel(kernel, has_mask, ROWS)
    assert "cp.async.cg" in kernel.asm["ptx"]
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0


def reference(q, k, v, mask, bias, causal, scale):
    """O and the base-2 log-sum-exp in float64 (rows that see no key: O 0, lse +inf)."""
    G = q.shape[1] // k.shape[1]
    q64, k64, v64 = (x.astype(np.float64) for x in (q, np.repeat(k, G, 1), np.repeat(v, G, 1)))
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
    p = np.exp(s - top)
    total = p.sum(-1, keepdims=True)
    o = np.where(total > 0, (p / np.where(total > 0, total, 1)) @ v64, 0.0)
    with np.errstate(divide="ignore"):
        lse = np.where(total[..., 0] > 0, (np.log(total[..., 0]) + top[..., 0]) * fa.LOG2E,
                       np.inf)
    return o, lse


def check(o, lse, q, k, v, mask, bias, causal, scale):
    ref_o, ref_lse = reference(q, k, v, mask, bias, causal, scale)
    o = o.astype(np.float64)
    assert np.isfinite(o).all()
    assert np.linalg.norm(o - ref_o) <= 1e-2 * np.linalg.norm(ref_o)
    finite = np.isfinite(ref_lse)
    assert (np.isinf(lse) == ~finite).all()
    assert np.abs(lse[finite] - ref_lse[finite]).max() < 1e-3 * np.abs(ref_lse).max() + 1e-4


# Every mask / bias layout the ops tests cover, causal and not, GQA, S crossing a 128-block
# and a BLOCK_N (ragged), D 64 and 128.
CASES = [(77, 64, 0, 0, True, 2), (200, 128, ROWS, KEYS, False, 1),
         (200, 64, ROWS, KEYS, True, 2), (150, 64, KEYS, KEYS, False, 1),
         (130, 128, KEYS, 0, True, 2), (200, 64, ROWS, 0, False, 1),
         (140, 64, 0, ROWS, True, 1)]


@pytest.mark.parametrize("S, D, has_mask, has_bias, causal, G", CASES)
def test_pipelined_tma_ir_runs_in_the_interpreter(S, D, has_mask, has_bias, causal, G):
    # K and V sit in larger buffers whose rows past S are NaN: a tile crossing S that read
    # them (or the next head's rows) instead of the descriptor's zero fill would make P V NaN.
    rng = np.random.default_rng(S + D)
    B, Hkv, scale = 1, 2, 0.1
    q, k, v, mask, bias = inputs(rng, B, Hkv * G, Hkv, S, D, ml_dtypes.bfloat16, has_mask,
                                 has_bias, pad=16)
    assert tma_path(k, v, arch="sm_90a", kernel="masked_fwd")
    config = ma.blocks.masked_candidates("fwd", q, "sm_90a")[0]
    o = np.full(q.shape, np.nan, q.dtype)
    lse = np.full(q.shape[:3], np.nan, np.float32)
    args = arguments(q, k, v, o, lse, mask, bias, causal, scale, config)
    block_m, block_n, num_warps, num_stages = config
    kernel = ma.attention_masked_fwd_kernel.compile(
        *args, D=D, SUPER=ma.SUPER, CAUSAL=causal, HAS_MASK=ma.blocks.layout_of(mask),
        HAS_BIAS=ma.blocks.layout_of(bias), RELOAD=False, TMA=True, BLOCK_M=block_m,
        BLOCK_N=block_n, num_warps=num_warps, num_stages=num_stages, arch="sm_90a")
    check_kernel(kernel, ma.blocks.layout_of(mask), ma.blocks.layout_of(bias), strict=False)
    flat = []
    for arg in args:  # a descriptor argument expands to base, shape, strides and its map
        flat += ([arg.base, *arg.shape, *arg.strides, arg] if isinstance(arg, TensorDescriptor)
                 else [arg])
    interpreter.run(ir.parse_module(kernel.asm["tgir"]), grid=(-(-S // block_m), B * Hkv * G),
                    args=flat)
    check(o, lse, q, k, v, mask, bias, causal, scale)


@pytest.mark.parametrize("S, D, has_mask, has_bias, causal, G",
                         [(77, 64, ROWS, KEYS, True, 2), (130, 128, KEYS, KEYS, False, 1)])
def test_forward_with_the_tma_variant_runs_in_the_interpreter(monkeypatch, S, D, has_mask,
                                                              has_bias, causal, G):
    # attention_masked_forward with the host rule forced: k and v as descriptors whose blocks
    # each config's pre_hook sets, TMA=True (descriptor loads: their masked-load meaning).
    monkeypatch.setattr(mf, "tma_path", lambda *tensors, kernel: kernel == "masked_fwd")
    rng = np.random.default_rng(S)
    q, k, v, mask, bias = inputs(rng, 2, 2 * G, 2, S, D, np.float16, has_mask, has_bias,
                                 pad=8)
    lse = np.zeros(q.shape[:3], np.float32)
    with knobs.scope(interpret=True):
        grid, args, kwargs = mf.forward_launch(q, k, v, mask, bias, causal, 0.1, q, lse)
        assert kwargs["TMA"] and all(isinstance(a, TensorDescriptor) for a in args[1:3])
        o, lse = ma.attention_masked_forward(q, k, v, mask, bias, causal, 0.1)
    check(o, lse, q, k, v, mask, bias, causal, 0.1)


def test_the_host_rule_is_the_dense_forwards_with_its_own_entry():
    k = np.zeros((2, 3, 100, 64), np.float16)
    with knobs.scope(attention_tma="auto"):  # the head dims measured faster (configs.py)
        for D in (32, 64, 128):
            kd = np.zeros((2, 3, 100, D), np.float16)
            assert tma_path(kd, kd, arch="sm_90a", kernel="masked_fwd") == (
                D in TMA_FASTER_HEAD_DIMS["masked_fwd"])
        assert TMA_FASTER_HEAD_DIMS["masked_fwd"] == (64, 128)
    with knobs.scope(attention_tma="on"):
        assert tma_path(k, k, arch="sm_90a", kernel="masked_fwd")
        assert not tma_path(k, k, arch="sm_80", kernel="masked_fwd")
        assert not tma_path(k.astype(np.float32), arch="sm_90a", kernel="masked_fwd")
        strided = np.zeros((2, 3, 100, 68), np.float16)[..., :64]  # rows of 136 bytes
        assert not tma_path(k, strided, arch="sm_90a", kernel="masked_fwd")
        with knobs.scope(tma=False):
            assert not tma_path(k, k, arch="sm_90a", kernel="masked_fwd")
    with knobs.scope(attention_tma="off"):
        assert not tma_path(k, k, arch="sm_90a", kernel="masked_fwd")


def test_a_per_element_bias_takes_the_pointer_path(monkeypatch):
    # No loop of its kernel could take the TMA (test_a_per_element_bias_keeps_both_loops_on_
    # cp_async): the host passes plain k and v (no maps to encode, the C++ fast launch).
    monkeypatch.setattr(mf, "tma_path", lambda *tensors, kernel: tma_path(
        *tensors, kernel=kernel, arch="sm_90a"))
    rng = np.random.default_rng(5)
    for has_bias in (ROWS, KEYS, 0):
        q, k, v, mask, bias = inputs(rng, 1, 2, 2, 100, 64, np.float16, ROWS, has_bias)
        lse = np.zeros(q.shape[:3], np.float32)
        with knobs.scope(interpret=True):
            _, args, kwargs = mf.forward_launch(q, k, v, mask, bias, False, 0.1, q, lse)
        assert kwargs["TMA"] == (has_bias != ROWS)
        assert isinstance(args[1], TensorDescriptor) == (has_bias != ROWS)


def test_each_config_sets_the_key_descriptor_blocks():
    assert all(config.pre_hook is mf.key_blocks for config in mf._tuned_fwd.configs)
    x = np.zeros((2, 3, 100, 128), np.float16)
    descs = head_descriptors(x, x)
    mf.key_blocks({"k_ptr": descs[0], "v_ptr": descs[1], "BLOCK_N": 32})
    assert [d.block_shape for d in descs] == [[1, 1, 32, 128]] * 2
    mf.key_blocks({"k_ptr": x, "v_ptr": x, "BLOCK_N": 32})  # the pointer path: no-op


def test_a_tma_launch_tries_the_capped_tiles_first_and_the_tuner_avoids_spills():
    q = np.zeros((1, 2, 1024, 64), np.float16)
    first = ma.blocks.masked_candidates("fwd", q, "sm_90a", tma=True)[0]
    assert first == (128, 64, 8, 2, 128)
    assert ma.blocks.launch_options(first)["maxnreg"] == 128
    # the pointer path (and D = 128) keep the uncapped default first
    assert len(ma.blocks.masked_candidates("fwd", q, "sm_90a")[0]) == 4
    q128 = np.zeros((1, 2, 1024, 128), np.float16)
    assert len(ma.blocks.masked_candidates("fwd", q128, "sm_90a", tma=True)[0]) == 4
    # the short-walk tile goes last at D = 128 (tuned, never the untuned default)
    tiles = ma.blocks.masked_candidates("fwd", q128, "sm_90a", tma=True)
    assert tiles[-1] == (64, 64, 4, 2) and tiles[0] != (64, 64, 4, 2)
    assert (64, 64, 4, 2) not in ma.blocks.masked_candidates("fwd", q128, "sm_90a")
    # a capped tile spills at some ragged lengths (docs/perf/masked_attention.md): the
    # tuner times only the configs that spill nothing there
    assert ma.forward._tuned_fwd.spills == "avoid"
