"""TMA reductions of tensor descriptors (TESSERA_TMA_REDUCE, sm_90a) against torch.

`desc.atomic_add` / `atomic_min` / `atomic_max` / `atomic_and` / `atomic_or` / `atomic_xor`
through host TensorDescriptor arguments and device tl.make_tensor_descriptor values, many
programs reducing into the same blocks at once (grid axis 2), over ragged shapes (boxes past
the tensor's edges are clipped by the TMA unit): fp32 against a float64 sum, fp16 and bf16
within rounding of it; fp16/bf16 min/max and int32 reductions exactly (signed min/max with
negative values: the map's type decides the comparison). Column extents that are multiples
of 16 elements take the TMA reduction (asserted from the PTX); others (45, 77 columns) must
keep the masked pointer atomic (the TMA combines whole 16-byte chunks) and be just as
correct. Each destination is the top-left view of a bigger buffer: the guard columns after
each row and the rows below keep their values (nothing past the tensor is touched). A
split-K matmul adds its partial products into C from the accumulator's registers (three
configs, ragged shapes). Design: docs/perf/hopper.md, "TMA reductions". CPU checks:
tests/python/compiler/test_tma_reduce_ptx.py.
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
if torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("TMA reductions need sm_90a", allow_module_level=True)

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.config import knobs  # noqa: E402
from tessera.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

BULK_REDUCE = "cp.reduce.async.bulk.tensor"


@tessera.jit
def reduce_kernel(y_desc, x_ptr, M, N, OP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """Program (i, j, r) reduces x[r]'s block (i, j) into y's block (i, j)."""
    off_m = tl.program_id(0) * BM
    off_n = tl.program_id(1) * BN
    rows = off_m + tl.arange(0, BM)[:, None]
    cols = off_n + tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + tl.program_id(2) * M * N + rows * N + cols,
                mask=(rows < M) & (cols < N), other=0)
    if OP == "add":
        y_desc.atomic_add([off_m, off_n], x)
    elif OP == "min":
        y_desc.atomic_min([off_m, off_n], x)
    elif OP == "max":
        y_desc.atomic_max([off_m, off_n], x)
    elif OP == "and":
        y_desc.atomic_and([off_m, off_n], x)
    elif OP == "or":
        y_desc.atomic_or([off_m, off_n], x)
    else:
        y_desc.atomic_xor([off_m, off_n], x)


@tessera.jit
def device_reduce_kernel(y_ptr, x_ptr, M, N, stride_y, BM: tl.constexpr, BN: tl.constexpr):
    y_desc = tl.make_tensor_descriptor(y_ptr, [M, N], [stride_y, 1], [BM, BN])
    off_m = tl.program_id(0) * BM
    off_n = tl.program_id(1) * BN
    rows = off_m + tl.arange(0, BM)[:, None]
    cols = off_n + tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + tl.program_id(2) * M * N + rows * N + cols,
                mask=(rows < M) & (cols < N), other=0.0)
    y_desc.atomic_add([off_m, off_n], x)


@tessera.jit
def split_k_kernel(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr, SPLIT: tl.constexpr):
    """Split-K: program (i, j, s) adds the partial product of every SPLIT-th K block from s
    into C's block (i, j), straight from the accumulator's registers."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.program_id(2) * BK, K, BK * SPLIT):
        acc = tl.dot(a_desc.load([m, k]), b_desc.load([k, n]), acc)
    c_desc.atomic_add([m, n], acc)


def random(shape, dtype):
    if dtype.is_floating_point:
        return torch.randn(shape, device="cuda").to(dtype)
    return torch.randint(-(1 << 20), 1 << 20, shape, device="cuda", dtype=dtype)


def guarded(m, n, dtype, guard=16):
    """(buffer, view): an m x n view at the top-left of a random buffer with `guard` more
    rows and at least `guard` more columns (rows padded to 16 elements: descriptor strides
    are multiples of 16 bytes)."""
    width = -(-(n + guard) // 16) * 16
    big = random((m + guard, width), dtype)
    return big, big[:m, :n]


def outside(big, m, n):
    mask = torch.ones(big.shape, device="cuda", dtype=torch.bool)
    mask[:m, :n] = False
    return big[mask]


def run(op, y, x, bm, bn, reduce=True):
    """Launches the reduction of every x[r] into y; returns whether the TMA form was taken
    (from the kernel compiled for these same arguments)."""
    m, n = y.shape
    desc = TensorDescriptor.from_tensor(y, [bm, bn])
    grid = (tessera.cdiv(m, bm), tessera.cdiv(n, bn), x.shape[0])
    with knobs.scope(tma=True, tma_reduce=reduce):
        reduce_kernel[grid](desc, x, m, n, OP=op, BM=bm, BN=bn)
        ptx = reduce_kernel.compile(desc, x, m, n, OP=op, BM=bm, BN=bn,
                                    arch="sm_90a").asm["ptx"]
    torch.cuda.synchronize()
    return BULK_REDUCE in ptx


# (m, n): n a multiple of 16 takes the TMA reduction, 45 and 77 keep the pointer atomic.
SHAPES = [(300, 208), (1000, 1008), (77, 48), (77, 45), (130, 77)]
BLOCKS = [(64, 64), (32, 32), (128, 32)]


@pytest.mark.parametrize("block", BLOCKS, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fp32_add_from_many_programs(shape, block):
    m, n = shape
    torch.manual_seed(m * n + block[0])
    big, y = guarded(m, n, torch.float32)
    before = big.clone()
    x = torch.randn(16, m, n, device="cuda")
    expected = y.double() + x.double().sum(0)
    took_tma = run("add", y, x, *block)
    assert took_tma == (n % 16 == 0)
    torch.testing.assert_close(y.double(), expected, rtol=1e-5, atol=1e-4)
    assert torch.equal(outside(big, m, n), outside(before, m, n)), "touched outside the tensor"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("shape", [(300, 208), (77, 48), (130, 77)], ids=str)
def test_16_bit_add(dtype, shape):
    m, n = shape
    torch.manual_seed(m + n)
    big, y = guarded(m, n, dtype)
    before = big.clone()
    x = torch.randn(4, m, n, device="cuda").to(dtype)
    expected = y.double() + x.double().sum(0)
    assert run("add", y, x, 64, 64) == (n % 16 == 0)
    # Each step rounds to 16 bits in some order: well inside one addend (~1) per element.
    atol, rtol = (0.05, 0.01) if dtype == torch.float16 else (0.25, 0.02)
    torch.testing.assert_close(y.double(), expected, rtol=rtol, atol=atol)
    assert torch.equal(outside(big, m, n), outside(before, m, n)), "touched outside the tensor"


@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("shape", [(300, 208), (130, 77)], ids=str)
def test_16_bit_min_max(op, dtype, shape):
    # The TMA's min/max on the map's .f16/.bf16; off 16-byte columns a compare-and-swap loop.
    m, n = shape
    torch.manual_seed(m + n + len(op))
    big, y = guarded(m, n, dtype)
    before = big.clone()
    x = torch.randn(6, m, n, device="cuda").to(dtype)
    fn = torch.minimum if op == "min" else torch.maximum
    expected = y.clone()
    for part in x:
        expected = fn(expected, part)
    assert run(op, y, x, 64, 64) == (n % 16 == 0)
    assert torch.equal(y, expected)
    assert torch.equal(outside(big, m, n), outside(before, m, n)), "touched outside the tensor"


INT_REFERENCE = {"min": torch.minimum, "max": torch.maximum, "and": torch.bitwise_and,
                 "or": torch.bitwise_or, "xor": torch.bitwise_xor}


@pytest.mark.parametrize("op", ["add", "min", "max", "and", "or", "xor"])
@pytest.mark.parametrize("shape", [(300, 208), (77, 45)], ids=str)
def test_int32_reductions(op, shape):
    m, n = shape
    torch.manual_seed(m + n + len(op))
    big, y = guarded(m, n, torch.int32)
    before = big.clone()
    x = random((8, m, n), torch.int32)
    expected = y.clone()
    for part in x:
        expected = expected + part if op == "add" else INT_REFERENCE[op](expected, part)
    assert run(op, y, x, 32, 32) == (n % 16 == 0)
    assert torch.equal(y, expected)
    assert torch.equal(outside(big, m, n), outside(before, m, n)), "touched outside the tensor"


def test_knob_off_gives_the_same_int32_sums():
    m, n = 300, 208
    torch.manual_seed(5)
    x = random((8, m, n), torch.int32)
    start = random((m, n), torch.int32)
    results = {}
    for reduce in (True, False):
        y = start.clone()
        assert run("add", y, x, 64, 64, reduce=reduce) == reduce
        results[reduce] = y
    assert torch.equal(results[True], results[False])


@pytest.fixture
def allocator():
    """tessera.set_allocator's allocator (device descriptors' maps): torch memory."""
    tessera.set_allocator(lambda size, alignment, stream: torch.empty(
        size, device="cuda", dtype=torch.int8))
    yield
    from tessera.runtime.allocation import NullAllocator
    tessera.set_allocator(NullAllocator())


@pytest.mark.parametrize("shape", [(300, 208), (77, 45)], ids=str)
def test_device_descriptor_add(allocator, shape):
    m, n = shape
    torch.manual_seed(m + n + 11)
    big, y = guarded(m, n, torch.float32)
    before = big.clone()
    x = torch.randn(8, m, n, device="cuda")
    expected = y.double() + x.double().sum(0)
    grid = (tessera.cdiv(m, 64), tessera.cdiv(n, 64), x.shape[0])
    with knobs.scope(tma=True):
        device_reduce_kernel[grid](y, x, m, n, big.stride(0), BM=64, BN=64)
        ptx = device_reduce_kernel.compile(y, x, m, n, big.stride(0), BM=64, BN=64,
                                           arch="sm_90a").asm["ptx"]
    torch.cuda.synchronize()
    assert (BULK_REDUCE in ptx) == (n % 16 == 0)
    torch.testing.assert_close(y.double(), expected, rtol=1e-5, atol=1e-4)
    assert torch.equal(outside(big, m, n), outside(before, m, n)), "touched outside the tensor"


SPLIT_K = [dict(BM=128, BN=128, BK=64, num_warps=4, num_stages=3),
           dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=2),
           dict(BM=128, BN=64, BK=64, num_warps=8, num_stages=3)]


@pytest.mark.parametrize("shape", [(300, 208, 1024), (1000, 1008, 512), (77, 40, 256)],
                         ids=str)
@pytest.mark.parametrize("meta", SPLIT_K, ids=lambda m: "{BM}x{BN}x{BK}w{num_warps}".format(**m))
def test_split_k_matmul(meta, shape):
    m, n, k = shape
    torch.manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    big, c = guarded(m, n, torch.float32)
    before = big.clone()
    expected = c.double() + a.double() @ b.double()
    descs = (TensorDescriptor.from_tensor(a, [meta["BM"], meta["BK"]]),
             TensorDescriptor.from_tensor(b, [meta["BK"], meta["BN"]]),
             TensorDescriptor.from_tensor(c, [meta["BM"], meta["BN"]]))
    grid = (tessera.cdiv(m, meta["BM"]), tessera.cdiv(n, meta["BN"]), 4)
    with knobs.scope(tma=True):
        split_k_kernel[grid](*descs, k, SPLIT=4, **meta)
        ptx = split_k_kernel.compile(*descs, k, SPLIT=4, arch="sm_90a", **meta).asm["ptx"]
    torch.cuda.synchronize()
    assert (BULK_REDUCE in ptx) == (n % 16 == 0)
    torch.testing.assert_close(c.double(), expected, rtol=1e-4, atol=1e-2)
    assert torch.equal(outside(big, m, n), outside(before, m, n)), "touched outside the tensor"
