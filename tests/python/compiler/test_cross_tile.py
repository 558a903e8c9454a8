"""Cross-tile prefetch (transforms/pipeline/cross_tile.h) without a GPU: the persistent
descriptor matmul of scripts/persistent_descriptor_matmul.py, whose tile loop asks for it
(tl.range(flatten=True)), compiled for sm_90a. Its rings and mbarriers are made once, before
the tile loop, and invalidated after it; ptxas assembles it without spills; the compiled IR
runs in the interpreter (which faults on a broken mbarrier protocol: a wait for a phase that
cannot complete, a second arrival, bytes not announced) with fewer programs than tiles, on
fresh random ragged shapes (K of fewer steps than the ring's distance too) against float64,
with products in flight across steps and without. Without `flatten`, or without TMA, the
plan of every loop. tests/gpu/test_cross_tile.py runs the same cases on the GPU."""
import os
import re
import sys

import numpy as np
import pytest

from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.config import knobs
from tessera.runtime import allocation

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import persistent_descriptor_matmul as pdm  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_tma_device_ptx as device_tma  # noqa: E402

fake_gpu = device_tma.fake_gpu  # the faked driver (a module fixture), as the TMA tests use it

SMALL = pdm.GPU_CONFIGS[-1]


def compile_kernel(meta, shape, programs, flatten=True, tma=True, pipeline=None):
    m, n, k = shape
    a, b, c = (np.zeros(s, np.float16) for s in ((m, k), (k, n), (m, n)))
    scope = dict(tma=tma, always_compile=True)
    if pipeline is not None:
        scope["wgmma_pipeline"] = pipeline
    with knobs.scope(**scope):
        return pdm.persistent_matmul_kernel.compile(a, b, c, m, n, k, NUM_SMS=programs,
                                                    FLATTEN=flatten, arch="sm_90a", **meta)


def tile_loop_span(tgir):
    """(start, end) of the tile loop's text in the TGIR: its `for` line to its closing brace."""
    head = re.search(r"\n( *)(?:%\d+ = )?for [^\n]*\{flatten = 1\}[^\n]*\n", tgir)
    assert head, tgir
    end = tgir.index("\n" + head.group(1) + "}\n", head.end())
    return head.start(), end


@pytest.mark.parametrize("meta", pdm.GPU_CONFIGS, ids=pdm.GPU_CONFIG_IDS)
def test_rings_live_across_the_tile_loop(meta):
    kernel = compile_kernel(meta, (8192, 8192, 8192), 132)
    tgir = kernel.asm["tgir"]
    start, end = tile_loop_span(tgir)
    inits = [m.start() for m in re.finditer(r"mbarrier_init", tgir)]
    invals = [m.start() for m in re.finditer(r"mbarrier_inval", tgir)]
    assert len(inits) == 2 and max(inits) < start  # full and empty, once
    assert len(invals) == 2 and min(invals) > end
    # In the tile loop, before the K loop: the stages the previous tile did not copy, each
    # after its slot's release; in the K loop, one stage. Every copy waits for its release.
    body = tgir[start:end]
    assert body.count("mbarrier_expect_tx") == meta["num_stages"]
    assert body.count("tma_load") == 2 * meta["num_stages"]
    assert body.count("released = 1") == 2 * meta["num_stages"]
    ptx = kernel.asm["ptx"]
    b_boxes = max(1, meta["BLOCK_SIZE_N"] * 2 // 128)
    assert ptx.count("cp.async.bulk.tensor") == meta["num_stages"] * (1 + b_boxes)
    assert "bar.sync" not in ptx[ptx.index("mbarrier.try_wait"):ptx.rindex("wgmma.mma_async")]
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0


@pytest.mark.parametrize("flatten, tma", [(False, True), (True, False)],
                         ids=["no-flatten", "no-tma"])
def test_other_loops_keep_their_plan(flatten, tma):
    tgir = compile_kernel(SMALL, (336, 520, 216), 3, flatten=flatten, tma=tma).asm["tgir"]
    loops = [m.start() for m in re.finditer(r"\bfor %", tgir)]
    assert len(loops) == 2  # the tile loop, then the K loop
    if tma:  # rings and barriers made in each tile, between the two loops
        inits = [m.start() for m in re.finditer(r"mbarrier_init", tgir)]
        assert inits and all(loops[0] < i < loops[1] for i in inits)
    else:
        assert "mbarrier" not in tgir


@pytest.mark.parametrize("pipeline", [True, False], ids=["in-flight", "wait"])
@pytest.mark.parametrize("case", pdm.CASES, ids=pdm.CASE_IDS)
def test_cross_tile_pipeline_runs_in_the_interpreter(case, pipeline):
    rng = np.random.default_rng()
    m, n, k, programs = case
    m = int(rng.integers(m // 2, m + 1))  # fresh ragged M; N and K keep their 16-byte rows
    kernel = compile_kernel(SMALL, (m, n, k), programs, pipeline=pipeline)
    run_and_check(kernel, (m, n, k), programs, rng)


@pytest.mark.parametrize("meta", pdm.GPU_CONFIGS[:-1], ids=pdm.GPU_CONFIG_IDS[:-1])
def test_gpu_configs_run_in_the_interpreter(meta):
    rng = np.random.default_rng()
    m, n, k, programs = pdm.CASES[0]
    kernel = compile_kernel(meta, (m, n, k), programs)
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0
    run_and_check(kernel, (m, n, k), programs, rng)


def run_and_check(kernel, shape, programs, rng):
    m, n, k = shape
    assert "flatten = 1" in kernel.asm["tgir"]
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    interpreter.run(ir.parse_module(kernel.asm["tgir"]), grid=(programs,), args=[a, b, c, m, n, k])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


@pytest.mark.parametrize("case", pdm.CASES, ids=pdm.CASE_IDS)
def test_gpu_launches_compile_across_tiles(fake_gpu, case):
    # tests/gpu/test_cross_tile.py's launches (the small config) through kernel[grid], the
    # driver faked: the kernel each launch gets copies across tiles; one program per grid slot.
    torch = fake_gpu.torch
    m, n, k, programs = case
    a, b, c = (torch.zeros(*s, dtype=torch.float16) for s in ((m, k), (k, n), (m, n)))
    allocations = device_tma.Allocations(torch)
    allocation.set_allocator(allocations)
    try:
        pdm.launch(a, b, c, SMALL, programs)
    finally:
        allocation.set_allocator(allocation.NullAllocator())
        pdm.persistent_matmul_kernel._kernels.clear()  # the fixture's fake launchers
    launched = fake_gpu.launches[-1][0]
    tgir = launched.asm["tgir"]
    start, end = tile_loop_span(tgir)
    assert tgir.index("mbarrier_init") < start and tgir.rindex("mbarrier_inval") > end
    assert allocations.calls == [(256 * programs, 128, 0)]  # A's and B's maps per program
