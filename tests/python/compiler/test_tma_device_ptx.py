"""Device-side tensor descriptors through the TMA (TESSERA_TMA, sm_90a) without a GPU.

A ``tl.make_tensor_descriptor`` inside a kernel encodes its CUtensorMap in the kernel: 128
bytes of the launch's global scratch (``global_scratch``; the launcher allocates it through
``tessera.set_allocator``, as Triton does), written by thread 0 with ``tensormap.replace``
(every field: address, rank, box, dims, byte strides, element type, swizzle, fill) and made
visible to the TMA by the tensor-map proxy fences; its pipelined loads then use the host
descriptors' TMA plan with that global map. Checked here: the PTX (ptxas, no spills, also for
the compat suite's persistent descriptor matmul), the launches made through ``kernel[grid]``
with the driver faked (the scratch parameter and the allocator's call), the pipelined IR in the
interpreter on ragged shapes against float64, and the knob off changing nothing.
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
from tessera.runtime import allocation
from tessera.runtime import tensor_map as tm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, HERE)
import descriptor_matmul as dm  # noqa: E402
import test_tma_ptx as host_tma  # noqa: E402

check_tma_matmul = host_tma.check_tma_matmul
fake_gpu = host_tma.fake_gpu  # the faked driver (a module fixture), used here as it is there

HAVE_PTXAS = ptxas.find_ptxas() is not None


def compile_device(meta, tma=True, shape=(512, 512, 512), dtype=np.float16, arch="sm_90a"):
    m, n, k = shape
    a, b, c = np.zeros((m, k), dtype), np.zeros((k, n), dtype), np.zeros((m, n), dtype)
    with knobs.scope(tma=tma, always_compile=True):
        return dm.device_descriptor_matmul_kernel.compile(a, b, c, m, n, k, arch=arch, **meta)


def map_fields(ptx):
    """Per tensormap_create (one inline asm each): {field: [values]} of its replaces."""
    blocks = re.findall(r"\{ \.reg \.pred p; \.reg \.b32 z;[^\n]*", ptx)
    out = []
    for block in blocks:
        fields = {}
        for field, args in re.findall(r"tensormap\.replace\.tile\.(\w+)\.global\.b1024\.b\d+ "
                                      r"\[%rd\d+\], ([^;]+);", block):
            fields.setdefault(field, []).append(args)
        out.append((block, fields))
    return out


@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
def test_device_maps_feed_the_tma_pipeline(meta):
    kernel = compile_device(meta)
    ptx = kernel.asm["ptx"]
    check_tma_matmul(kernel, meta, device=True)
    # A's and B's maps are written (C is only stored: its map and scratch are dropped).
    assert kernel.metadata["global_scratch_size"] == 256
    assert kernel.metadata["global_scratch_align"] == 128
    assert "tensormaps" not in kernel.metadata and ".param .align 64" not in ptx
    maps = map_fields(ptx)
    assert len(maps) == 2
    for (block, fields), (rows, cols) in zip(maps, [(meta["BM"], meta["BK"]),
                                                    (meta["BK"], meta["BN"])]):
        box, swizzle = tm.box_and_swizzle([rows, cols], 2)
        assert fields["rank"] == ["1"]
        assert [a.split(", ")[1] for a in fields["box_dim"]] == [str(b) for b in box]
        assert fields["swizzle_mode"] == [str(swizzle)] and fields["elemtype"] == ["6"]
        assert fields["fill_mode"] == ["0"] and fields["interleave_layout"] == ["0"]
        assert len(fields["global_dim"]) == 2 and len(fields["global_stride"]) == 1
        assert fields["element_stride"] == ["0, 1", "1, 1"]
        assert block.count("st.global.v4.b32") == 8  # the 128 bytes zeroed first
        # Written, released, acquired, in that order, before any copy.
        release = block.index("fence.proxy.tensormap::generic.release.gpu")
        assert block.rindex("tensormap.replace") < release
        assert release < block.index("fence.proxy.tensormap::generic.acquire.gpu [%rd")
    assert ptx.rindex("fence.proxy.tensormap::generic.acquire") < ptx.index("cp.async.bulk")
    # The copies name the maps in global memory (registers), not parameters.
    copies = re.findall(r"cp\.async\.bulk\.tensor\.2d[^\[]*\[%r\d+\], \[(%\w+), ", ptx)
    assert copies and all(c.startswith("%rd") for c in copies)
    params = re.findall(r"\.param \.(\w+)[^\n]*_param_(\d+)", ptx)
    assert len(params) == 7 and params[-1][0] == "u64"  # 6 arguments, then the scratch
    if HAVE_PTXAS:
        assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["registers"] > 0


@tessera.jit
def nan_padded_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                             BK: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK], padding_option="nan")
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BK, BN])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_desc.load([tl.program_id(0) * BM, k]), b_desc.load([k, 0]))
    tl.store(c_ptr + tl.arange(0, BM)[:, None] * N + tl.arange(0, BN)[None, :], acc)


def test_bf16_and_nan_padding_fields():
    import ml_dtypes
    x = np.zeros((128, 128), ml_dtypes.bfloat16)
    with knobs.scope(tma=True, always_compile=True):
        kernel = nan_padded_matmul_kernel.compile(x, x, np.zeros((128, 128), np.float32), 128,
                                                  128, 128, BM=64, BN=64, BK=32,
                                                  arch="sm_90a", num_stages=3)
    creates = re.findall(r"tensormap_create [^\n]*", kernel.asm["tgir"])
    assert len(creates) == 2 and all("elem_type = 10" in c for c in creates)  # PTX's .bf16
    assert "fill_mode = 1" in creates[0] and "fill_mode = 0" in creates[1]  # A pads with NaN
    assert "swizzle_mode = 2" in creates[0]  # 32 bf16: 64-byte rows
    assert "swizzle_mode = 3" in creates[1] and "box_dim = [64, 32]" in creates[1]


def test_field_table_is_the_hosts():
    # One table: the element types differ between the driver's and PTX's numbering.
    assert tm.ELEMENT_TYPES["bf16"] == (9, 10) and tm.ELEMENT_TYPES["fp64"] == (8, 9)
    assert tm.DATA_TYPES["bf16"] == 9 and tm.DATA_TYPES["fp16"] == 6
    fields = tm.device_fields("fp16", 2, [64, 256], "zero")
    assert fields == {"box_dim": [64, 64], "elem_type": 6, "swizzle_mode": 3, "fill_mode": 0}
    with pytest.raises(ValueError, match="box dims"):
        tm.device_fields("fp16", 2, [512, 64], "zero")


def test_knob_off_and_sm_80_change_nothing():
    meta = dm.CONFIGS[0]
    off = compile_device(meta, tma=False)
    assert "global_scratch" not in off.metadata and "tensormap" not in off.asm["ptx"]
    assert "global_scratch" not in off.asm["tir"]
    on80 = compile_device(meta, tma=True, arch="sm_80").asm["ptx"]
    assert on80 == compile_device(meta, tma=False, arch="sm_80").asm["ptx"]


# --- the compat suite's kernel (tests/compat/kernels/descriptor_matmul.py) --------------------

COMPAT_CONFIGS = [  # its GPU config, and its CPU one compiled for the GPU
    dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, num_stages=3,
         num_warps=8),
    dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=2, num_stages=2,
         num_warps=4)]


@pytest.mark.parametrize("config", COMPAT_CONFIGS, ids=["gpu-config", "cpu-config"])
@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (333, 520, 216)], ids=["8192", "ragged"])
def test_compat_persistent_matmul_compiles_with_tma(config, shape):
    from compat import loader
    kernel = loader.load_tessera("descriptor_matmul").matmul_kernel_descriptor_persistent
    m, n, k = shape
    a, b, c = (np.zeros(s, np.float16) for s in ((m, k), (k, n), (m, n)))
    with knobs.scope(tma=True, always_compile=True):
        compiled = kernel.compile(a, b, c, m, n, k, NUM_SMS=132, arch="sm_90a", **config)
    ptx = compiled.asm["ptx"]
    b_boxes = max(1, config["BLOCK_SIZE_N"] * 2 // 128)
    assert ptx.count("cp.async.bulk.tensor") == config["num_stages"] * (1 + b_boxes)
    assert "cp.async.cg" not in ptx and len(map_fields(ptx)) == 2
    assert compiled.metadata["global_scratch_size"] == 256
    if HAVE_PTXAS:
        assert compiled.metadata["spill_stores"] == 0


# --- the interpreter runs the pipelined IR (its maps built by the kernel) ---------------------

@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
@pytest.mark.parametrize("ragged", [False, True], ids=["div16", "ragged"])
def test_device_tma_pipeline_runs_in_the_interpreter(meta, ragged):
    rng = np.random.default_rng()
    if ragged:  # M any; N and K odd multiples of 8 (16-byte rows, as the TMA needs)
        m = int(rng.integers(20, 200))
        n, k = (8 * int(2 * rng.integers(2, 12) + 1) for _ in range(2))
    else:
        m, n, k = (int(rng.integers(3, 14)) * 16 for _ in range(3))
    kernel = compile_device(meta, shape=(m, n, k))
    assert "cp.async.bulk.tensor" in kernel.asm["ptx"]
    module = ir.parse_module(kernel.asm["tgir"])
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    grid = (-(-m // meta["BM"]), -(-n // meta["BN"]))
    interpreter.run(module, grid=grid, args=[a, b, c, m, n, k])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


def test_interpreter_faults_on_a_misaligned_row_stride():
    meta = dm.CONFIGS[2]
    kernel = compile_device(meta, shape=(64, 64, 36))  # K = 36: 72-byte rows of A
    module = ir.parse_module(kernel.asm["tgir"])
    a, b = np.ones((64, 36), np.float16), np.ones((36, 64), np.float16)
    c = np.zeros((64, 64), np.float16)
    with pytest.raises(interpreter.KernelRuntimeError, match="multiples of 16 bytes"):
        interpreter.run(module, grid=(1, 1), args=[a, b, c, 64, 64, 36])


# --- tests/gpu/test_tma.py's device-descriptor launches, through kernel[grid] ------------------

class Allocations:
    """An allocator recording its calls (a CPU torch tensor stands for the GPU buffer)."""

    def __init__(self, torch):
        self.torch, self.calls, self.buffers = torch, [], []

    def __call__(self, size, alignment, stream):
        self.calls.append((size, alignment, stream))
        raw = self.torch.empty(size + alignment, dtype=self.torch.int8)
        start = -raw.data_ptr() % alignment
        self.buffers.append(raw[start:start + size])
        return self.buffers[-1]


@pytest.mark.parametrize("dtype", dm.TMA_DTYPES)
@pytest.mark.parametrize("shape", dm.TMA_SHAPES, ids=dm.TMA_SHAPE_IDS)
@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
def test_every_device_gpu_launch_compiles_with_tma(fake_gpu, dtype, shape, meta):
    torch = fake_gpu.torch
    m, n, k = shape
    a = torch.zeros(m, k, dtype=getattr(torch, dtype))
    b, c = torch.zeros(k, n, dtype=a.dtype), torch.zeros(m, n, dtype=a.dtype)
    allocations = Allocations(torch)
    allocation.set_allocator(allocations)
    try:
        for tma in (True, False):
            dm.launch_device_matmul(a, b, c, meta, tma)
    finally:
        allocation.set_allocator(allocation.NullAllocator())
        dm.device_descriptor_matmul_kernel._kernels.clear()  # the fixture's fake launchers
    (with_tma, kinds, buffer), (without, kinds_off, _) = fake_gpu.launches[-2:]
    check_tma_matmul(with_tma, meta, device=True)
    grid = tessera.cdiv(m, meta["BM"]) * tessera.cdiv(n, meta["BN"])
    assert allocations.calls == [(256 * grid, 128, 0)]  # once: the knob-off launch needs none
    assert kinds[-1] == "ptr" and len(kinds) == len(kinds_off) + 1
    scratch = allocations.buffers[0].data_ptr()
    assert int.from_bytes(buffer[-8:], "little") == scratch  # the last parameter
    assert "mbarrier" not in without.asm["ptx"] and "global_scratch_size" not in without.metadata


def test_a_launch_without_an_allocator_names_the_kernel(fake_gpu):
    torch = fake_gpu.torch
    a = torch.zeros(64, 64, dtype=torch.float16)
    try:
        with pytest.raises(RuntimeError, match="device_descriptor_matmul_kernel: Kernel "
                           "requires a runtime memory allocation.*set_allocator"):
            dm.launch_device_matmul(a, a, a, dm.CONFIGS[0], True)
    finally:
        dm.device_descriptor_matmul_kernel._kernels.clear()
