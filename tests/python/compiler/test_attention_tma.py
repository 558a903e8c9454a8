"""The attention forward's TMA variant (TMA=True: (B, H, S, D) host tensor descriptors of
blocks (1, 1, BLOCK, D)) for sm_90a without a GPU: both loops copy K and V (and the masked
loop's Q) with cp.async.bulk.tensor.4d into rings waited on with mbarriers (no cp.async, no
maps written by the kernel, no scratch), ptxas (CUDA 13) assembles every wgmma candidate
config without spills, the pipelined IR (host maps, the TMA's zero fill past each head's S)
runs in the interpreter against float64 on ragged S with NaN rows between the heads, the plain
kernel with TMA=True runs in the interpreter, and the host picks the path from the target, the
knobs and the TMA's alignment rules. docs/perf/attention_tma.md.
"""
import re

import ml_dtypes
import numpy as np
import pytest
from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.config import knobs
from tessera.runtime import allocation
import tessera.ops.flash_attention as fa
from tessera.ops.flash_attention.configs import tma_path
from tessera.ops.flash_attention.forward import head_descriptors

DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}


@pytest.fixture(autouse=True)
def tma_wherever_allowed():
    """These tests pin the TMA kernel and its rules at every eligible head dim: the library's
    default (TESSERA_ATTENTION_TMA=auto) takes it only where it measured faster."""
    with knobs.scope(attention_tma="on"):
        yield


def test_auto_takes_the_tma_path_where_it_measured_faster_and_off_never():
    x64, x128 = (np.zeros((2, 3, 100, d), np.float16) for d in (64, 128))
    with knobs.scope(attention_tma="auto"):
        for D, x in ((64, x64), (128, x128)):
            assert tma_path(x, arch="sm_90a") == (D in fa.configs.TMA_FASTER_HEAD_DIMS["fwd"])
    with knobs.scope(attention_tma="off"):
        assert not tma_path(x128, arch="sm_90a") and not tma_path(x64, arch="sm_90a")
    assert tma_path(x64, arch="sm_90a") and tma_path(x128, arch="sm_90a")  # on


def compile_tma(D, dtype, causal, config, S=1024, H=2, st=None, specialize=False):
    x = np.zeros((1, H, S, D), DTYPES[dtype])
    lse = np.zeros((1, H, S), np.float32)
    st = tuple(s // x.itemsize for s in x.strides[:3]) if st is None else st
    block_m, block_n, num_warps, num_stages = config
    descs = head_descriptors(x, x, x, block_m=block_m, block_n=block_n)
    return fa.attention_fwd_kernel.compile(
        *descs, x, lse, 0.125 * fa.LOG2E, 2, S, *st * 4, D=D, BLOCK_M=block_m,
        BLOCK_N=block_n, CAUSAL=causal, RELOAD=False, TMA=True, SPECIALIZE=specialize,
        num_warps=num_warps, num_stages=num_stages, arch="sm_90a")


def loops(tgir: str) -> list:
    """The bodies of the func's top-level `for` loops (4-space indented IR)."""
    bodies = []
    for match in re.finditer(r"\n    [^\n]* = for [^\n]*\n", tgir):
        end = tgir.index("\n    }", match.end())
        bodies.append(tgir[match.end():end])
    return bodies


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_both_loops_copy_by_tma_without_spills(D, causal, dtype):
    for index, config in enumerate(fa.WGMMA_CONFIGS["fwd"][D]):
        kernel = compile_tma(D, dtype, causal, config)
        ptx, tgir = kernel.asm["ptx"], kernel.asm["tgir"]
        # Three maps (Q, K, V) the host encoded, read in place as kernel parameters: none
        # written by the kernel, no scratch.
        assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx)) == 3
        assert "global_scratch_size" not in kernel.metadata and "tensormap.replace" not in ptx
        assert "cp.async.cg" not in ptx and "cp.async.ca" not in ptx
        assert re.search(r"cp\.async\.bulk\.tensor\.4d\.shared::cluster\.global\.mbarrier", ptx)
        assert "cp.async.bulk.tensor.2d" not in ptx
        assert "mbarrier.try_wait.parity" in ptx and "wgmma.mma_async" in ptx
        masked, unmasked = loops(tgir)
        # The masked loop re-reads Q (its ring too); both wait for the copies and refill a
        # slot in the loop, released by the consumers' arrivals (no load left in the loop).
        assert masked.count("tma_load") == 3 and unmasked.count("tma_load") == 2
        for body in (masked, unmasked):
            assert body.count("mbarrier_wait") == 2 and "mbarrier_arrive" in body
            assert not re.search(r" = load ", body)
        if ptxas.find_ptxas() is None:
            pytest.skip("ptxas not found: PTX not assembled")
        assert kernel.metadata["spill_stores"] == 0, (D, causal, dtype, config, index)


@pytest.mark.parametrize("knob", [False, True], ids=["asked_by_the_loop", "and_the_knob"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_warp_specialized_unmasked_loop(D, causal, knob):
    # SPECIALIZE: the unmasked loop's K and V come from a producer warpgroup (through the host
    # maps, kernel parameters); the masked loop keeps the consumers' TMA pipeline,
    # also with knobs.warp_specialize asking for every loop (a loop's own request goes first).
    # The tile of Q stored before the loop costs one barrier before it, none per step.
    config = fa.WGMMA_CONFIGS["fwd"][D][0]
    with knobs.scope(warp_specialize=knob):
        kernel = compile_tma(D, "fp16", causal, config, specialize=True)
    ptx, tgir = kernel.asm["ptx"], kernel.asm["tgir"]
    warps = config[2]
    assert kernel.metadata["total_num_warps"] == warps + 4
    assert "global_scratch_size" not in kernel.metadata
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40;", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+\d+;", ptx)
    producer = tgir[tgir.index("warp_specialize {"):]
    producer = producer[:producer.index("\n    }")]
    assert "tensormap_create" not in tgir and producer.count("tma_load") == 2
    masked, unmasked = loops(tgir[tgir.index("\n    }", tgir.index("warp_specialize {")):])
    assert masked.count("tma_load") == 3 and "tma_load" not in unmasked
    assert "mbarrier_wait" in unmasked and "mbarrier_arrive" in unmasked
    assert "barrier {" not in unmasked and "barrier :" not in unmasked
    # The consumers' loops (after the role split) hold no bar.sync: named barriers, if any,
    # are outside them.
    consumer = ptx[ptx.index("setmaxnreg.inc"):]
    waiting = [body for _, body in re.findall(
        r"\n(\$L__BB\d+_\d+):\n(.*?)\n\s*@%p\d+ bra\s+\1;", consumer, re.S)
        if "mbarrier.try_wait" in body]
    assert len(waiting) == 2 and not any("bar.sync" in body for body in waiting)
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0


@pytest.mark.parametrize("specialize", [False, True], ids=["tma", "warp_specialized"])
@pytest.mark.parametrize("S, D, causal", [(77, 64, True), (80, 128, False), (45, 64, False),
                                          (200, 128, True)])
def test_pipelined_tma_ir_runs_in_the_interpreter(S, D, causal, specialize):
    # Each head's rows sit in a larger buffer whose rows past S are NaN: a tile crossing S that
    # read the next head's rows (or any row past S) instead of the descriptor's zero fill would
    # make its scores or P V NaN.
    H, pad, scale = 2, 16, 0.125
    rng = np.random.default_rng()
    config = fa.WGMMA_CONFIGS["fwd"][D][0]
    bufs = [np.full((1, H, S + pad, D), np.nan, ml_dtypes.bfloat16) for _ in range(3)]
    for buf in bufs:
        buf[:, :, :S] = rng.standard_normal((1, H, S, D)).astype(ml_dtypes.bfloat16)
    q, k, v = (buf[:, :, :S] for buf in bufs)
    o = np.full((1, H, S, D), np.nan, ml_dtypes.bfloat16)
    lse = np.full((1, H, S), np.nan, np.float32)
    st_in = tuple(s // q.itemsize for s in q.strides[:3])
    st_out = tuple(s // o.itemsize for s in o.strides[:3])
    assert all(tma_path(x, arch="sm_90a") for x in (q, k, v))
    kernel = compile_tma(D, "bf16", causal, config, S=S, H=H, st=st_in,
                         specialize=specialize)
    assert "cp.async.bulk.tensor" in kernel.asm["ptx"]
    assert ("setmaxnreg" in kernel.asm["ptx"]) == specialize
    descs = head_descriptors(q, k, v, block_m=config[0], block_n=config[1])
    inputs = [part for d in descs for part in (d.base, *d.shape, *d.strides, d)]
    interpreter.run(ir.parse_module(kernel.asm["tgir"]), grid=(-(-S // config[0]), H),
                    args=[*inputs, o, lse, scale * fa.LOG2E, H, S, *st_in * 3, *st_out])
    ref_o, ref_lse = reference(q, k, v, causal, scale)
    assert np.linalg.norm(o.astype(np.float64) - ref_o) / np.linalg.norm(ref_o) < 1e-2
    assert np.abs(lse - ref_lse).max() < 1e-3 * np.abs(ref_lse).max() + 1e-5


def reference(q, k, v, causal, scale):
    """O and the base-2 log-sum-exp in float64."""
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    S = q.shape[2]
    scores = q64 @ k64.swapaxes(-1, -2) * scale
    if causal:
        scores = np.where(np.tril(np.ones((S, S), bool)), scores, -np.inf)
    top = scores.max(-1, keepdims=True)
    p = np.exp(scores - top)
    lse = (np.log(p.sum(-1)) + top[..., 0]) * fa.LOG2E
    return (p / p.sum(-1, keepdims=True)) @ v64, lse


@pytest.mark.parametrize("S, D, causal, dtype", [(77, 64, True, np.float16),
                                                 (45, 128, False, ml_dtypes.bfloat16),
                                                 (130, 64, False, np.float16)])
def test_tma_variant_runs_in_the_interpreter(S, D, causal, dtype):
    # The kernel itself with TMA=True (descriptor loads: their masked-load meaning) on ragged S,
    # with heads not contiguous (a (B, S, H, D) buffer): the 4-D descriptors take any strides.
    B, H, scale = 2, 2, 0.125
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((B, S, H, D)).astype(dtype).transpose(0, 2, 1, 3)
               for _ in range(3))
    o = np.full((B, H, S, D), np.nan, dtype)
    lse = np.full((B, H, S), np.nan, np.float32)
    st = tuple(s // q.itemsize for s in q.strides[:3])
    st_o = tuple(s // o.itemsize for s in o.strides[:3])
    with knobs.scope(interpret=True):
        fa.attention_fwd_kernel[(-(-S // 64), B * H)](
            *head_descriptors(q, k, v, block_m=64, block_n=32), o, lse, scale * fa.LOG2E, H, S,
            *st * 3, *st_o, D=D, BLOCK_M=64, BLOCK_N=32, CAUSAL=causal, TMA=True)
    ref_o, ref_lse = reference(q, k, v, causal, scale)
    assert np.linalg.norm(o.astype(np.float64) - ref_o) / np.linalg.norm(ref_o) < 1e-2
    assert np.abs(lse - ref_lse).max() < 1e-3 * np.abs(ref_lse).max() + 1e-5


def test_the_host_takes_the_tma_path_where_its_rules_hold():
    x = np.zeros((2, 3, 100, 64), np.float16)
    assert tma_path(x, x, x, arch="sm_90a")
    assert not tma_path(x, arch="sm_80") and not tma_path(x, arch=None)
    assert not tma_path(x.astype(np.float32), arch="sm_90a")          # tf32: mma.sync tiles
    assert not tma_path(np.zeros((1, 1, 8, 32), np.float16), arch="sm_90a")  # no wgmma config
    with knobs.scope(tma=False):
        assert not tma_path(x, arch="sm_90a")
    with knobs.scope(wgmma=False):
        assert not tma_path(x, arch="sm_90a")
    wide = np.zeros((2, 3, 100, 72), np.float16)
    assert tma_path(wide[..., :64], arch="sm_90a")          # rows of 144 bytes
    assert not tma_path(np.zeros((2, 3, 100, 68), np.float16)[..., :64], arch="sm_90a")
    assert tma_path(np.zeros((2, 100, 3, 64), np.float16).transpose(0, 2, 1, 3),
                    arch="sm_90a")                           # (B, S, H, D) memory: strided
    odd_heads = np.zeros((2, 3 * 100 * 64 + 4), np.float16)[:, :3 * 100 * 64]
    assert not tma_path(odd_heads.reshape(2, 3, 100, 64), arch="sm_90a")  # batch stride 8 B
    flat = np.zeros(2 * 3 * 100 * 64 + 8, np.float16)
    start = (2 - flat.__array_interface__["data"][0]) % 16 // 2
    shifted = flat[start:start + x.size].reshape(x.shape)            # base 2 bytes off 16
    assert not tma_path(shifted, arch="sm_90a")
    assert not tma_path(x, np.zeros((2, 3, 100, 64, 2), np.float16)[..., 0], arch="sm_90a")


def test_each_config_sets_the_descriptor_blocks_to_its_tiles():
    # The wrapper makes the descriptors before a config is chosen; each config's pre_hook
    # (run before its compile and its launches) gives them its BLOCK_M / BLOCK_N.
    from tessera.ops.flash_attention.forward import _tuned_fwd, head_blocks
    assert all(config.pre_hook is head_blocks for config in _tuned_fwd.configs)
    x = np.zeros((2, 3, 100, 64), np.float16)
    descs = head_descriptors(x, x, x)
    head_blocks({"q_ptr": descs[0], "k_ptr": descs[1], "v_ptr": descs[2], "BLOCK_M": 128,
                 "BLOCK_N": 32})
    assert [d.block_shape for d in descs] == [[1, 1, 128, 64], [1, 1, 32, 64], [1, 1, 32, 64]]
    assert [d.strides for d in descs] == [list(s // 2 for s in x.strides)] * 3
    head_blocks({"q_ptr": x, "k_ptr": x, "v_ptr": x, "BLOCK_M": 128, "BLOCK_N": 32})  # no-op


def test_default_allocator_serves_only_where_none_was_set():
    mine, library = (lambda *a: None), (lambda *a: None)
    with allocation.default_allocator(library):
        assert allocation.get_allocator() is library
    assert isinstance(allocation.get_allocator(), allocation.NullAllocator)
    allocation.set_allocator(mine)
    try:
        with allocation.default_allocator(library):
            assert allocation.get_allocator() is mine
    finally:
        allocation.set_allocator(allocation.NullAllocator())
    with allocation.default_allocator(None):
        assert isinstance(allocation.get_allocator(), allocation.NullAllocator)


# --- attention_forward's launch on an sm_90a GPU, the driver faked (test_tma_ptx.py) ----------

from test_tma_ptx import fake_gpu  # noqa: E402,F401  (a module fixture)


@pytest.mark.parametrize("specialize", [False, True], ids=["tma", "warp_specialized"])
def test_attention_forward_launches_the_tma_kernel(fake_gpu, monkeypatch, specialize):  # noqa: F811
    # The wrapper picks the TMA variant for sm_90a inputs that meet the TMA's rules, with
    # SPECIALIZE under knobs.warp_specialize, passing q, k, v as host descriptors (three maps
    # as kernel parameters, no scratch); strided rows of 136 bytes do not.
    torch = fake_gpu.torch
    from tessera.ops.flash_attention import configs
    monkeypatch.setattr(configs, "_arch", lambda x: "sm_90a")
    from tessera.autotuner import Target, TuningBackend
    from tessera.runtime.driver import DeviceProperties
    h100 = DeviceProperties(
        index=0, name="Fake H100", compute_capability=(9, 0), multiprocessor_count=132,
        max_threads_per_block=1024, warp_size=32, max_shared_memory_per_block=49152,
        max_shared_memory_per_block_optin=232448, max_shared_memory_per_multiprocessor=233472,
        max_registers_per_multiprocessor=65536, l2_cache_bytes=50 * 2**20)
    monkeypatch.setattr(TuningBackend, "target",
                        lambda self, jit_fn, values: Target(0, h100.name, "sm_90a", h100))
    B, H, S, D = 1, 2, 200, 64
    q = torch.zeros((B, H, S, D), dtype=torch.float16)
    with knobs.scope(autotune="off", warp_specialize=specialize):
        before = len(fake_gpu.launches)
        fa.attention_forward(q, q, q, causal=True)
        kernel, kinds, buffer = fake_gpu.launches[-1]
        assert len(fake_gpu.launches) == before + 1 and kinds.count("tensormap") == 3
        assert "cp.async.bulk.tensor.4d" in kernel.asm["ptx"]
        assert "global_scratch_size" not in kernel.metadata
        assert ("setmaxnreg" in kernel.asm["ptx"]) == specialize
        strided = torch.zeros((B, H, S, D + 4), dtype=torch.float16)[..., :D]
        fa.attention_forward(strided, strided, strided, causal=True)
        kernel, kinds, _ = fake_gpu.launches[-1]
        assert "cp.async.bulk" not in kernel.asm["ptx"] and "global_scratch_size" not in (
            kernel.metadata)
    assert isinstance(allocation.get_allocator(), allocation.NullAllocator)
    fa.attention_fwd_kernel._kernels.clear()  # the fixture's fake launchers
