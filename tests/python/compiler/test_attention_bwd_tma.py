"""The attention backward's TMA variant (TMA=True: per-head (S, D) device tensor descriptors)
for sm_90a without a GPU: the dK/dV kernel's loops copy Q and dO (and the masked loop's K and
V) and the dQ kernel's copy K and V (and the masked loop's Q and dO) with
cp.async.bulk.tensor into rings waited on with mbarriers; the dK/dV loops' rows of lse and
delta are loaded in place or go by cp.async beside them (a mixed loop: one barrier per step,
the products left in flight); ptxas (CUDA 13) assembles every wgmma candidate config without
spills; the pipelined IR runs in the interpreter against float64 gradients on ragged S with
NaN rows between the heads; the plain kernels with TMA=True run in the interpreter; the
host's rule. docs/perf/attention_tma.md ("The backward").
"""
import re

import ml_dtypes
import numpy as np
import pytest
from tessera import interpreter
from tessera._tessera import ir
from tessera.errors import OutOfResources
from tessera.compiler import ptxas
from tessera.config import knobs
from tessera.runtime import allocation
import tessera.ops.flash_attention as fa
from tessera.ops.flash_attention import backward as bwd
from tessera.ops.flash_attention.configs import tma_path

from test_attention_tma import loops

DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}


@pytest.fixture(autouse=True)
def tma_wherever_allowed():
    with knobs.scope(attention_tma="on"):
        yield


def strides(x) -> tuple:
    return tuple(s // x.itemsize for s in x.strides[:3])


def compile_bwd(kernel, D, dtype, causal, config, S=1024, H=2, st_in=None, st_out=None):
    x = np.zeros((1, H, S, D), DTYPES[dtype])
    lse = np.zeros((1, H, S), np.float32)
    st_in = strides(x) if st_in is None else st_in
    st_out = strides(x) if st_out is None else st_out
    block_m, block_n, num_warps, num_stages = config
    options = dict(D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, RELOAD=False,
                   TMA=True, num_warps=num_warps, num_stages=num_stages, arch="sm_90a")
    if kernel == "dkdv":
        return bwd.attention_bwd_dkdv_kernel.compile(
            x, x, x, x, x, x, lse, lse, 0.125, 0.125 * fa.LOG2E, H, S, *st_in * 4, *st_out * 2,
            **options)
    return bwd.attention_bwd_dq_kernel.compile(
        x, x, x, x, x, lse, lse, 0.125, 0.125 * fa.LOG2E, H, S, *st_in * 4, *st_out, **options)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("kernel", ["dkdv", "dq"])
def test_backward_loops_copy_by_tma_without_spills(kernel, D, causal, dtype):
    for index, config in enumerate(fa.WGMMA_CONFIGS[kernel][D]):
        compiled = compile_bwd(kernel, D, dtype, causal, config)
        ptx, tgir = compiled.asm["ptx"], compiled.asm["tgir"]
        # Four maps (dK/dV: K, V, Q, dO; dQ: Q, dO, K, V), written once per program.
        assert compiled.metadata["global_scratch_size"] == 4 * 128
        assert ptx.count("fence.proxy.tensormap::generic.release.gpu") == 4
        assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier", ptx)
        assert "mbarrier.try_wait.parity" in ptx and "wgmma.mma_async" in ptx
        masked, unmasked = loops(tgir)
        # The masked loops re-read their loop-invariant tiles (their rings too); every tile is
        # a TMA copy: no 2-D load is left in a loop, and the copies wait on mbarriers.
        assert masked.count("tma_load") == 4 and unmasked.count("tma_load") == 2
        for body in (masked, unmasked):
            assert body.count("mbarrier_wait") == 2 and "mbarrier_arrive" in body
            assert not re.search(r" = load [^\n]*-> tensor<\d+x\d+x", body)
        if kernel == "dq":  # only tiles: no barrier, no cp.async in either loop
            assert "cp.async.cg" not in ptx and "cp.async.ca" not in ptx
            assert not any(re.search(r"\bbarrier\b(?! *%)", body.replace("mbarrier", ""))
                           for body in (masked, unmasked))
        else:  # the unmasked loop's lse and delta rows: loaded in place where the layouts
            # put them in the products' slices (no barrier), else copied by cp.async beside
            # the tiles with one barrier per step that leaves the products in flight; either
            # way the step's products cross the back edge
            plain = re.findall(r"\n\s*barrier\b[^\n]*", unmasked)
            assert unmasked.count("async_copy") in (0, 2)
            assert len(plain) == unmasked.count("async_copy") // 2, plain
            assert all("wgmma_pending = 0" not in b and "wgmma_pending" in b for b in plain)
            assert "wgmma_carried" in tgir
        if ptxas.find_ptxas() is None:
            pytest.skip("ptxas not found: PTX not assembled")
        assert compiled.metadata["spill_stores"] == 0, (kernel, D, causal, dtype, config, index)


def reference(q, k, v, do, causal, scale):
    """O, the base-2 lse, delta = rowsum(dO ⊙ O) and dQ, dK, dV, all in float64."""
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    S = q.shape[2]
    scores = q @ k.swapaxes(-1, -2) * scale
    if causal:
        scores = np.where(np.tril(np.ones((S, S), bool)), scores, -np.inf)
    top = scores.max(-1, keepdims=True)
    e = np.exp(scores - top)
    p = e / e.sum(-1, keepdims=True)
    o = p @ v
    lse = (np.log(e.sum(-1)) + top[..., 0]) * fa.LOG2E
    delta = (do * o).sum(-1)
    dp = do @ v.swapaxes(-1, -2)
    ds = p * (dp - delta[..., None])
    return o, lse, delta, ds @ k * scale, ds.swapaxes(-1, -2) @ q * scale, \
        p.swapaxes(-1, -2) @ do


def padded_inputs(S, D, H, dtype, pad=16):
    """q, k, v, dO: each head's S rows inside a buffer whose rows past S are NaN (a tile that
    read past its head's S instead of the descriptor's zero fill would turn NaN)."""
    rng = np.random.default_rng()
    views = []
    for _ in range(4):
        buf = np.full((1, H, S + pad, D), np.nan, dtype)
        buf[:, :, :S] = rng.standard_normal((1, H, S, D)).astype(dtype)
        views.append(buf[:, :, :S])
    return views


def close(got, want, tolerance=2e-2):
    got = got.astype(np.float64)
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < tolerance


@pytest.mark.parametrize("S, D, causal", [(77, 64, True), (80, 128, False), (45, 64, False),
                                          (200, 128, True)])
def test_pipelined_tma_ir_runs_in_the_interpreter(S, D, causal):
    # Both kernels' pipelined IR (maps written by the kernel, the TMA's zero fill, the mixed
    # loops' cp.async rows) against float64 gradients, lse and delta from the reference.
    H, scale, dtype = 2, 0.125, ml_dtypes.bfloat16
    q, k, v, do = padded_inputs(S, D, H, dtype)
    assert tma_path(q, k, v, do, arch="sm_90a", kernel="bwd")
    _, lse, delta, ref_dq, ref_dk, ref_dv = reference(q, k, v, do, causal, scale)
    lse, delta = lse.astype(np.float32), delta.astype(np.float32)
    dq, dk, dv = (np.full((1, H, S, D), np.nan, dtype) for _ in range(3))
    st_in, st_out = strides(q), strides(dq)
    common = [lse, delta, scale, scale * fa.LOG2E, H, S, *st_in * 4]
    for kernel, outputs in (("dkdv", [dk, dv]), ("dq", [dq])):
        config = fa.WGMMA_CONFIGS[kernel][D][0]
        compiled = compile_bwd(kernel, D, "bf16", causal, config, S=S, H=H, st_in=st_in,
                               st_out=st_out)
        assert "cp.async.bulk.tensor" in compiled.asm["ptx"]
        block = config[1] if kernel == "dkdv" else config[0]
        interpreter.run(ir.parse_module(compiled.asm["tgir"]), grid=(-(-S // block), H),
                        args=[q, k, v, do, *outputs, *common, *st_out * len(outputs)])
    for got, want in ((dq, ref_dq), (dk, ref_dk), (dv, ref_dv)):
        close(got, want)


@pytest.mark.parametrize("S, D, causal, dtype", [(77, 64, True, np.float16),
                                                 (45, 128, False, ml_dtypes.bfloat16),
                                                 (130, 64, False, np.float16)])
def test_tma_variant_runs_in_the_interpreter(S, D, causal, dtype):
    # The kernels themselves with TMA=True (descriptor loads: their masked-load meaning).
    B, H, scale = 2, 2, 0.125
    rng = np.random.default_rng()
    q, k, v, do = (rng.standard_normal((B, H, S, D)).astype(dtype) for _ in range(4))
    _, lse, delta, ref_dq, ref_dk, ref_dv = reference(q, k, v, do, causal, scale)
    lse, delta = lse.astype(np.float32), delta.astype(np.float32)
    dq, dk, dv = (np.full((B, H, S, D), np.nan, dtype) for _ in range(3))
    st = strides(q)
    with knobs.scope(interpret=True):
        bwd.attention_bwd_dkdv_kernel[(-(-S // 64), B * H)](
            q, k, v, do, dk, dv, lse, delta, scale, scale * fa.LOG2E, H, S, *st * 6, D=D,
            BLOCK_M=32, BLOCK_N=64, CAUSAL=causal, TMA=True)
        bwd.attention_bwd_dq_kernel[(-(-S // 64), B * H)](
            q, k, v, do, dq, lse, delta, scale, scale * fa.LOG2E, H, S, *st * 5, D=D,
            BLOCK_M=64, BLOCK_N=32, CAUSAL=causal, TMA=True)
    for got, want in ((dq, ref_dq), (dk, ref_dk), (dv, ref_dv)):
        close(got, want)


def test_the_backward_takes_the_tma_path_by_its_own_row_of_the_table():
    x64, x128 = (np.zeros((2, 3, 100, d), np.float16) for d in (64, 128))
    with knobs.scope(attention_tma="auto"):
        for D, x in ((64, x64), (128, x128)):
            for causal in (False, True):
                entries = fa.configs.TMA_FASTER_HEAD_DIMS["bwd"]
                assert tma_path(x, arch="sm_90a", kernel="bwd", causal=causal) == (
                    D in entries or (D, causal) in entries)
        # The measured rows (docs/perf/attention_tma.md): D = 128 both ways, D = 64 without
        # the causal mask only.
        assert tma_path(x128, arch="sm_90a", kernel="bwd", causal=True)
        assert tma_path(x64, arch="sm_90a", kernel="bwd", causal=False)
        assert not tma_path(x64, arch="sm_90a", kernel="bwd", causal=True)
    with knobs.scope(attention_tma="off"):
        assert not tma_path(x128, arch="sm_90a", kernel="bwd")
    assert tma_path(x64, x64, x64, x64, arch="sm_90a", kernel="bwd")  # on
    strided = np.zeros((2, 3, 100, 68), np.float16)[..., :64]  # rows of 136 bytes
    assert not tma_path(x64, x64, x64, strided, arch="sm_90a", kernel="bwd")  # dO counts too


# --- attention_backward's launches on an sm_90a GPU, the driver faked (test_tma_ptx.py) ------

from test_tma_ptx import fake_gpu  # noqa: E402,F401  (a module fixture)


def test_attention_backward_launches_the_tma_kernels(fake_gpu, monkeypatch):  # noqa: F811
    # The wrapper picks the TMA variant of both kernels for sm_90a inputs that meet the TMA's
    # rules and gives their launches an allocator for the maps' scratch (4 maps per program);
    # a dO of 136-byte rows sends both back to the pointer path.
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
    lse = torch.zeros((B, H, S), dtype=torch.float32)
    with knobs.scope(autotune="off"):
        before = len(fake_gpu.launches)
        fa.attention_backward(q, q, q, q, lse, q, causal=True)
        launched = fake_gpu.launches[before:]
        assert len(launched) == 3  # delta, dK/dV, dQ
        for kernel, kinds, _ in launched[1:]:
            assert kinds[-1] == "ptr" and "cp.async.bulk.tensor" in kernel.asm["ptx"]
            assert kernel.metadata["global_scratch_size"] == 4 * 128
        strided = torch.zeros((B, H, S, D + 4), dtype=torch.float16)[..., :D]
        fa.attention_backward(q, q, q, q, lse, strided, causal=True)
        for kernel, _, _ in fake_gpu.launches[-2:]:
            assert "cp.async.bulk" not in kernel.asm["ptx"]
            assert "global_scratch_size" not in kernel.metadata
    assert isinstance(allocation.get_allocator(), allocation.NullAllocator)
    for kernel in (bwd.attention_bwd_dkdv_kernel, bwd.attention_bwd_dq_kernel,
                   bwd.attention_bwd_preprocess_kernel):
        kernel._kernels.clear()  # the fixture's fake launchers


@pytest.mark.parametrize("S, D, causal", [(77, 64, True), (130, 64, False), (45, 128, False)])
def test_atomic_dq_tma_variant_runs_in_the_interpreter(S, D, causal):
    # ATOMIC_DQ on the TMA variant: every key program adds its dS K into the float32
    # accumulator through the head's descriptor (desc.atomic_add), rows past S dropped.
    B, H, scale, dtype = 2, 2, 0.125, np.float16
    rng = np.random.default_rng()
    q, k, v, do = (rng.standard_normal((B, H, S, D)).astype(dtype) for _ in range(4))
    _, lse, delta, ref_dq, ref_dk, ref_dv = reference(q, k, v, do, causal, scale)
    lse, delta = lse.astype(np.float32), delta.astype(np.float32)
    dk, dv = (np.full((B, H, S, D), np.nan, dtype) for _ in range(2))
    acc = np.zeros((B, H, S, D), np.float32)
    st = strides(q)
    with knobs.scope(interpret=True):
        bwd.attention_bwd_dkdv_kernel[(-(-S // 64), B * H)](
            q, k, v, do, dk, dv, lse, delta, scale, scale * fa.LOG2E, H, S, *st * 6, D=D,
            BLOCK_M=32, BLOCK_N=64, CAUSAL=causal, TMA=True, dq_acc_ptr=acc, ATOMIC_DQ=True)
    for got, want in ((acc * scale, ref_dq), (dk, ref_dk), (dv, ref_dv)):
        close(got, want)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_atomic_dq_reduces_by_tma_per_tile(D, causal):
    # On sm_90a the dK/dV kernel's dQ adds are bulk tensor reductions (one per step and
    # loop), not per-element atomics. At D = 128 the masked loop's K is read by the wgmma
    # Q Kᵀ and by the mma.sync dS K (fewer rows than a warpgroup's 64): the pipeliner leaves
    # it a load in the loop (no one ring layout serves both; it failed to compile before).
    x = np.zeros((1, 2, 1024, D), np.float16)
    lse = np.zeros((1, 2, 1024), np.float32)
    acc = np.zeros((1, 2, 1024, D), np.float32)
    st = strides(x)
    for config in fa.WGMMA_CONFIGS["dkdv"][D]:
        block_m, block_n, num_warps, num_stages = config
        try:
            compiled = bwd.attention_bwd_dkdv_kernel.compile(
                x, x, x, x, x, x, lse, lse, 0.125, 0.125 * fa.LOG2E, 2, 1024, *st * 6, D=D,
                BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, RELOAD=False, TMA=True,
                dq_acc_ptr=acc, ATOMIC_DQ=True, num_warps=num_warps, num_stages=num_stages,
                arch="sm_90a")
        except OutOfResources:  # more shared memory than a block gets: not a candidate
            continue
        ptx = compiled.asm["ptx"]
        # One reduction per loop's tile (as many boxes as the tile's 128-byte rows need).
        assert ptx.count("cp.reduce.async.bulk.tensor") in (2, 4, 8), config
        assert not re.search(r"\b(red|atom)\.global", ptx)  # not "shared.global"


def test_the_dkdv_tuner_zeroes_the_dq_accumulator_after_its_timed_launches():
    # ATOMIC_DQ adds into dq_acc_ptr: tuning's timed launches would leave their sums in it
    # (wrong dQ on the first, tuning call: seen on an H200), so the tuner zeroes it after them.
    from tessera.ops.flash_attention.backward import _tuned_dkdv
    assert _tuned_dkdv.reset_to_zero == ["dq_acc_ptr"]



def test_atomic_dq_stores_ds_once_and_reads_it_transposed():
    # dS K takes dS = (dSᵀ)ᵀ, held as the dK product's accumulator: materialize_wgmma_operands
    # stores dSᵀ as it is (from the #mma registers) and the dQ product reads it transposed
    # (an MN-major wgmma operand), with no conversion to a blocked layout and no transpose
    # through shared memory in between.
    x = np.zeros((1, 2, 1024, 64), np.float16)
    lse = np.zeros((1, 2, 1024), np.float32)
    acc = np.zeros((1, 2, 1024, 64), np.float32)
    st = strides(x)
    compiled = bwd.attention_bwd_dkdv_kernel.compile(
        x, x, x, x, x, x, lse, lse, 0.125, 0.125 * fa.LOG2E, 2, 1024, *st * 6, D=64,
        BLOCK_M=64, BLOCK_N=64, CAUSAL=False, RELOAD=False, TMA=True, dq_acc_ptr=acc,
        ATOMIC_DQ=True, num_warps=4, num_stages=2, arch="sm_90a")
    tgir = compiled.asm["tgir"]
    assert not re.search(r"= trans ", tgir)
    stored = re.findall(r"local_alloc %\d+ \{offset = \d+\} : \(tensor<64x64xf16, #mma>\)", tgir)
    assert len(stored) == 2  # one per loop (masked, unmasked)
    assert len(re.findall(r"local_load %\d+ \{order = \[1, 0\]\} : \(tensor<64x64xf16, "
                          r"#shared\d*>\) -> tensor<64x64xf16, #dot_op>", tgir)) == 2
