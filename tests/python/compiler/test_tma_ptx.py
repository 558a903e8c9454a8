"""The opt-in TMA path (TESSERA_TMA, sm_90a) without a GPU.

A descriptor matmul compiled with the knob on passes each 2-D TensorDescriptor's tensor map
as a `.param .align 64 .b8 [128]` parameter read in place (cvta.param), and its pipelined
loop copies the tiles with cp.async.bulk.tensor into rings tracked by one mbarrier per stage:
barriers initialized before any copy, each stage's expect_tx before its copies, the wait
(try_wait.parity on the read slot's phase) before the wgmma that reads the slot, invalidation
after the loop; ptxas assembles it without spills. The pipelined IR runs in the interpreter,
which checks the mbarrier protocol (a wait for a phase that never completes is a fault), on
fresh random ragged shapes against float64. With the knob off, or for sm_80, or for device-side
descriptors (no host tensor map), the PTX is the same as without the knob.
"""
import os
import re
import sys

import numpy as np
import pytest

from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.config import knobs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import descriptor_matmul as dm  # noqa: E402

CONFIG_IDS = ["{BM}x{BN}x{BK}-s{num_stages}".format(**c) for c in dm.CONFIGS]


def compile_matmul(meta, tma=True, arch="sm_90a", size=512, device=False):
    a = np.zeros((size, size), np.float16)
    with knobs.scope(tma=tma, always_compile=True):
        if device:
            return dm.device_descriptor_matmul_kernel.compile(a, a, a, size, size, size,
                                                              arch=arch, **meta)
        return dm.descriptor_matmul_kernel.compile(*dm.descriptors(a, a, a, meta), size,
                                                   arch=arch, **meta)


def positions(ptx, pattern):
    return [m.start() for m in re.finditer(pattern, ptx)]


@pytest.mark.parametrize("meta", dm.CONFIGS, ids=CONFIG_IDS)
def test_tma_matmul_ptx(meta):
    kernel = compile_matmul(meta)
    ptx, stages = kernel.asm["ptx"], meta["num_stages"]
    assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx)) == 3  # a, b, c maps
    assert len(re.findall(r"cvta\.param\.u64", ptx)) >= 2  # a's and b's maps, read in place
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
    assert len(waits) == 1 and expects[stages - 2] < waits[0] < expects[-1] < min(wgmma)
    assert max(wgmma) < min(invals)
    # One mbarrier per stage: the expect_tx and wait addresses are 8 bytes apart per slot.
    tgir = kernel.asm["tgir"]
    barriers = re.search(r"local_alloc \{offset = (\d+)\} : \(\) -> tensor<(\d+)xi64", tgir)
    assert barriers and int(barriers.group(2)) >= stages
    assert re.search(r"mbarrier_wait %\d+, %\d+, %\d+", tgir)
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["registers"] > 0


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
def test_tma_pipeline_runs_in_the_interpreter(meta):
    kernel = compile_matmul(meta, size=64)
    module = ir.parse_module(kernel.asm["tgir"])
    rng = np.random.default_rng()
    m, n, k = (int(rng.integers(3, 14)) * 16 for _ in range(3))  # ragged, 16-divisible
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    da, db, dc = dm.descriptors(a, b, c, meta)
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


@pytest.mark.parametrize("arch, device", [("sm_90a", True), ("sm_80", False)])
def test_no_tma_without_a_host_map_or_on_sm_80(arch, device):
    meta = dm.CONFIGS[0]
    on = compile_matmul(meta, tma=True, arch=arch, device=device).asm["ptx"]
    off = compile_matmul(meta, tma=False, arch=arch, device=device).asm["ptx"]
    assert on == off and "cp.async.bulk" not in on


def test_knob_off_leaves_the_ir_untouched():
    kernel = compile_matmul(dm.CONFIGS[0], tma=False)
    assert "tensormap" not in kernel.asm["tir"] and "ptr<i8>" not in kernel.asm["tir"]
    assert "mbarrier" not in kernel.asm["ptx"] and "cp.async.cg" in kernel.asm["ptx"]
