"""Warp specialization of TMA-pipelined loops (TESSERA_WARP_SPECIALIZE or
tl.range(warp_specialize=True), with TESSERA_TMA, sm_90a) without a GPU.

A specialized descriptor matmul has num_warps + 4 warps: the mbarriers initialized before the
role split (the only CTA-wide bar.sync), then the producer warpgroup (thread ids from
num_warps * 32) gives registers back (setmaxnreg.dec 40) and issues every copy after waiting
for the slot's release; the consumers take registers (setmaxnreg.inc), wait for each slot's
bytes, run the wgmma and release the slot; every barrier of theirs is `bar.sync 1, threads`.
ptxas assembles it without spills. The specialized IR runs in the interpreter with both roles
as coroutines, so the full/empty protocol is checked on random ragged shapes against float64,
and a broken parity or a missing release faults instead of hanging.
"""
import os
import re
import sys

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.config import knobs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import descriptor_matmul as dm  # noqa: E402
from test_tma_ptx import check_tma_matmul, fake_gpu, positions  # noqa: E402,F401

CONFIG_IDS = dm.CONFIG_IDS


def compile_matmul(meta, specialize=True, pipeline=None, size=512, kernel=None, **constexprs):
    """``pipeline``: knobs.wgmma_pipeline for this compile (None: the knob's current value)."""
    a = np.zeros((size, size), np.float16)
    kernel = kernel or dm.descriptor_matmul_kernel
    pipeline = bool(knobs.wgmma_pipeline) if pipeline is None else pipeline
    with knobs.scope(tma=True, always_compile=True, warp_specialize=specialize,
                     wgmma_pipeline=pipeline):
        return kernel.compile(*dm.descriptors(a, a, a, meta), size, arch="sm_90a", **meta,
                              **constexprs)


def check_specialized(kernel, meta):
    """The role split of a specialized descriptor matmul of config ``meta`` (PTX and TGIR)."""
    ptx, warps = kernel.asm["ptx"], meta["num_warps"]
    threads = warps * 32
    assert kernel.metadata["num_warps"] == warps  # the launch option's meaning
    assert kernel.metadata["total_num_warps"] == warps + 4
    assert re.search(rf"\.maxntid {threads + 128}\b", ptx)
    launch = int(re.search(r"\.maxnreg (\d+)", ptx).group(1))
    assert launch * (threads + 128) <= 65536 and launch % 8 == 0
    dec = positions(ptx, r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40;")
    consumer = min(256, (65536 - 128 * 40) // threads // 8 * 8)
    inc = positions(ptx, rf"setmaxnreg\.inc\.sync\.aligned\.u32\s+{consumer};")
    assert len(dec) == 1 and len(inc) == 1 and dec[0] < inc[0]
    # Before the split: both rings' init, each with its CTA-wide barrier; after it only the
    # consumers' named barrier (the producer warps have left).
    cta = positions(ptx, r"bar\.sync\s+0;")
    assert len(cta) == 2 and max(cta) < dec[0]
    assert positions(ptx, rf"bar\.sync\s+1, {threads};")
    assert max(positions(ptx, r"mbarrier\.init\.shared::cta\.b64")) < cta[-1]
    # The producer (between dec and inc): the release waits, expect_tx and every copy.
    copies = positions(ptx, r"cp\.async\.bulk\.tensor\.2d")
    expects = positions(ptx, r"mbarrier\.arrive\.expect_tx")
    assert copies and all(dec[0] < c < inc[0] for c in copies + expects)
    assert len(expects) == 1  # one loop, no prologue
    assert re.search(r"@!p bra TESSERA_MBAR_SKIP", ptx[dec[0]:inc[0]])  # issuer's wait
    # The consumers: their wait for the bytes, the wgmma, the release (one arrive per warp).
    wgmma = positions(ptx, r"wgmma\.mma_async")
    arrives = positions(ptx, r"mbarrier\.arrive\.shared::cta\.b64")
    full = positions(ptx[inc[0]:], r"mbarrier\.try_wait\.parity")
    assert min(wgmma) > inc[0] and len(full) == 1 and len(arrives) == 1
    assert inc[0] + full[0] < min(wgmma) and arrives[0] > min(wgmma)
    assert "bar.warp.sync" in ptx[min(wgmma):arrives[0]]
    tgir = kernel.asm["tgir"]
    assert tgir.count("warp_specialize {") == 1
    assert re.search(r"mbarrier_init %\d+ \{count = " + str(warps) + r"\}", tgir)
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["registers"] > 0


@pytest.mark.parametrize("pipeline", [False, True], ids=["wait", "wgmma_pipeline"])
@pytest.mark.parametrize("meta", dm.CONFIGS, ids=CONFIG_IDS)
def test_specialized_matmul_ptx(meta, pipeline):
    with knobs.scope(wgmma_pipeline=pipeline):
        check_specialized(compile_matmul(meta, pipeline=pipeline), meta)


def test_knob_off_is_the_plain_tma_pipeline():
    meta = dm.CONFIGS[0]
    off = compile_matmul(meta, specialize=False)
    assert "setmaxnreg" not in off.asm["ptx"] and "total_num_warps" not in off.metadata
    check_tma_matmul(off, meta)


@tessera.jit
def range_matmul_kernel(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr, WS: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=WS):
        acc += tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]))
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@tessera.jit
def indexed_matmul_kernel(a_desc, b_desc, c_desc, K, rows, BM: tl.constexpr, BN: tl.constexpr,
                          BK: tl.constexpr):
    # The row of A comes from memory: the producer cannot recompute it (no loads there).
    pid_m = tl.load(rows + tl.program_id(0))
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]))
    c_desc.store([tl.program_id(0) * BM, pid_n * BN], acc.to(c_desc.dtype))


def test_the_loop_asks_with_tl_range():
    meta = dm.CONFIGS[0]
    asked = compile_matmul(meta, specialize=False, kernel=range_matmul_kernel, WS=True)
    check_specialized(asked, meta)
    plain = compile_matmul(meta, specialize=False, kernel=range_matmul_kernel, WS=False)
    assert "setmaxnreg" not in plain.asm["ptx"]


def test_ineligible_loops_keep_the_plain_pipeline():
    meta = dm.CONFIGS[0]
    a = np.zeros((512, 512), np.float16)
    rows = np.zeros(4, np.int32)
    with knobs.scope(tma=True, always_compile=True, warp_specialize=True):
        kernel = indexed_matmul_kernel.compile(*dm.descriptors(a, a, a, meta), 512, rows,
                                               arch="sm_90a", **meta)
    ptx = kernel.asm["ptx"]
    assert "cp.async.bulk.tensor" in ptx and "setmaxnreg" not in ptx
    assert "total_num_warps" not in kernel.metadata
    with knobs.scope(tma=True, always_compile=True, warp_specialize=True):  # 16 warps, a
        big = dict(meta, num_warps=16)  # 128-row tile: still 4 + 16 warps <= 32
        assert "setmaxnreg" in compile_matmul(big).asm["ptx"]


def run_in_interpreter(meta, tgir, m, n, k, rng):
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    da, db, dc = dm.descriptors(a, b, c, meta)
    args = [a, m, k, k, 1, da, b, k, n, n, 1, db, c, m, n, n, 1, dc, k]
    grid = (-(-m // meta["BM"]), -(-n // meta["BN"]))
    interpreter.run(ir.parse_module(tgir), grid=grid, args=args)
    return a, b, c


@pytest.mark.parametrize("pipeline", [False, True], ids=["wait", "wgmma_pipeline"])
@pytest.mark.parametrize("meta", dm.CONFIGS, ids=CONFIG_IDS)
def test_specialized_ir_runs_in_the_interpreter(meta, pipeline):
    # Ragged M, N; K from 2 to ~12 ring trips, so the producer waits for releases.
    rng = np.random.default_rng()
    m = int(rng.integers(20, 300))
    n = 8 * int(2 * rng.integers(2, 12) + 1)
    k = 8 * int(2 * rng.integers(4, 40) + 1)
    a0 = np.zeros((k, k), np.float16)
    with knobs.scope(tma=True, always_compile=True, warp_specialize=True,
                     wgmma_pipeline=pipeline):
        kernel = dm.descriptor_matmul_kernel.compile(*dm.descriptors(a0, a0, a0, meta), k,
                                                     arch="sm_90a", **meta)
    assert "warp_specialize {" in kernel.asm["tgir"]
    a, b, c = run_in_interpreter(meta, kernel.asm["tgir"], m, n, k, rng)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


def broken(tgir, how):
    producer = tgir.index("warp_specialize {")
    loop = re.compile(r"= for ([^\n]*?), (%\d+), (%\d+) :").search(tgir, producer)
    if how == "parity":  # the producer's first release wait expects parity 0: never completes
        return tgir[:loop.start(3)] + loop.group(2) + tgir[loop.end(3):]
    # the consumers never release their slots: the producer's wait for a second trip hangs
    return re.sub(r"\n\s*mbarrier_arrive [^\n]*", "", tgir)


@pytest.mark.parametrize("how", ["parity", "release"])
def test_a_broken_protocol_faults(how):
    meta = dm.CONFIGS[2]
    kernel = compile_matmul(meta, size=64)
    with pytest.raises(interpreter.KernelRuntimeError, match="would never return"):
        run_in_interpreter(meta, broken(kernel.asm["tgir"], how), 64, 64, 320,
                           np.random.default_rng())


@pytest.mark.parametrize("shape", dm.TMA_SHAPES, ids=dm.TMA_SHAPE_IDS)
@pytest.mark.parametrize("meta", dm.CONFIGS, ids=CONFIG_IDS)
def test_every_gpu_launch_compiles_specialized(fake_gpu, shape, meta):  # noqa: F811
    # tests/gpu/test_tma.py's specialized launches, through kernel[grid](...) (driver faked):
    # the block of the launch is num_warps + 4 warps.
    torch = fake_gpu.torch
    m, n, k = shape
    a = torch.zeros(m, k, dtype=torch.float16)
    b = torch.zeros(k, n, dtype=a.dtype)
    c = torch.zeros(m, n, dtype=a.dtype)
    dm.launch_matmul(a, b, c, meta, True, warp_specialize=True)
    kernel, kinds, buffer = fake_gpu.launches[-1]
    check_specialized(kernel, meta)
    assert kinds.count("tensormap") == 3
    assert fake_gpu.block_warps[-1] == meta["num_warps"] + 4
    dm.launch_matmul(a, b, c, meta, True, warp_specialize=False)  # the knob is in the key
    assert "setmaxnreg" not in fake_gpu.launches[-1][0].asm["ptx"]
    assert fake_gpu.block_warps[-1] == meta["num_warps"]
