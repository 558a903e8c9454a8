"""TMA reductions of tensor descriptors (TESSERA_TMA_REDUCE, sm_90a) without a GPU.

`desc.atomic_add(offsets, value)` (and atomic_min/max/and/or/xor) through a 2-D descriptor
with a tensor map keeps its masked-atomic meaning in the IR (the atomic_rmw also carries the
map and the box's coordinates, attribute `tma`); where the store's rules hold, codegen stages
the tile in shared memory in the map's swizzle, then: fence.proxy.async.shared::cta,
bar.sync, one thread's cp.reduce.async.bulk.tensor.2d.global.shared::cta.<op>.tile.bulk_group
per 128-byte column block, commit_group (the wait for its reads, wait_group.read 0, deferred
to the next write of the tile and the return), and no atom/red is left. Checked
here: that sequence, ptxas without spills, the compiled IR in the interpreter on ragged
shapes against float64 / NumPy, and that a column bound not proven a multiple of 16 bytes,
8-byte elements, the knob off and sm_80 keep the pointer atomic.
"""
import re

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.config import knobs
from tessera.tools.tensor_descriptor import TensorDescriptor

from test_tma_store_ptx import check_deferred_wait


def bulk_reduce(op):
    return rf"cp\.reduce\.async\.bulk\.tensor\.2d\.global\.shared::cta\.{op}\.tile\.bulk_group"


ANY_BULK_REDUCE = r"cp\.reduce\.async\.bulk"


@tessera.jit
def reduce_kernel(y_desc, x_desc, OP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """Program (i, j, r) reduces x's block (i, j) into y's: the programs of every r hit the
    same block of y."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    x = x_desc.load([m, n])
    if OP == "add":
        y_desc.atomic_add([m, n], x)
    elif OP == "min":
        y_desc.atomic_min([m, n], x)
    elif OP == "max":
        y_desc.atomic_max([m, n], x)
    elif OP == "and":
        y_desc.atomic_and([m, n], x)
    elif OP == "or":
        y_desc.atomic_or([m, n], x)
    else:
        y_desc.atomic_xor([m, n], x)


@tessera.jit
def device_reduce_kernel(y_ptr, x_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    y_desc = tl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    rows = m + tl.arange(0, BM)[:, None]
    cols = n + tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + rows * N + cols, mask=(rows < M) & (cols < N), other=0.0)
    y_desc.atomic_add([m, n], x)


@tessera.jit
def split_k_kernel(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr, SPLIT: tl.constexpr):
    """Split-K: program (i, j, s) multiplies every SPLIT-th K block from s and adds its
    partial product into C's block (i, j)."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.program_id(2) * BK, K, BK * SPLIT):
        acc = tl.dot(a_desc.load([m, k]), b_desc.load([k, n]), acc)
    c_desc.atomic_add([m, n], acc)


@tessera.jit
def loop_reduce_kernel(y_desc, x_desc, R, BM: tl.constexpr, BN: tl.constexpr):
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    for r in range(R):
        y_desc.atomic_add([m, n], x_desc.load([m, n]) * (r + 1))


def positions(ptx, pattern):
    return [m.start() for m in re.finditer(pattern, ptx)]


def pointer_atomics(ptx):
    """atom/red on global memory (atom.global.add.f32, atom.relaxed.gpu.global.cas.b32...)."""
    return re.findall(r"\b(?:atom|red)\.(?:[a-z]+\.)*global", ptx)


def check_reduce_sequence(ptx, op, boxes, deferred=True):
    """The TMA reduction's PTX: every thread's proxy fence, the barrier, then the issuing
    thread's reductions (one per 128-byte column block), their commit and the wait for their
    reads; no pointer atomic left."""
    fences = positions(ptx, r"fence\.proxy\.async\.shared::cta")
    copies = positions(ptx, bulk_reduce(op))
    commits = positions(ptx, r"cp\.async\.bulk\.commit_group")
    assert len(copies) == boxes and len(commits) == 1
    assert len(positions(ptx, ANY_BULK_REDUCE)) == boxes  # no other reduction op
    fence = max(f for f in fences if f < min(copies))
    assert positions(ptx[fence:min(copies)], r"bar\.sync")  # writes of every thread
    assert max(copies) < commits[0]
    check_deferred_wait(ptx, commits[0], deferred)
    assert not pointer_atomics(ptx)  # the masked pointer atomic is gone
    assert len(positions(ptx, r"elect\.sync")) == 1  # one issuing thread


def padded(rng, dtype, m, n, fill=None):
    """An (m, n) view of a buffer whose rows are padded to 16 bytes plus 16 elements (a guard
    strip the kernel must never touch), random values, or `fill`."""
    per_16 = max(1, 16 // np.dtype(dtype).itemsize)
    width = -(-n // per_16) * per_16 + 16
    if fill is not None:
        big = np.full((m + 3, width), fill, dtype)
    elif np.dtype(dtype).kind == "f":
        big = rng.standard_normal((m + 3, width)).astype(dtype)
    else:
        big = rng.integers(-1000 if np.dtype(dtype).kind == "i" else 0, 1000, (m + 3, width),
                           dtype=dtype)
    return big, big[:m, :n]


def compile_reduce(y, x, op, bm, bn, arch="sm_90a", reduce=True):
    dy, dx = (TensorDescriptor.from_tensor(t, [bm, bn]) for t in (y, x))
    with knobs.scope(tma=True, tma_reduce=reduce, always_compile=True):
        return reduce_kernel.compile(dy, dx, OP=op, BM=bm, BN=bn, arch=arch), dy, dx


def run_compiled(kernel, y, x, dy, dx, grid):
    """The kernel's tgir (TMA operands and all) in the interpreter."""
    m, n = y.shape
    module = ir.parse_module(kernel.asm["tgir"])
    args = [y, m, n, y.strides[0] // y.itemsize, 1, dy,
            x, m, n, x.strides[0] // x.itemsize, 1, dx]
    interpreter.run(module, grid=grid, args=args)


# (op, dtype, block): fp32 rows of 256 bytes (two boxes), fp16 and bf16-sized rows of 128,
# int32 of 64 and 128 bytes.
TMA_CASES = [("add", np.float32, (64, 64)), ("add", np.float16, (64, 64)),
             ("add", np.int32, (32, 32)), ("add", np.uint32, (32, 32)),
             ("min", np.int32, (64, 16)), ("max", np.int32, (32, 32)),
             ("max", np.uint32, (32, 32)), ("and", np.int32, (32, 32)),
             ("or", np.int32, (32, 32)), ("xor", np.int32, (64, 32)),
             ("max", np.float16, (64, 64)), ("min", np.float16, (32, 32))]


@pytest.mark.parametrize("op,dtype,block", TMA_CASES,
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_tma_reduce_ptx(op, dtype, block):
    rng = np.random.default_rng()
    bm, bn = block
    m = int(rng.integers(bm + 1, 4 * bm))  # ragged rows
    n = 16 * int(rng.integers(3, 12))  # a multiple of 16 elements: ragged, whole chunks
    big, y = padded(rng, dtype, m, n)
    before = big.copy()
    _, x = padded(rng, dtype, m, n)
    kernel, dy, dx = compile_reduce(y, x, op, bm, bn)
    row_bytes = bn * np.dtype(dtype).itemsize
    ptx = kernel.asm["ptx"]
    check_reduce_sequence(ptx, op, max(1, row_bytes // 128))
    assert re.search(r"atomic_rmw [^\n]*tma = true", kernel.asm["tgir"])
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["registers"] > 0
    # Several programs into the same blocks (grid axis 2), through the compiled IR.
    reps = 3
    run_compiled(kernel, y, x, dy, dx, (-(-m // bm), -(-n // bn), reps))
    expected = before[:m, :n].copy()
    for _ in range(reps):
        if op == "add" and np.dtype(dtype).kind == "f":
            expected = expected.astype(np.float64) + x
        else:
            ufunc = {"add": np.add, "min": np.minimum, "max": np.maximum,
                     "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
            expected = ufunc(expected, x)
    if np.dtype(dtype).kind == "f":
        tol = 1e-2 if dtype == np.float16 else 1e-5
        np.testing.assert_allclose(y.astype(np.float64), expected, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(y, expected)
    outside = np.ones(big.shape, bool)
    outside[:m, :n] = False
    np.testing.assert_array_equal(big[outside], before[outside])


def test_tma_reduce_is_on_by_default():
    assert knobs.tma_reduce is True
    rng = np.random.default_rng()
    _, y = padded(rng, np.float32, 100, 64)
    _, x = padded(rng, np.float32, 100, 64)
    dy, dx = (TensorDescriptor.from_tensor(t, [64, 64]) for t in (y, x))
    with knobs.scope(tma=True, always_compile=True):
        kernel = reduce_kernel.compile(dy, dx, OP="add", BM=64, BN=64, arch="sm_90a")
    check_reduce_sequence(kernel.asm["ptx"], "add", 2)


@pytest.mark.parametrize("op,dtype,bn,n", [("add", np.float32, 32, 45),
                                           ("add", np.float16, 64, 77),
                                           ("add", np.int32, 32, 90),
                                           ("max", np.float16, 64, 77)],
                         ids=["fp32", "fp16", "int32", "fp16-max"])
def test_ragged_column_bound_keeps_the_pointer_atomic(op, dtype, bn, n):
    """A reduction across a row's edge would combine whole 16-byte chunks into the bytes past
    it: with an inner extent not proven a multiple of 16 bytes, the masked pointer atomic
    stays, and still touches nothing outside (interpreter, guard columns)."""
    rng = np.random.default_rng()
    m = int(rng.integers(33, 100))
    big, y = padded(rng, dtype, m, n)
    before = big.copy()
    _, x = padded(rng, dtype, m, n)
    kernel, dy, dx = compile_reduce(y, x, op, 32, bn)
    ptx = kernel.asm["ptx"]
    assert not re.search(ANY_BULK_REDUCE, ptx) and pointer_atomics(ptx)
    assert "tma = true" not in kernel.asm["tgir"]
    run_compiled(kernel, y, x, dy, dx, (-(-m // 32), -(-n // bn), 2))
    if op == "add":
        expected = before[:m, :n].astype(np.float64) + 2 * x.astype(np.float64)
    else:  # a 16-bit float max: a compare-and-swap loop on the 32-bit word
        expected = np.maximum(before[:m, :n], x).astype(np.float64)
    tol = 1e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(y.astype(np.float64), expected, rtol=tol, atol=tol)
    outside = np.ones(big.shape, bool)
    outside[:m, :n] = False
    np.testing.assert_array_equal(big[outside], before[outside])


@pytest.mark.parametrize("op,dtype,bn", [("add", np.uint64, 16), ("xor", np.int64, 16),
                                         ("add", np.float32, 4)],
                         ids=["u64-add", "i64-xor", "fp32-rows-of-16-bytes"])
def test_no_tma_form_keeps_the_pointer_atomic(op, dtype, bn):
    # 8-byte elements (the store's tile rule) and rows under 32 bytes (no swizzled map).
    y = np.zeros((64, 64), dtype)
    x = np.zeros((64, 64), dtype)
    kernel, _, _ = compile_reduce(y, x, op, 32, bn)
    ptx = kernel.asm["ptx"]
    assert not re.search(ANY_BULK_REDUCE, ptx) and pointer_atomics(ptx)


def test_knob_off_and_sm_80_keep_the_pointer_atomic():
    y = np.zeros((128, 64), np.float32)
    x = np.zeros((128, 64), np.float32)
    on = compile_reduce(y, x, "add", 64, 64)[0].asm["ptx"]
    off = compile_reduce(y, x, "add", 64, 64, reduce=False)[0].asm["ptx"]
    assert re.search(ANY_BULK_REDUCE, on) and not pointer_atomics(on)
    assert not re.search(ANY_BULK_REDUCE, off) and pointer_atomics(off)
    on80 = compile_reduce(y, x, "add", 64, 64, arch="sm_80")[0].asm["ptx"]
    assert on80 == compile_reduce(y, x, "add", 64, 64, arch="sm_80", reduce=False)[0].asm["ptx"]
    assert "cp.reduce" not in on80 and "cp.async.bulk" not in on80 and pointer_atomics(on80)


def test_the_knob_is_part_of_the_options_key():
    from tessera.launch_options import CODE_KNOBS, parse_options
    assert "tma_reduce" in CODE_KNOBS
    with knobs.scope(tma_reduce=True):
        on = parse_options("k", {}, None)
    with knobs.scope(tma_reduce=False):
        off = parse_options("k", {}, None)
    assert on != off and on.compile_options("sm_90a").key() != off.compile_options(
        "sm_90a").key()


def test_device_descriptor_reduction():
    """tl.make_tensor_descriptor: the map the kernel encodes is kept (the reduction reads it)
    and written before the reduction; the compiled IR in the interpreter."""
    rng = np.random.default_rng()
    m, n = int(rng.integers(70, 200)), 16 * int(rng.integers(3, 10))
    y = rng.standard_normal((m, n)).astype(np.float32)
    before = y.copy()
    x = rng.standard_normal((m, n)).astype(np.float32)
    with knobs.scope(tma=True, always_compile=True):
        kernel = device_reduce_kernel.compile(y, x, m, n, BM=64, BN=64, arch="sm_90a")
    ptx = kernel.asm["ptx"]
    check_reduce_sequence(ptx, "add", 2)
    assert kernel.metadata["global_scratch_size"] == 128
    assert ptx.rindex("fence.proxy.tensormap::generic.acquire.gpu") < ptx.index(
        "cp.reduce.async.bulk.tensor")
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0
    module = ir.parse_module(kernel.asm["tgir"])
    interpreter.run(module, grid=(-(-m // 64), -(-n // 64), 2), args=[y, x, m, n])
    np.testing.assert_allclose(y, before.astype(np.float64) + 2 * x.astype(np.float64),
                               rtol=1e-5, atol=1e-5)


SPLIT_K = [dict(BM=128, BN=128, BK=64, num_warps=4, num_stages=3),
           dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=2),
           dict(BM=128, BN=64, BK=64, num_warps=8, num_stages=3)]


@pytest.mark.parametrize("meta", SPLIT_K, ids=lambda m: "{BM}x{BN}x{BK}w{num_warps}".format(**m))
def test_split_k_matmul(meta):
    """The accumulator goes to the reduction from its #mma registers (no conversion to the
    pointer tile's layout first); the split partial products accumulate into C (interpreter,
    float64 reference)."""
    rng = np.random.default_rng()
    m = int(rng.integers(20, 300))
    n = 16 * int(rng.integers(3, 20))
    k = 16 * int(rng.integers(4, 24))
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = rng.standard_normal((m, n)).astype(np.float32)
    before = c.copy()
    da = TensorDescriptor.from_tensor(a, [meta["BM"], meta["BK"]])
    db = TensorDescriptor.from_tensor(b, [meta["BK"], meta["BN"]])
    dc = TensorDescriptor.from_tensor(c, [meta["BM"], meta["BN"]])
    with knobs.scope(tma=True, always_compile=True):
        kernel = split_k_kernel.compile(da, db, dc, k, SPLIT=3, arch="sm_90a", **meta)
    assert re.search(r"atomic_rmw [^\n]*tma = true[^\n]*xf32, #mma>", kernel.asm["tgir"])
    check_reduce_sequence(kernel.asm["ptx"], "add", meta["BN"] * 4 // 128)
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0
    module = ir.parse_module(kernel.asm["tgir"])
    args = [a, m, k, k, 1, da, b, k, n, n, 1, db, c, m, n, n, 1, dc, k]
    interpreter.run(module, grid=(-(-m // meta["BM"]), -(-n // meta["BN"]), 3), args=args)
    expected = before.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


def test_reduction_in_a_loop_waits_before_the_next_write():
    """Each step stages its tile in the same scratch: the issuing thread waits for the TMA's
    reads (wait_group.read 0) and every thread meets a barrier before the next step's
    writes (the loop's back edge returns to the wait and a bar.sync ahead of the st.shared),
    not right after the commit: the reads overlap the rest of the step."""
    y, x = np.zeros((128, 64), np.float32), np.zeros((128, 64), np.float32)
    dy, dx = (TensorDescriptor.from_tensor(t, [64, 64]) for t in (y, x))
    with knobs.scope(tma=True, always_compile=True):
        kernel = loop_reduce_kernel.compile(dy, dx, 3, BM=64, BN=64, arch="sm_90a")
    ptx = kernel.asm["ptx"]
    check_reduce_sequence(ptx, "add", 2)
    first_write = ptx.index("st.shared")
    label = ptx.rindex("$L__BB", 0, first_write)  # the loop block holding the writes
    name = ptx[label:ptx.index(":", label)]
    assert re.search(rf"bra(\.uni)?\s+{re.escape(name)};", ptx)  # it is branched back to
    assert "bar.sync" in ptx[label:first_write]
    assert "wait_group.read 0" in ptx[label:first_write]
    rng = np.random.default_rng()
    y = rng.standard_normal((100, 64)).astype(np.float32)
    x = rng.standard_normal((100, 64)).astype(np.float32)
    before = y.copy()
    dy, dx = (TensorDescriptor.from_tensor(t, [64, 64]) for t in (y, x))
    with knobs.scope(tma=True, always_compile=True):
        kernel = loop_reduce_kernel.compile(dy, dx, 3, BM=64, BN=64, arch="sm_90a")
    interpreter.run(ir.parse_module(kernel.asm["tgir"]), grid=(2, 1),
                    args=[y, 100, 64, 64, 1, dy, x, 100, 64, 64, 1, dx, 3])
    np.testing.assert_allclose(y, before + 6 * x.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_split_k_after_a_warp_specialized_loop():
    # The producer warpgroup has left by the reduction: the barrier is the consumers' named
    # one (bar.sync 1, num_warps * 32) and a consumer thread issues the reductions.
    meta = SPLIT_K[0]
    a, b, c = (np.zeros(s, t) for s, t in (((300, 512), np.float16), ((512, 208), np.float16),
                                          ((300, 208), np.float32)))
    descs = (TensorDescriptor.from_tensor(a, [meta["BM"], meta["BK"]]),
             TensorDescriptor.from_tensor(b, [meta["BK"], meta["BN"]]),
             TensorDescriptor.from_tensor(c, [meta["BM"], meta["BN"]]))
    with knobs.scope(tma=True, warp_specialize=True, always_compile=True):
        kernel = split_k_kernel.compile(*descs, 512, SPLIT=2, arch="sm_90a", **meta)
    ptx = kernel.asm["ptx"]
    assert kernel.metadata["total_num_warps"] == meta["num_warps"] + 4
    check_reduce_sequence(ptx, "add", meta["BN"] * 4 // 128, deferred=False)
    fence = ptx.index("fence.proxy.async.shared::cta;")
    assert re.search(rf"bar\.sync\s+1, {meta['num_warps'] * 32};",
                     ptx[fence:ptx.index("cp.reduce.async.bulk.tensor", fence)])
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0


@tessera.jit
def device_min_kernel(y_ptr, x_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    y_desc = tl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    y_desc.atomic_min([m, n], tl.load(x_ptr + tl.arange(0, BM)[:, None] * BN
                                      + tl.arange(0, BN)[None, :]))


@pytest.mark.parametrize("dtype,driver,ptx_code", [(np.int32, 3, 3), (np.uint32, 2, 2),
                                                   (np.float32, 7, 7), (np.float16, 6, 6)],
                         ids=["int32", "uint32", "fp32", "fp16"])
def test_the_reduction_type_is_the_maps(dtype, driver, ptx_code):
    """cp.reduce.async.bulk.tensor has no type suffix: the TMA reduces in the map's element
    type, so a signed min must come with an INT32 map and an unsigned one with UINT32. Host
    maps (cuTensorMapEncodeTiled's data type) and device maps (tensormap.replace .elemtype)
    both take it from the descriptor's dtype."""
    from tessera.runtime import tensor_map as tm
    y = np.zeros((64, 64), dtype)
    assert tm.encode_arguments(TensorDescriptor.from_tensor(y, [32, 32])).data_type == driver
    if dtype == np.float16 or dtype == np.float32:
        return
    with knobs.scope(tma=True, always_compile=True):
        kernel = device_min_kernel.compile(y, np.zeros((32, 32), dtype), 64, 64, BM=32, BN=32,
                                           arch="sm_90a")
    assert re.search(rf"tensormap_create [^\n]*elem_type = {ptx_code}\b", kernel.asm["tgir"])
    check_reduce_sequence(kernel.asm["ptx"], "min", 1)


@tessera.jit
def batched_reduce_kernel(y_desc, x_desc, BM: tl.constexpr, BN: tl.constexpr):
    b = tl.program_id(0)
    m = tl.program_id(1) * BM
    y_desc.atomic_add([b, m, 0], x_desc.load([b, m, 0]))


def test_rank_3_block_keeps_the_pointer_atomic():
    """The TMA form is 2-D only (the TMA store's tile): a [1, BM, BN] block of a rank-3
    descriptor is the masked pointer atomic on sm_90a, and means the same (interpreter)."""
    rng = np.random.default_rng()
    b, m, n = 3, 77, 64
    y = rng.standard_normal((b, m, n)).astype(np.float32)
    x = rng.standard_normal((b, m, n)).astype(np.float32)
    before = y.copy()
    dy, dx = (TensorDescriptor.from_tensor(t, [1, 32, 64]) for t in (y, x))
    with knobs.scope(tma=True, always_compile=True):
        kernel = batched_reduce_kernel.compile(dy, dx, BM=32, BN=64, arch="sm_90a")
    ptx = kernel.asm["ptx"]
    assert not re.search(ANY_BULK_REDUCE, ptx) and pointer_atomics(ptx)
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0
    args = [y, b, m, n, m * n, n, 1, dy, x, b, m, n, m * n, n, 1, dx]
    interpreter.run(ir.parse_module(kernel.asm["tgir"]), grid=(b, -(-m // 32)), args=args)
    np.testing.assert_allclose(y, before + x.astype(np.float64), rtol=1e-5, atol=1e-5)
