"""Reductions and scans on the GPU against PyTorch / NumPy float64, on fresh random inputs.

sum, max, min, argmax, argmin, a user tl.reduce (tuple: sum and sum of squares), cumsum and a
reverse associative_scan; 1-D, 2-D (along each axis) and 3-D tiles; fp32/fp16/bf16/int32;
num_warps 1, 4 and 8; masked edges (shapes that are not multiples of the block) with the
reduction's identity as `other`; outputs poisoned (NaN / -7) before each launch.
Tolerances (docs/benchmarks.md): ||out - ref|| / ||ref|| within fp32 1e-5, fp16 5e-3, bf16 1e-2,
against the same sums of |x| where fp16/bf16 accumulate in their own type (as Triton's sum).
"""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera
import tessera.language as tl

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32}
TOLERANCE = {"fp32": 1e-5, "fp16": 5e-3, "bf16": 1e-2}


@tessera.jit
def add_pairs(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@tessera.jit
def add(a, b):
    return a + b


@tessera.jit
def apply(x, OP: tl.constexpr, AXIS: tl.constexpr):
    if OP == "sum":
        r = tl.sum(x, AXIS, keep_dims=True)
    elif OP == "sum_fp32":
        r = tl.sum(x, AXIS, keep_dims=True, dtype=tl.float32)
    elif OP == "max":
        r = tl.max(x, AXIS, keep_dims=True)
    elif OP == "min":
        r = x.min(AXIS, keep_dims=True)
    elif OP == "argmax":
        r = tl.argmax(x, AXIS, keep_dims=True)
    elif OP == "argmin":
        r = tl.argmin(x, AXIS, keep_dims=True)
    elif OP == "pairs":
        s, q = tl.reduce((x, x * x), AXIS, add_pairs, keep_dims=True)
        r = s + q
    elif OP == "cumsum":
        r = tl.cumsum(x, AXIS)
    else:
        r = tl.associative_scan(x, AXIS, add, reverse=True)
    return r


@tessera.jit
def rows_kernel(x_ptr, out_ptr, M, N, OP: tl.constexpr, AXIS: tl.constexpr, BM: tl.constexpr,
                BN: tl.constexpr, OTHER: tl.constexpr):
    """One [BM, BN] block per program of an M x N matrix; result broadcast to the block."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    mask = (rows < M) & (cols < N)
    x = tl.load(x_ptr + rows * N + cols, mask=mask, other=OTHER)
    r = apply(x, OP, AXIS)
    tl.store(out_ptr + rows * N + cols, tl.broadcast_to(r, [BM, BN]), mask=mask)


@tessera.jit
def vector_kernel(x_ptr, out_ptr, N, OP: tl.constexpr, BN: tl.constexpr, OTHER: tl.constexpr):
    offs = tl.arange(0, BN)
    x = tl.load(x_ptr + offs, mask=offs < N, other=OTHER)
    r = apply(x, OP, 0)
    tl.store(out_ptr + offs, tl.broadcast_to(r, [BN]), mask=offs < N)


@tessera.jit
def cube_kernel(x_ptr, out_ptr, OP: tl.constexpr, AXIS: tl.constexpr, B0: tl.constexpr,
                B1: tl.constexpr, B2: tl.constexpr):
    offs = (tl.arange(0, B0)[:, None, None] * (B1 * B2) + tl.arange(0, B1)[None, :, None] * B2
            + tl.arange(0, B2)[None, None, :])
    r = apply(tl.load(x_ptr + offs), OP, AXIS)
    tl.store(out_ptr + offs, tl.broadcast_to(r, [B0, B1, B2]))


def identity(op, dtype):
    if op in ("max", "argmax"):
        return -math.inf if dtype != "i32" else -2**31
    if op in ("min", "argmin"):
        return math.inf if dtype != "i32" else 2**31 - 1
    return 0.0 if dtype != "i32" else 0


def out_dtype(op, dtype):
    if op in ("argmax", "argmin"):
        return torch.int32
    if op == "sum_fp32" or (op in ("max", "min") and dtype in ("fp16", "bf16")):
        return torch.float32
    return DTYPES[dtype]


def random_input(shape, dtype, gen):
    if dtype == "i32":
        return torch.randint(-1000, 1000, shape, device="cuda", generator=gen, dtype=torch.int32)
    return torch.randn(shape, device="cuda", generator=gen).to(DTYPES[dtype])


def poisoned(shape, op, dtype):
    kind = out_dtype(op, dtype)
    fill = float("nan") if kind.is_floating_point else -7
    return torch.full(shape, fill, device="cuda", dtype=kind)


def reference(x, op, axis):
    """float64 NumPy reference of `op` along `axis`, broadcast back to x's shape."""
    x64 = x.to(torch.float64).cpu().numpy() if x.dtype != torch.int32 else \
        x.cpu().numpy().astype(np.float64)
    result = {"sum": lambda: x64.sum(axis, keepdims=True),
              "sum_fp32": lambda: x64.sum(axis, keepdims=True),
              "max": lambda: x64.max(axis, keepdims=True),
              "min": lambda: x64.min(axis, keepdims=True),
              "argmax": lambda: np.expand_dims(x64.argmax(axis), axis),
              "argmin": lambda: np.expand_dims(x64.argmin(axis), axis),
              "pairs": lambda: (x64 + x64 * x64).sum(axis, keepdims=True),
              "cumsum": lambda: np.cumsum(x64, axis),
              "rscan": lambda: np.flip(np.cumsum(np.flip(x64, axis), axis), axis)}[op]()
    return np.broadcast_to(result, x64.shape)


def check(out, x, op, dtype, axis):
    got = out.to(torch.float64).cpu().numpy()
    ref = reference(x, op, axis)
    assert not np.isnan(got).any(), "an output element was not written"
    if op in ("max", "min", "argmax", "argmin") or dtype == "i32":
        np.testing.assert_array_equal(got, ref)
        return
    scale = reference(x.abs(), op, axis)  # the same sums of |x|: the rounding error's scale
    tolerance = TOLERANCE["fp32" if op == "sum_fp32" else dtype]
    error = np.linalg.norm(got - ref) / np.linalg.norm(scale)
    assert error <= tolerance, f"relative error {error}"


OPS = ["sum", "max", "min", "argmax", "argmin", "pairs", "cumsum", "rscan"]
# Every op in fp32 with 1, 4 and 8 warps; the other dtypes with 4 warps and fewer ops.
CASES_2D = ([("fp32", op, warps) for op in OPS for warps in (1, 4, 8)]
            + [(dtype, op, 4) for dtype in ("fp16", "bf16", "i32")
               for op in ("sum", "max", "argmin", "pairs", "cumsum")])


@pytest.mark.parametrize("dtype, op, num_warps", CASES_2D)
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("m, n, bm, bn", [(50, 100, 16, 128), (300, 7, 64, 8),
                                          (4, 1000, 4, 1024)])
def test_2d_blocks(m, n, bm, bn, axis, op, dtype, num_warps):
    gen = torch.Generator(device="cuda").manual_seed(hash((m, n, op, dtype, axis)) % 2**31)
    x = random_input((m, n), dtype, gen)
    out = poisoned((m, n), op, dtype)
    rows_kernel[(tessera.cdiv(m, bm),)](x, out, m, n, OP=op, AXIS=axis, BM=bm, BN=bn,
                                        OTHER=identity(op, dtype), num_warps=num_warps)
    if axis == 1:
        check(out, x, op, dtype, 1)
        return
    # Along axis 0 each program covers rows [start, start + bm): compare block by block.
    for start in range(0, m, bm):
        check(out[start:start + bm], x[start:start + bm], op, dtype, 0)


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("op", OPS + ["sum_fp32"])
@pytest.mark.parametrize("n, bn", [(1, 1), (17, 32), (1000, 1024), (4097, 8192)])
def test_1d_vectors(n, bn, op, num_warps):
    dtype = "fp16" if op == "sum_fp32" else "fp32"
    gen = torch.Generator(device="cuda").manual_seed(n * 31 + num_warps)
    x = random_input((n,), dtype, gen)
    out = poisoned((n,), op, dtype)
    vector_kernel[(1,)](x, out, n, OP=op, BN=bn, OTHER=identity(op, dtype), num_warps=num_warps)
    check(out, x, op, dtype, 0)


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("op", ["sum", "max", "argmin", "cumsum", "pairs"])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("shape", [(2, 8, 16), (16, 4, 32)])
def test_3d_tiles(shape, axis, op, num_warps):
    gen = torch.Generator(device="cuda").manual_seed(sum(shape) + axis)
    x = random_input(shape, "fp32", gen)
    out = poisoned(shape, op, "fp32")
    cube_kernel[(1,)](x, out, OP=op, AXIS=axis, B0=shape[0], B1=shape[1], B2=shape[2],
                      num_warps=num_warps)
    check(out, x, op, "fp32", axis)


def test_argmax_ties_pick_the_first_index():
    x = torch.randint(0, 3, (64, 128), device="cuda", dtype=torch.int32)
    out = poisoned((64, 128), "argmax", "i32")
    rows_kernel[(4,)](x, out, 64, 128, OP="argmax", AXIS=1, BM=16, BN=128, OTHER=-2**31)
    expected = np.broadcast_to(x.cpu().numpy().argmax(1)[:, None], (64, 128))
    np.testing.assert_array_equal(out.cpu().numpy(), expected)


def test_matches_torch_sum_and_cumsum():
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(97, 1000, device="cuda", generator=gen)
    out = poisoned((97, 1000), "sum", "fp32")
    rows_kernel[(tessera.cdiv(97, 4),)](x, out, 97, 1000, OP="sum", AXIS=1, BM=4, BN=1024,
                                        OTHER=0.0)
    torch.testing.assert_close(out[:, 0], x.sum(1), rtol=1e-5, atol=1e-4)
    rows_kernel[(tessera.cdiv(97, 4),)](x, out, 97, 1000, OP="cumsum", AXIS=1, BM=4, BN=1024,
                                        OTHER=0.0)
    torch.testing.assert_close(out, x.cumsum(1), rtol=1e-4, atol=1e-3)
