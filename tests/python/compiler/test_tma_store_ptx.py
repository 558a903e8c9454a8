"""TMA stores of host tensor descriptors (TESSERA_TMA_STORE, sm_90a) without a GPU.

With the knob on, `desc.store(offsets, value)` through a 2-D host TensorDescriptor keeps its
masked-store meaning in the IR (the store also carries the tensor map and the box's
coordinates, attribute `tma`) and codegen stages the tile in shared memory in the map's
swizzle, then: fence.proxy.async.shared::cta, bar.sync, one thread's
cp.async.bulk.tensor.2d.global.shared::cta.bulk_group per 128-byte column block,
commit_group; the wait for its reads (wait_group.read 0) comes before the next write of the
tile and before the return (membar's bulk_deferred). Checked here: that sequence, ptxas without
spills, the compiled IR in the interpreter on ragged shapes against float64, and that the
knob off, sm_80, and stores the TMA cannot make (rows under 32 bytes) keep the pointer store.
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
from tessera.tools.tensor_descriptor import TensorDescriptor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import descriptor_matmul as dm  # noqa: E402

BULK_STORE = r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group"


@tessera.jit
def descriptor_copy_kernel(x_desc, y_desc, BM: tl.constexpr, BN: tl.constexpr):
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    y_desc.store([m, n], x_desc.load([m, n]))


def positions(ptx, pattern):
    return [m.start() for m in re.finditer(pattern, ptx)]


def ragged_matmul(meta, store=True, arch="sm_90a", m=300, n=208, k=136):
    """The descriptor matmul specialized for ragged M, N (not multiples of the block) and K
    (N a multiple of 16, as the TMA store needs: test_inner_extent_off_16_bytes_...)."""
    a = np.zeros((m, k), np.float16)
    b = np.zeros((k, n), np.float16)
    c = np.zeros((m, n), np.float16)
    with knobs.scope(tma=True, tma_store=store, always_compile=True):
        return dm.descriptor_matmul_kernel.compile(*dm.descriptors(a, b, c, meta), k, arch=arch,
                                                   **meta)


def pointer_stores(ptx):
    """The st.global instructions of the PTX (not those zeroing a device tensor map: inline
    asm on one line with its tensormap.replace)."""
    return re.findall(r"^\s*(?:@!?%p\d+\s+)?st\.global", ptx, re.M)


def check_store_sequence(ptx, boxes, deferred=True):
    """The TMA store's PTX: every thread's proxy fence, the barrier, then the issuing thread's
    copies (one per 128-byte column block), their commit and the wait for their reads."""
    fences = positions(ptx, r"fence\.proxy\.async\.shared::cta")
    copies = positions(ptx, BULK_STORE)
    commits = positions(ptx, r"cp\.async\.bulk\.commit_group")
    assert len(copies) == boxes and len(commits) == 1
    fence = max(f for f in fences if f < min(copies))
    assert positions(ptx[fence:min(copies)], r"bar\.sync")  # writes of every thread
    assert max(copies) < commits[0]
    check_deferred_wait(ptx, commits[0], deferred)
    assert not pointer_stores(ptx)  # the masked pointer store is gone
    assert len(positions(ptx, r"elect\.sync")) == 1  # one issuing thread


def check_deferred_wait(ptx, commit, deferred=True):
    """The issuer does not wait for the bulk copy's reads at its commit (membar defers it):
    the wait comes later, each one right before a bar.sync (every thread's next write of
    the scratch after it), and one before the kernel returns. Not `deferred` (a kernel with
    a warp-specialized loop: its producer warps meet no barrier of the consumers'): at the
    commit."""
    waits = positions(ptx, r"cp\.async\.bulk\.wait_group\.read 0")
    if not deferred:
        assert len(waits) == 1 and commit < waits[0] < ptx.index("}", commit)
        return
    assert "wait_group" not in ptx[commit:ptx.index("}", commit)]
    assert waits and waits[-1] > commit
    for wait in waits:
        after = ptx[wait:]
        assert re.match(r"[^\n]*\n\s*// end inline asm\s*\n\s*bar\.sync\s+0;", after), after[:200]
    assert re.match(r"[^\n]*\n\s*// end inline asm\s*\n\s*bar\.sync\s+0;\s*\n\s*ret;",
                    ptx[waits[-1]:])


@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
def test_tma_store_ptx(meta):
    kernel = ragged_matmul(meta)
    # The accumulator is stored from its #mma registers (no conversion to the pointer tile's
    # layout first): stmatrix writes its fragments into the swizzled tile.
    assert re.search(r"store [^\n]*\{[^\n]*tma[^\n]*xf16, #mma>", kernel.asm["tgir"])
    assert "convert_layout" not in kernel.asm["tgir"].split("= for ")[-1].split("yield")[-1]
    check_store_sequence(kernel.asm["ptx"], max(1, meta["BN"] * 2 // 128))
    assert "stmatrix" in kernel.asm["ptx"]
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["registers"] > 0


@pytest.mark.parametrize("meta", dm.CONFIGS[:2], ids=dm.CONFIG_IDS[:2])
def test_tma_store_after_a_warp_specialized_loop(meta):
    # The producer warpgroup has left by the epilogue: the barrier is the consumers' named
    # one (bar.sync 1, num_warps * 32) and a consumer thread issues the copies.
    a, b, c = (np.zeros(s, np.float16) for s in ((300, 128), (128, 208), (300, 208)))
    with knobs.scope(tma=True, tma_store=True, warp_specialize=True, always_compile=True):
        kernel = dm.descriptor_matmul_kernel.compile(*dm.descriptors(a, b, c, meta), 128,
                                                     arch="sm_90a", **meta)
    ptx = kernel.asm["ptx"]
    assert kernel.metadata["total_num_warps"] == meta["num_warps"] + 4
    check_store_sequence(ptx, max(1, meta["BN"] * 2 // 128), deferred=False)
    fence = ptx.index("fence.proxy.async.shared::cta;")
    assert re.search(rf"bar\.sync\s+1, {meta['num_warps'] * 32};", ptx[fence:ptx.index(
        "cp.async.bulk.tensor.2d.global", fence)])
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0


def test_knob_off_and_sm_80_keep_the_pointer_store():
    meta = dm.CONFIGS[0]
    off = ragged_matmul(meta, store=False)
    assert not re.search(BULK_STORE, off.asm["ptx"]) and pointer_stores(off.asm["ptx"])
    with knobs.scope(tma=True, always_compile=True):  # the knob's default: off
        default = ragged_matmul(meta, store=knobs.tma_store)
    assert default.asm["ptx"] == off.asm["ptx"]
    on80 = ragged_matmul(meta, store=True, arch="sm_80").asm["ptx"]
    assert on80 == ragged_matmul(meta, store=False, arch="sm_80").asm["ptx"]
    assert "cp.async.bulk" not in on80


def test_the_knob_is_part_of_the_options_key():
    from tessera.launch_options import CODE_KNOBS, parse_options
    assert "tma_store" in CODE_KNOBS
    with knobs.scope(tma_store=True):
        on = parse_options("k", {}, None)
    with knobs.scope(tma_store=False):
        off = parse_options("k", {}, None)
    assert on != off and on.compile_options("sm_90a").key() != off.compile_options(
        "sm_90a").key()


@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
def test_tma_store_matmul_runs_in_the_interpreter(meta):
    rng = np.random.default_rng()
    m = int(rng.integers(20, 300))
    n = 16 * int(rng.integers(3, 40))  # ragged, a multiple of 16 (the TMA store's rule)
    k = 8 * int(2 * rng.integers(2, 20) + 1)  # 16-byte rows, ragged
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    da, db, dc = dm.descriptors(a, b, c, meta)
    with knobs.scope(tma=True, tma_store=True, always_compile=True):
        kernel = dm.descriptor_matmul_kernel.compile(da, db, dc, k, arch="sm_90a", **meta)
    assert re.search(BULK_STORE, kernel.asm["ptx"])
    module = ir.parse_module(kernel.asm["tgir"])
    args = [a, m, k, k, 1, da, b, k, n, n, 1, db, c, m, n, n, 1, dc, k]
    interpreter.run(module, grid=(-(-m // meta["BM"]), -(-n // meta["BN"])), args=args)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


COPIES = [(np.float16, 64, 64), (np.float16, 32, 16), (np.float32, 32, 64), (np.int8, 64, 128),
          (np.float32, 8, 8)]


@pytest.mark.parametrize("dtype,bm,bn", COPIES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_descriptor_copy(dtype, bm, bn):
    """A plain copy through two descriptors: the TMA store alone (the load is not in a loop),
    every element compared, and rows the TMA store takes (>= 32 bytes) vs those it leaves to
    the pointer store."""
    rng = np.random.default_rng()
    m, n = int(rng.integers(bm + 1, 4 * bm)), 16 * int(rng.integers(2, 8)) + 16
    x = (rng.standard_normal((m, n)) * 50).astype(dtype)
    y = np.zeros((m, n), dtype)
    dx, dy = (TensorDescriptor.from_tensor(t, [bm, bn]) for t in (x, y))
    with knobs.scope(tma=True, tma_store=True, always_compile=True):
        kernel = descriptor_copy_kernel.compile(dx, dy, BM=bm, BN=bn, arch="sm_90a")
    row_bytes = bn * np.dtype(dtype).itemsize
    ptx = kernel.asm["ptx"]
    if row_bytes >= 32:
        check_store_sequence(ptx, max(1, row_bytes // 128))
    else:
        assert not re.search(BULK_STORE, ptx) and pointer_stores(ptx)
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0
    module = ir.parse_module(kernel.asm["tgir"])
    args = [x, m, n, n, 1, dx, y, m, n, n, 1, dy]
    interpreter.run(module, grid=(-(-m // bm), -(-n // bn)), args=args)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("dtype,bn,n", [(np.int8, 128, 136), (np.float16, 64, 200),
                                        (np.float32, 32, 90)], ids=["int8", "fp16", "fp32"])
def test_inner_extent_off_16_bytes_keeps_the_pointer_store(dtype, bn, n):
    """The TMA unit writes whole 16-byte chunks: with an inner extent that is not a proven
    multiple of 16 elements, the chunk across it would be written past the tensor (measured on
    an H200: int8 with 136 columns wrote 8 bytes of each row's padding). Such a store stays
    the masked pointer store, and still copies exactly (interpreter)."""
    rng = np.random.default_rng()
    m = int(rng.integers(65, 200))
    n16 = -(-n // 16) * 16  # rows padded to 16 elements (descriptor strides: 16-byte multiples)
    x = (rng.standard_normal((m, n16)) * 50).astype(dtype)[:, :n]
    y_rows = np.full((m, n16), 77, dtype)
    y = y_rows[:, :n]
    dx, dy = (TensorDescriptor.from_tensor(t, [64, bn]) for t in (x, y))
    with knobs.scope(tma=True, tma_store=True, always_compile=True):
        kernel = descriptor_copy_kernel.compile(dx, dy, BM=64, BN=bn, arch="sm_90a")
    ptx = kernel.asm["ptx"]
    assert not re.search(BULK_STORE, ptx) and pointer_stores(ptx)
    module = ir.parse_module(kernel.asm["tgir"])
    interpreter.run(module, grid=(-(-m // 64), -(-n // bn)),
                    args=[x, m, n, n16, 1, dx, y, m, n, n16, 1, dy])
    np.testing.assert_array_equal(y, x)
    assert (y_rows[:, n:] == 77).all()
    # The same kernel at an extent of 16-multiples takes the TMA store.
    x16, y16 = (np.zeros((m, n16), dtype) for _ in range(2))
    with knobs.scope(tma=True, tma_store=True, always_compile=True):
        aligned = descriptor_copy_kernel.compile(
            *(TensorDescriptor.from_tensor(t, [64, bn]) for t in (x16, y16)), BM=64, BN=bn,
            arch="sm_90a")
    assert re.search(BULK_STORE, aligned.asm["ptx"])


def test_device_descriptor_off_16_bytes_keeps_the_pointer_store():
    meta = dm.CONFIGS[0]
    a, b, c = (np.zeros(s, np.float16) for s in ((100, 64), (64, 200), (100, 200)))
    with knobs.scope(tma=True, tma_store=True, always_compile=True):
        kernel = dm.device_descriptor_matmul_kernel.compile(a, b, c, 100, 200, 64,
                                                            arch="sm_90a", **meta)
    assert not re.search(BULK_STORE, kernel.asm["ptx"]) and pointer_stores(kernel.asm["ptx"])


# --- device descriptors (tl.make_tensor_descriptor: the map encoded in global scratch) -------

@pytest.mark.parametrize("meta", dm.CONFIGS, ids=dm.CONFIG_IDS)
def test_device_descriptor_store(meta):
    rng = np.random.default_rng()
    m = int(rng.integers(20, 300))
    n = 16 * int(rng.integers(3, 40))  # the int argument specialized as divisible by 16
    k = 8 * int(2 * rng.integers(2, 20) + 1)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    with knobs.scope(tma=True, tma_store=True, always_compile=True):
        kernel = dm.device_descriptor_matmul_kernel.compile(a, b, c, m, n, k, arch="sm_90a",
                                                            **meta)
    ptx = kernel.asm["ptx"]
    check_store_sequence(ptx, max(1, meta["BN"] * 2 // 128))
    # C's map is kept (the store reads it) and written before the store by the same thread.
    assert kernel.metadata["global_scratch_size"] == 384
    assert ptx.rindex("fence.proxy.tensormap::generic.acquire.gpu") < ptx.index(
        "cp.async.bulk.tensor.2d.global.shared::cta")
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0
    module = ir.parse_module(kernel.asm["tgir"])
    interpreter.run(module, grid=(-(-m // meta["BM"]), -(-n // meta["BN"])),
                    args=[a, b, c, m, n, k])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


@pytest.mark.parametrize("config", [
    dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, num_stages=3,
         num_warps=8),
    dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=2, num_stages=2,
         num_warps=4)], ids=["gpu-config", "cpu-config"])
def test_compat_persistent_matmul_stores_by_tma(config):
    """The compat suite's descriptor_matmul (triton_compat.py's A/B): the store in the tile
    loop, each tile's copy read out before the next tile's writes."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from compat import loader
    kernel = loader.load_tessera("descriptor_matmul").matmul_kernel_descriptor_persistent
    m, n, k = 333, 528, 216
    a, b, c = (np.zeros(s, np.float16) for s in ((m, k), (k, n), (m, n)))
    with knobs.scope(tma=True, tma_store=True, always_compile=True):
        compiled = kernel.compile(a, b, c, m, n, k, NUM_SMS=132, arch="sm_90a", **config)
    check_store_sequence(compiled.asm["ptx"], max(1, config["BLOCK_SIZE_N"] * 2 // 128))
    if ptxas.find_ptxas() is not None:
        assert compiled.metadata["spill_stores"] == 0
