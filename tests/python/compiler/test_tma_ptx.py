"""The opt-in TMA path (TESSERA_TMA, sm_90a) without a GPU.

A descriptor matmul compiled with the knob on passes each 2-D TensorDescriptor's tensor map
as a `.param .align 64 .b8 [128]` parameter read in place (cvta.param), and its pipelined
loop copies the tiles with cp.async.bulk.tensor into rings tracked by one mbarrier per stage:
barriers initialized before any copy, each stage's expect_tx before its copies, the wait
(try_wait.parity on the read slot's phase) before the wgmma that reads the slot, invalidation
after the loop; ptxas assembles it without spills. The pipelined IR runs in the interpreter,
which checks the mbarrier protocol (a wait for a phase that never completes is a fault), on
fresh random ragged shapes against float64. With the knob off, or for sm_80, the PTX is the same
as without the knob. (Device-side descriptors: test_tma_device_ptx.py.)
"""
import hashlib
import os
import re
import sys
from collections import OrderedDict

import numpy as np
import pytest

from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.config import knobs
from tessera.runtime import tensor_map as tm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import descriptor_matmul as dm  # noqa: E402

CONFIG_IDS = dm.CONFIG_IDS


def compile_matmul(meta, tma=True, arch="sm_90a", size=512, device=False, debug=False):
    a = np.zeros((size, size), np.float16)
    with knobs.scope(tma=tma, always_compile=True, debug=debug):
        if device:
            return dm.device_descriptor_matmul_kernel.compile(a, a, a, size, size, size,
                                                              arch=arch, **meta)
        return dm.descriptor_matmul_kernel.compile(*dm.descriptors(a, a, a, meta), size,
                                                   arch=arch, **meta)


def positions(ptx, pattern):
    return [m.start() for m in re.finditer(pattern, ptx)]


@pytest.mark.parametrize("meta", dm.CONFIGS, ids=CONFIG_IDS)
def test_tma_matmul_ptx(meta):
    check_tma_matmul(compile_matmul(meta), meta)


def check_tma_matmul(kernel, meta, device=False):
    """The TMA pipeline of a descriptor matmul of config ``meta``, in its PTX and TGIR; with
    ``device``, of the device-descriptor matmul (maps in global scratch, no map parameters)."""
    ptx, stages = kernel.asm["ptx"], meta["num_stages"]
    if not device:
        assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx)) == 3  # a, b, c
        assert len(re.findall(r"cvta\.param\.u64", ptx)) >= 2  # a's and b's maps, in place
    assert "cp.async.cg" not in ptx and "cp.async.wait_group" not in ptx
    assert "ld.global" not in ptx  # the pointer tiles of the loads are gone with them
    inits = positions(ptx, r"mbarrier\.init\.shared::cta\.b64")
    expects = positions(ptx, r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64")
    copies = positions(ptx, r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\."
                            r"mbarrier::complete_tx::bytes")
    waits = positions(ptx, r"mbarrier\.try_wait\.parity\.shared::cta\.b64")
    wgmma = positions(ptx, r"wgmma\.mma_async")
    invals = positions(ptx, r"mbarrier\.inval\.shared::cta\.b64")
    assert len(inits) >= stages and len(inits) == len(invals)  # a power of two >= stages
    # Prologue: stages - 1 stages, each expect_tx before its copies; then the loop's one.
    assert len(expects) == stages
    b_boxes = max(1, meta["BN"] * 2 // 128)  # B's rows over 128 bytes: one box per 128 bytes
    assert len(copies) == stages * (1 + b_boxes)
    assert max(inits) < min(expects)
    for stage in range(stages):
        first = expects[stage]
        end = expects[stage + 1] if stage + 1 < stages else len(ptx)
        assert sum(first < c < end for c in copies) == 1 + b_boxes
    # In the loop: the wait for the read slot's bytes, then the issuing thread's wait for the
    # write slot's release (its empty mbarrier); no bar.sync: each warp releases the slot it
    # read with one arrive once its wgmma retired.
    assert len(waits) == 2 and expects[stages - 2] < waits[0] < waits[1] < expects[-1]
    arrives = positions(ptx, r"mbarrier\.arrive\.shared::cta\.b64")
    assert len(arrives) == 1 and waits[0] < arrives[0] < min(invals)
    assert not positions(ptx[waits[0]:arrives[0]], r"bar\.sync")
    if knobs.wgmma_pipeline:  # the step's copies after its product, which stays in flight
        assert waits[0] < min(wgmma) < expects[-1]  # (docs/perf/wgmma_across_iterations.md)
    else:
        assert waits[0] < expects[-1] < min(wgmma)
    assert max(wgmma) < min(invals)
    # One issuing thread, chosen once by elect.sync (ptxas issues each copy once, where a
    # `tid == 0` predicate had it loop over the threads the predicate might hold in), and no
    # proxy fence before the copies: wgmma reads the slots through the async proxy too.
    assert len(positions(ptx, r"elect\.sync")) == 1
    assert not positions(ptx, r"fence\.proxy\.async\b")
    # One mbarrier per stage: the expect_tx and wait addresses are 8 bytes apart per slot.
    tgir = kernel.asm["tgir"]
    barriers = re.search(r"local_alloc \{offset = (\d+)\} : \(\) -> tensor<(\d+)xi64", tgir)
    assert barriers and int(barriers.group(2)) >= stages
    assert re.search(r"mbarrier_wait %\d+, %\d+, %\d+ ", tgir)  # the read slot's
    assert re.search(r"mbarrier_wait %\d+, %\d+, %\d+, %\d+ ", tgir)  # a release's
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["registers"] > 0
    if not device:
        assert kernel.metadata["tensormaps"] == [5, 11, 17]  # after each descriptor's strides


def test_phase_flips_when_the_read_slot_wraps():
    tgir = compile_matmul(dm.CONFIGS[0]).asm["tgir"]
    loop = re.search(r"= for ([^\n]*)\n", tgir)
    body = tgir[loop.end():tgir.index("yield", loop.end())]
    wait = re.search(r"mbarrier_wait %\d+, (%\d+), (%\d+)", body)
    read_slot, phase = wait.group(1), wait.group(2)
    next_read = re.search(rf"(%\d+) = addi {read_slot}, ", body).group(1)
    wrapped = re.search(rf"= select %\d+, %\d+, {next_read}", body)
    assert wrapped, body
    assert re.search(rf"= xori {phase}, %\d+", body), body


@pytest.mark.parametrize("meta", dm.CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("ragged", [False, True], ids=["div16", "ragged"])
def test_tma_pipeline_runs_in_the_interpreter(meta, ragged):
    # Ragged: M any, N and K odd multiples of 8 (16-byte rows, as TMA needs), so the kernel is
    # specialized on nothing being divisible by 16, as the GPU test's 336x264x200 is.
    rng = np.random.default_rng()
    if ragged:
        m = int(rng.integers(20, 200))
        n, k = (8 * int(2 * rng.integers(2, 12) + 1) for _ in range(2))
    else:
        m, n, k = (int(rng.integers(3, 14)) * 16 for _ in range(3))
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    da, db, dc = dm.descriptors(a, b, c, meta)
    with knobs.scope(tma=True, always_compile=True):
        kernel = dm.descriptor_matmul_kernel.compile(da, db, dc, k, arch="sm_90a", **meta)
    assert "cp.async.bulk.tensor" in kernel.asm["ptx"]
    module = ir.parse_module(kernel.asm["tgir"])
    args = [a, m, k, k, 1, da, b, k, n, n, 1, db, c, m, n, n, 1, dc, k]
    grid = (-(-m // meta["BM"]), -(-n // meta["BN"]))
    interpreter.run(module, grid=grid, args=args)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


def test_negative_box_coordinates_read_padding_in_the_interpreter():
    meta, shift = dm.CONFIGS[2], 24
    a0 = np.zeros((64, 64), np.float16)
    with knobs.scope(tma=True, always_compile=True):
        kernel = dm.shifted_descriptor_matmul_kernel.compile(
            *dm.descriptors(a0, a0, a0, meta), 64, SHIFT=shift, arch="sm_90a", **meta)
    assert "cp.async.bulk.tensor" in kernel.asm["ptx"]
    module = ir.parse_module(kernel.asm["tgir"])
    rng = np.random.default_rng()
    m, n, k = 112, 80, 48
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    da, db, dc = dm.descriptors(a, b, c, meta)
    args = [a, m, k, k, 1, da, b, k, n, n, 1, db, c, m, n, n, 1, dc, k]
    interpreter.run(module, grid=(-(-m // meta["BM"]), -(-n // meta["BN"])), args=args)
    shifted = np.zeros((m, k))
    shifted[shift:] = a[:m - shift]
    ref = shifted @ b.astype(np.float64)
    assert np.all(c[:shift] == 0)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


def test_interpreter_faults_on_a_broken_protocol():
    # Without the loop's expect_tx, the copies complete bytes nobody announced.
    tgir = compile_matmul(dm.CONFIGS[0], size=64).asm["tgir"]
    loop = tgir.index("= for ")
    head, body = tgir[:loop], tgir[loop:]
    body = re.sub(r"\n\s*mbarrier_expect_tx [^\n]*", "", body, count=1)
    module = ir.parse_module(head + body)
    a = np.ones((64, 256), np.float16)
    da, db, dc = dm.descriptors(a, a.T.copy(), np.zeros((64, 64), np.float16), dm.CONFIGS[0])
    b = db.base
    args = [a, 64, 256, 256, 1, da, b, 256, 64, 64, 1, db, dc.base, 64, 64, 64, 1, dc, 256]
    with pytest.raises(interpreter.KernelRuntimeError, match="mbarrier"):
        interpreter.run(module, grid=(1, 1), args=args)


def test_debug_builds_bound_the_wait_and_assert():
    # TESSERA_DEBUG: the wait gives up after timeout_ns (read from %globaltimer) and fails an
    # assert naming the loop's line, so a broken protocol fails the launch instead of hanging.
    kernel = compile_matmul(dm.CONFIGS[0], debug=True)
    assert re.search(r"mbarrier_wait [^\n]*\{timeout_ns = 10000000000\}", kernel.asm["tgir"])
    ptx = kernel.asm["ptx"]
    assert len(re.findall(r"mbarrier\.try_wait\.parity", ptx)) == 2  # full, then empty
    for wait in positions(ptx, r"mbarrier\.try_wait\.parity"):
        assert ptx.rindex("%globaltimer", 0, wait) < wait < ptx.index("call.uni __assertfail",
                                                                      wait)
    assert "mbarrier wait timed out" in kernel.asm["llir"]
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0
    release = compile_matmul(dm.CONFIGS[0]).asm["ptx"]
    assert "globaltimer" not in release and "__assertfail" not in release


def test_no_tma_on_sm_80():
    # (Device-side descriptors: test_tma_device_ptx.py.)
    meta = dm.CONFIGS[0]
    on = compile_matmul(meta, tma=True, arch="sm_80").asm["ptx"]
    off = compile_matmul(meta, tma=False, arch="sm_80").asm["ptx"]
    assert on == off and "cp.async.bulk" not in on


def test_knob_off_leaves_the_ir_untouched():
    kernel = compile_matmul(dm.CONFIGS[0], tma=False)
    assert "tensormap" not in kernel.asm["tir"] and "ptr<i8>" not in kernel.asm["tir"]
    assert "mbarrier" not in kernel.asm["ptx"] and "cp.async.cg" in kernel.asm["ptx"]


# --- tests/gpu/test_tma.py's launches, made here as kernel[grid](...) makes them on a GPU -----
# Only the driver is faked (its availability, the device of the arguments, its arch, module
# loading, the launch, and the 128 bytes cuTensorMapEncodeTiled writes: their arguments are
# still computed and checked). The specialization (shapes divisible by 16 or not, dtypes),
# the launch options and the knob are those of the GPU run, so a kernel the GPU cannot compile
# fails here.


class FakeGpu:
    """Records, per launch: the CompiledKernel launched, the launcher's parameter kinds and the
    parameter buffer the real packer builds (tensors passed as their data_ptr)."""

    def __init__(self, torch_module):
        self.torch = torch_module
        self.compiled = []  # every CompiledKernel compile_and_store made
        self.launches = []  # (CompiledKernel, kinds, parameter buffer)
        self.block_warps = []  # per launch: the warps of its block

    @staticmethod
    def map_bytes(desc):
        """Stands for the driver's encoding: 128 bytes that depend on its arguments."""
        digest = hashlib.sha512(repr(tm.encode_arguments(desc)).encode()).digest()
        return digest + digest

    def compiled_kernel(self, image):
        found = [k for k in self.compiled if k.asm.get("cubin", k.asm["ptx"]) == image]
        assert found, "launched an image no compile in this test made"
        return found[-1]

    def launcher(self, real):
        gpu = self

        class Launcher:
            def __init__(self, kinds, function, num_warps, shared_bytes=0):
                self.kinds, self.kernel = kinds, function
                self.num_warps = num_warps
                self.packer = real(kinds, None, num_warps=num_warps)

            def launch(self, grid, stream, args):
                pointers = [a.data_ptr() if isinstance(a, gpu.torch.Tensor) else a for a in args]
                gpu.launches.append((self.kernel, self.kinds, self.packer.pack(pointers)))
                gpu.block_warps.append(self.num_warps)  # the launch's block, in warps
        return Launcher


@pytest.fixture(scope="module")
def fake_gpu(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from tessera.runtime import driver, launcher
    gpu = FakeGpu(torch)
    compile_and_store = launcher.compile_and_store

    def recording_compile(*args, **kwargs):
        kwargs["keep_ir"] = True  # the tests read the stages a launch's compile drops
        gpu.compiled.append(compile_and_store(*args, **kwargs))
        return gpu.compiled[-1]

    module = type("FakeModule", (), {})
    with pytest.MonkeyPatch.context() as mp, \
            knobs.scope(cache_dir=str(tmp_path_factory.mktemp("cache"))):
        mp.setattr(driver, "driver_available", lambda: (True, ""))
        mp.setattr(driver, "KernelLauncher", gpu.launcher(driver.KernelLauncher))
        mp.setattr(driver, "load_module", lambda image, device: setattr(
            module, "function", lambda self, name: gpu.compiled_kernel(image)) or module())
        mp.setattr(launcher, "_device_and_framework", lambda kernel, names, values: (0, "torch"))
        mp.setattr(launcher, "arch_of", lambda device: "sm_90a")
        mp.setattr(launcher, "_stream_function", lambda device, framework: lambda: 0)
        mp.setattr(launcher, "compile_and_store", recording_compile)
        mp.setattr(tm, "encode", FakeGpu.map_bytes)
        mp.setattr(tm, "_ENCODED", OrderedDict())  # maps other fakes encoded stay apart
        yield gpu
        for kernel in (dm.descriptor_matmul_kernel, dm.shifted_descriptor_matmul_kernel):
            kernel._kernels.clear()  # their launchers are this fixture's fakes


def check_launches(gpu, descs, meta):
    """The last two launches: with TMA (the pipeline, each descriptor's map in the parameter
    buffer at a 64-byte aligned offset), then without (no map, no TMA)."""
    (with_tma, kinds, buffer), (without, kinds_off, _) = gpu.launches[-2:]
    check_tma_matmul(with_tma, meta)
    assert kinds.count("tensormap") == 3 and "tensormap" not in kinds_off
    for desc in descs:
        offset = buffer.find(FakeGpu.map_bytes(desc))
        assert offset >= 0 and offset % 64 == 0
    # (Without TMA, a ragged specialization is not pipelined: its 1-element loads of the
    # 128-row configs spill, docs/perf/hopper.md; not asserted here.)
    assert "mbarrier" not in without.asm["ptx"] and "tensormaps" not in without.metadata


@pytest.mark.parametrize("dtype", dm.TMA_DTYPES)
@pytest.mark.parametrize("shape", dm.TMA_SHAPES, ids=dm.TMA_SHAPE_IDS)
@pytest.mark.parametrize("meta", dm.CONFIGS, ids=CONFIG_IDS)
def test_every_gpu_launch_compiles_with_tma(fake_gpu, dtype, shape, meta):
    torch = fake_gpu.torch
    m, n, k = shape
    a = torch.zeros(m, k, dtype=getattr(torch, dtype))
    b = torch.zeros(k, n, dtype=a.dtype)
    c = torch.zeros(m, n, dtype=a.dtype)
    for tma in (True, False):
        dm.launch_matmul(a, b, c, meta, tma)
    check_launches(fake_gpu, dm.descriptors(a, b, c, meta), meta)


@pytest.mark.parametrize("shift", dm.SHIFTS)
def test_shifted_gpu_launch_compiles_with_tma(fake_gpu, shift):
    torch = fake_gpu.torch
    meta = dm.CONFIGS[dm.SHIFT_CONFIG]
    m, n, k = dm.SHIFT_SHAPE
    a, b, c = (torch.zeros(*s, dtype=torch.float16) for s in ((m, k), (k, n), (m, n)))
    for tma in (True, False):
        dm.launch_matmul(a, b, c, meta, tma, shift=shift)
    check_launches(fake_gpu, dm.descriptors(a, b, c, meta), meta)
