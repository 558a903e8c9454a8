"""TMA copies of descriptor loads of rank 3 and 4 (TESSERA_TMA, sm_90a) without a GPU.

Blocks whose leading dims are 1 (``[1, BM, BK]``, ``[1, 1, BM, BK]``) load a 2-D tile that
the pipeliner copies with ``cp.async.bulk.tensor.3d`` / ``.4d`` (coordinates innermost first),
the kernel's reshape back to 2-D folding away; host descriptors pass their map as a
parameter, device ones encode a rank-3 map in the kernel. ptxas: no spills. The pipelined IR
runs in the interpreter (which reads each box as the TMA unit does) on fresh random ragged
shapes against float64: a box past a batch's M reads zeros, never the next batch's rows.
Scripts: scripts/batched_descriptor_matmul.py (the GPU test, tests/gpu/test_tma.py, launches
the same kernels).
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
from tessera.frontend.descriptor_parameters import has_tensor_map

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import batched_descriptor_matmul as bm  # noqa: E402


def compile_kernel(meta, rank=3, device=False, tma=True, shape=(4, 256, 256, 256)):
    batches, m, n, k = shape
    a = np.zeros((batches, m, k), np.float16)
    b = np.zeros((batches, k, n), np.float16)
    c = np.zeros((batches, m, n), np.float16)
    with knobs.scope(tma=tma, always_compile=True):
        if device:
            return bm.device_batched_matmul_kernel.compile(a, b, c, batches, m, n, k, m * k, k,
                                                           k * n, n, arch="sm_90a", **meta)
        da, db = bm.descriptors(a, b, meta, rank)
        if rank == 4:
            return bm.batched4_matmul_kernel.compile(da, db, c, m, n, k, 2, m * n, n,
                                                     arch="sm_90a", **meta)
        return bm.batched_matmul_kernel.compile(da, db, c, m, n, k, m * n, n, arch="sm_90a",
                                                **meta)


@pytest.mark.parametrize("meta", bm.CONFIGS, ids=bm.CONFIG_IDS)
@pytest.mark.parametrize("rank,device", [(3, False), (4, False), (3, True)],
                         ids=["host3d", "host4d", "device3d"])
def test_rank_n_loads_copy_by_tma(meta, rank, device):
    kernel = compile_kernel(meta, rank, device)
    ptx, tgir = kernel.asm["ptx"], kernel.asm["tgir"]
    copy = rf"cp\.async\.bulk\.tensor\.{rank}d\.shared::cluster\.global\.mbarrier"
    b_boxes = max(1, meta["BN"] * 2 // 128)
    assert len(re.findall(copy, ptx)) == meta["num_stages"] * (1 + b_boxes)
    assert "cp.async.bulk.tensor.2d" not in ptx and "cp.async.cg" not in ptx
    assert "ld.global" not in ptx  # no pointer load of the tiles is left
    # Coordinates innermost first: {column, row, batch...}.
    operands = re.search(rf"{copy}[^\[]*\[[^\]]*\], \[[^,]+, \{{([^}}]*)\}}\]", ptx)
    assert operands and len(operands.group(1).split(",")) == rank
    assert "reshape" not in tgir  # the load's reshape and the kernel's cancel
    if device:
        assert len(re.findall(r"tensormap\.replace\.tile\.rank\.global\.b1024\.b32 \[[^]]+\], "
                              rf"{rank - 1};", ptx)) == 2
    else:
        assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx)) == 2
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["registers"] > 0


def test_without_tma_the_2d_tiles_are_pipelined_by_cp_async():
    # The leading dims of 1 collapse without a map too: cp.async rings of 2-D tiles.
    kernel = compile_kernel(bm.CONFIGS[0], tma=False)
    assert "cp.async.bulk.tensor" not in kernel.asm["ptx"]
    assert "cp.async.cg" in kernel.asm["ptx"]


def test_which_blocks_pass_a_map():
    assert has_tensor_map("tensordesc<fp16[1, 128, 64]>")
    assert has_tensor_map("tensordesc<fp16[1, 1, 1, 64, 64]>")
    assert not has_tensor_map("tensordesc<fp16[2, 64, 64]>")  # a 3-D tile: pointer loads
    assert not has_tensor_map("tensordesc<fp16[64]>")
    assert not has_tensor_map("tensordesc<fp16[1, 512, 64]>")  # over 256 rows


def run_interpreted(meta, shape, rank, device, rng):
    batches, m, n, k = shape
    a = rng.standard_normal((batches, m, k)).astype(np.float16)
    b = rng.standard_normal((batches, k, n)).astype(np.float16)
    c = np.full((batches, m, n), np.nan, np.float16)
    kernel = compile_kernel(meta, rank, device, shape=shape)
    assert f"cp.async.bulk.tensor.{rank}d" in kernel.asm["ptx"]
    module = ir.parse_module(kernel.asm["tgir"])
    grid = (-(-m // meta["BM"]), -(-n // meta["BN"]), batches)
    if device:
        args = [a, b, c, batches, m, n, k, m * k, k, k * n, n]
    else:
        da, db = bm.descriptors(a, b, meta, rank)
        parts = [[d.base, *d.shape, *d.strides, d] for d in (da, db)]
        args = parts[0] + parts[1] + [c, m, n, k] + ([2] if rank == 4 else []) + [m * n, n]
    interpreter.run(module, grid=grid, args=args)
    return c, bm.reference(a, b)


@pytest.mark.parametrize("meta", bm.CONFIGS, ids=bm.CONFIG_IDS)
@pytest.mark.parametrize("rank,device", [(3, False), (4, False), (3, True)],
                         ids=["host3d", "host4d", "device3d"])
def test_rank_n_pipeline_runs_in_the_interpreter(meta, rank, device):
    rng = np.random.default_rng()
    batches = 2 * int(rng.integers(1, 3))
    m = int(rng.integers(20, 200))  # ragged: boxes cross each batch's last row
    n, k = (8 * int(2 * rng.integers(2, 10) + 1) for _ in range(2))
    c, ref = run_interpreted(meta, (batches, m, n, k), rank, device, rng)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


# --- the launch (driver faked, test_tma_ptx.py's fixture): each map in the parameter buffer ---

from test_tma_ptx import FakeGpu, fake_gpu  # noqa: E402,F401  (a module fixture)


@pytest.mark.parametrize("rank", [3, 4])
def test_rank_n_launch_passes_each_map(fake_gpu, rank):  # noqa: F811
    torch = fake_gpu.torch
    meta = bm.CONFIGS[1]
    a = torch.zeros(4, 200, 72, dtype=torch.float16)
    b = torch.zeros(4, 72, 136, dtype=torch.float16)
    c = torch.zeros(4, 200, 136, dtype=torch.float16)
    with knobs.scope(tma=True):
        bm.launch(a, b, c, meta, rank)
    kernel, kinds, buffer = fake_gpu.launches[-1]
    assert kinds.count("tensormap") == 2
    assert f"cp.async.bulk.tensor.{rank}d" in kernel.asm["ptx"]
    for desc in bm.descriptors(a, b, meta, rank):
        offset = buffer.find(FakeGpu.map_bytes(desc))
        assert offset >= 0 and offset % 64 == 0
    bm.batched_matmul_kernel._kernels.clear()  # the fixture's fake launchers
    bm.batched4_matmul_kernel._kernels.clear()
