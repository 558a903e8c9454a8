# Tensor-descriptor reductions (Triton's desc.atomic_add / atomic_min / atomic_max /
# atomic_and / atomic_or / atomic_xor) run by the interpreter against NumPy: host
# TensorDescriptor arguments and device tl.make_tensor_descriptor values, ragged shapes (not
# multiples of the block), several programs reducing into the same blocks, elements outside
# the tensor (the padding of each row, a guard row below) never touched; and the errors
# Triton raises for the dtypes each reduction does not take.
import ml_dtypes
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import CompilationError
from tessera.tools.tensor_descriptor import TensorDescriptor

OPS = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
       "or": np.bitwise_or, "xor": np.bitwise_xor}


@tessera.jit
def reduce_block(y_desc, x_ptr, M, N, OP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """Program (i, j, r) reduces x[r]'s block (i, j) into y's block (i, j): the programs of
    every r hit the same block."""
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


@tessera.jit(interpret=True)
def host_reduce_kernel(y_desc, x_ptr, M, N, OP: tl.constexpr, BM: tl.constexpr,
                       BN: tl.constexpr):
    reduce_block(y_desc, x_ptr, M, N, OP, BM, BN)


@tessera.jit(interpret=True)
def device_reduce_kernel(y_ptr, x_ptr, M, N, stride_y, OP: tl.constexpr, BM: tl.constexpr,
                         BN: tl.constexpr):
    y_desc = tl.make_tensor_descriptor(y_ptr, [M, N], [stride_y, 1], [BM, BN])
    reduce_block(y_desc, x_ptr, M, N, OP, BM, BN)


def is_float(dtype):
    return np.dtype(dtype).kind == "f" or dtype == ml_dtypes.bfloat16


def inputs(rng, dtype, reps, m, n):
    if is_float(dtype):
        return rng.standard_normal((reps, m, n)).astype(dtype)
    info = np.iinfo(dtype)
    low, high = max(info.min, -(1 << 20)), min(info.max, 1 << 20)
    return rng.integers(low, high, (reps, m, n), dtype=dtype, endpoint=True)


def guarded(rng, dtype, m, n, guard=7):
    """(buffer, view): an m x n view at the top-left of a buffer `guard` rows and at least
    `guard` columns bigger (its row stride a multiple of 16 bytes, TensorDescriptor's rule),
    filled with random values; the rest of the buffer must keep them."""
    per_16 = 16 // np.dtype(dtype).itemsize
    width = -(-(n + guard) // per_16) * per_16
    big = inputs(rng, dtype, 1, m + guard, width)[0]
    return big, big[:m, :n]


def reference(op, y, x):
    if op == "add":
        return y.astype(np.float64) + x.astype(np.float64).sum(axis=0) \
            if is_float(y.dtype) else y + x.sum(axis=0, dtype=y.dtype)
    out = y.copy()
    for part in x:
        out = OPS[op](out, part)
    return out


def check(op, big, before, y, expected, m, n):
    if is_float(y.dtype) and op == "add":
        tol = 2e-2 if y.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(y.astype(np.float64), expected, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(y, expected)
    outside = np.ones(big.shape, bool)
    outside[:m, :n] = False
    np.testing.assert_array_equal(big[outside], before[outside])  # never touched


CASES = [("add", np.float32), ("add", np.float16), ("add", np.int32), ("add", np.uint32),
         ("min", np.int32), ("max", np.int32), ("min", np.uint32), ("max", np.int64),
         ("and", np.int32), ("or", np.int32), ("xor", np.int32), ("xor", np.uint64),
         ("min", np.float16), ("max", np.float16), ("min", ml_dtypes.bfloat16),
         ("max", ml_dtypes.bfloat16)]


@pytest.mark.parametrize("op,dtype", CASES, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("shape,block", [((77, 45), (32, 32)), ((40, 70), (16, 64))], ids=str)
def test_host_descriptor_reduction(rng, op, dtype, shape, block):
    m, n = shape
    bm, bn = block
    if bn * np.dtype(dtype).itemsize < 16:
        bn = 16 // np.dtype(dtype).itemsize
    reps = 3
    big, y = guarded(rng, dtype, m, n)
    before = big.copy()
    x = inputs(rng, dtype, reps, m, n)
    expected = reference(op, y.copy(), x)
    grid = (tessera.cdiv(m, bm), tessera.cdiv(n, bn), reps)
    host_reduce_kernel[grid](TensorDescriptor.from_tensor(y, [bm, bn]), x, m, n, OP=op, BM=bm,
                             BN=bn)
    check(op, big, before, y, expected, m, n)


@pytest.mark.parametrize("op,dtype", [("add", np.float32), ("add", np.float16),
                                      ("add", np.int32), ("min", np.int32),
                                      ("xor", np.int64)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_device_descriptor_reduction(rng, op, dtype):
    m, n = 77, 45
    reps = 4
    big, y = guarded(rng, dtype, m, n)
    before = big.copy()
    x = inputs(rng, dtype, reps, m, n)
    expected = reference(op, y.copy(), x)
    bn = max(32, 16 // np.dtype(dtype).itemsize)
    grid = (tessera.cdiv(m, 32), tessera.cdiv(n, bn), reps)
    device_reduce_kernel[grid](y, x, m, n, big.strides[0] // big.itemsize, OP=op, BM=32, BN=bn)
    check(op, big, before, y, expected, m, n)


def test_reduction_returns_nothing():
    y = np.zeros((16, 16), np.float32)
    desc = TensorDescriptor.from_tensor(y, [16, 16])

    @tessera.jit(interpret=True)
    def kernel(y_desc, BM: tl.constexpr, BN: tl.constexpr):
        result = y_desc.atomic_add([0, 0], tl.full((BM, BN), 1.0, tl.float32))
        tl.static_assert(result is None)  # Triton's void tensor

    kernel[(2,)](desc, BM=16, BN=16)
    np.testing.assert_array_equal(y, 2.0)


# ---- errors: the dtypes Triton's descriptor_atomic_* assert on, shapes, value types ----------

BAD = [
    ("float64", "x_desc.atomic_add([0, 0], tl.zeros((16, 16), tl.float64))", "Unsupported dtype"),
    ("int64", "x_desc.atomic_add([0, 0], tl.zeros((16, 16), tl.int64))", "Unsupported dtype"),
    ("float32", "x_desc.atomic_min([0, 0], tl.zeros((16, 16), tl.float32))", "Unsupported dtype"),
    ("float32", "x_desc.atomic_max([0, 0], tl.zeros((16, 16), tl.float32))", "Unsupported dtype"),
    ("float32", "x_desc.atomic_and([0, 0], tl.zeros((16, 16), tl.float32))", "Unsupported dtype"),
    ("float32", "x_desc.atomic_or([0, 0], tl.zeros((16, 16), tl.float32))", "Unsupported dtype"),
    ("float16", "x_desc.atomic_xor([0, 0], tl.zeros((16, 16), tl.float16))", "Unsupported dtype"),
    ("float32", "x_desc.atomic_add([0, 0], tl.zeros((8, 16), tl.float32))", "block shape"),
    ("float32", "x_desc.atomic_add([0, 0], 1.0)", "block shape"),
    ("float32", "x_desc.atomic_add([0], tl.zeros((16, 16), tl.float32))", "2 offsets"),
    ("float32", "x_desc.atomic_add([0, 0], tl.zeros((16, 16), tl.float16))", "convert it"),
]


@pytest.mark.parametrize("dtype,body,match", BAD)
def test_reduction_errors(tmp_path, dtype, body, match):
    import importlib.util
    path = tmp_path / "bad_reduction.py"
    path.write_text("import tessera\nimport tessera.language as tl\n\n\n"
                    "@tessera.jit(interpret=True)\n"
                    "def bad(x_desc):\n"
                    f"    {body}\n")
    spec = importlib.util.spec_from_file_location(f"bad_reduction_{abs(hash(body))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.zeros((16, 16), dtype)
    with pytest.raises(CompilationError, match=match) as info:
        module.bad[(1,)](TensorDescriptor.from_tensor(x, [16, 16]))
    assert "bad" in str(info.value) and ":7:" in str(info.value)


@tessera.jit(interpret=True)
def batched_reduce_kernel(y_desc, x_ptr, B, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """A [1, BM, BN] block of a (B, M, N) descriptor: program (b, i, r) adds x[r, b]'s block."""
    b = tl.program_id(0)
    off_m = tl.program_id(1) * BM
    rows = off_m + tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + (tl.program_id(2) * B + b) * M * N + rows * N + cols,
                mask=(rows < M) & (cols < N), other=0.0)
    y_desc.atomic_add([b, off_m, 0], x.reshape([1, BM, BN]))


def test_rank_3_descriptor_reduction(rng):
    b, m, n = 3, 37, 20
    big = rng.standard_normal((b, m + 5, 32)).astype(np.float32)
    y = big[:, :m, :n]
    before = big.copy()
    x = rng.standard_normal((2, b, m, n)).astype(np.float32)
    expected = y.astype(np.float64) + x.astype(np.float64).sum(axis=0)
    desc = TensorDescriptor.from_tensor(y, [1, 16, 32])
    batched_reduce_kernel[(b, tessera.cdiv(m, 16), 2)](desc, x, b, m, n, BM=16, BN=32)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    outside = np.ones(big.shape, bool)
    outside[:, :m, :n] = False
    np.testing.assert_array_equal(big[outside], before[outside])
