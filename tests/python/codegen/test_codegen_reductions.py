"""Reductions and scans through the whole compiler: front end, layout passes, codegen.

Two checks per kernel: ptxas accepts the PTX with zero spills (skipped visibly without
ptxas), and the generated LLVM IR, executed thread by thread on the CPU (simt.py: shuffles
and barriers with the hardware's semantics, bounds-checked memory), gives NumPy's results on
fresh random inputs, for 1, 4 and 8 warps. The shape of the code (butterfly offsets, barriers
around shared memory) is checked in the PTX too.
"""
import os
import re
import secrets

import ml_dtypes
import numpy as np
import pytest
import tessera
import tessera.language as tl
from simt import run_kernel
from tessera._tessera import codegen, passes
from tessera.compiler import compiler, ptxas

DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16, "i32": np.int32}
TOLERANCE = {"fp32": 1e-5, "fp16": 5e-3, "bf16": 1e-2}


@pytest.fixture
def rng():
    seed = int(os.environ.get("CODEGEN_TEST_SEED") or secrets.randbits(32))
    print(f"numpy seed: {seed}")
    return np.random.default_rng(seed)


@tessera.jit
def add_pairs(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@tessera.jit
def add(a, b):
    return a + b


@tessera.jit
def apply(x, OP: tl.constexpr, AXIS: tl.constexpr):
    """The reduction or scan under test; reductions keep their dims so that every rank stores
    the result the same way."""
    if OP == "sum":
        r = tl.sum(x, AXIS, keep_dims=True)
    elif OP == "max":
        r = tl.max(x, AXIS, keep_dims=True)
    elif OP == "min":
        r = x.min(AXIS, keep_dims=True)
    elif OP == "argmax":
        r = tl.argmax(x, AXIS, keep_dims=True)
    elif OP == "argmin":
        r = tl.argmin(x, AXIS, keep_dims=True)
    elif OP == "pairs":  # a tuple reduce with a user combine function: sum and sum of squares
        s, q = tl.reduce((x, x * x), AXIS, add_pairs, keep_dims=True)
        r = s + q
    elif OP == "cumsum":
        r = tl.cumsum(x, AXIS)
    else:  # a user scan, from the end
        r = tl.associative_scan(x, AXIS, add, reverse=True)
    return r


@tessera.jit
def kernel_1d(x_ptr, out_ptr, M, N, OP: tl.constexpr, AXIS: tl.constexpr, B0: tl.constexpr,
              B1: tl.constexpr, B2: tl.constexpr, OTHER: tl.constexpr):
    offs = tl.arange(0, B0)
    x = tl.load(x_ptr + offs, mask=offs < N, other=OTHER)
    r = apply(x, OP, AXIS)
    tl.store(out_ptr + offs, tl.broadcast_to(r, [B0]))


@tessera.jit
def kernel_2d(x_ptr, out_ptr, M, N, OP: tl.constexpr, AXIS: tl.constexpr, B0: tl.constexpr,
              B1: tl.constexpr, B2: tl.constexpr, OTHER: tl.constexpr):
    rows = tl.arange(0, B0)[:, None]
    cols = tl.arange(0, B1)[None, :]
    x = tl.load(x_ptr + rows * N + cols, mask=(rows < M) & (cols < N), other=OTHER)
    r = apply(x, OP, AXIS)
    tl.store(out_ptr + rows * B1 + cols, tl.broadcast_to(r, [B0, B1]))


@tessera.jit
def kernel_3d(x_ptr, out_ptr, M, N, OP: tl.constexpr, AXIS: tl.constexpr, B0: tl.constexpr,
              B1: tl.constexpr, B2: tl.constexpr, OTHER: tl.constexpr):
    offs = (tl.arange(0, B0)[:, None, None] * (B1 * B2) + tl.arange(0, B1)[None, :, None] * B2
            + tl.arange(0, B2)[None, None, :])
    x = tl.load(x_ptr + offs)
    r = apply(x, OP, AXIS)
    tl.store(out_ptr + offs, tl.broadcast_to(r, [B0, B1, B2]))


KERNELS = {1: kernel_1d, 2: kernel_2d, 3: kernel_3d}
OUT_DTYPE = {"argmax": "i32", "argmin": "i32"}


def other_for(op, dtype):
    """The identity of the reduction: masked elements must not change the result."""
    if op in ("max", "argmax"):
        return -float("inf") if dtype != "i32" else -2**31
    if op in ("min", "argmin"):
        return float("inf") if dtype != "i32" else 2**31 - 1
    return 0.0 if dtype != "i32" else 0


def out_dtype(op, dtype):
    if op in OUT_DTYPE:
        return OUT_DTYPE[op]
    if op in ("max", "min") and dtype in ("fp16", "bf16"):
        return "fp32"  # as Triton: narrow floats are compared in fp32
    return dtype


def compile_case(rank, op, axis, dtype, shape, num_warps=4, arch="sm_90a"):
    signature = {"x_ptr": "*" + dtype, "out_ptr": "*" + out_dtype(op, dtype), "M": "i32",
                 "N": "i32"}
    blocks = list(shape) + [1] * (3 - len(shape))
    constexprs = {"OP": op, "AXIS": axis, "B0": blocks[0], "B1": blocks[1], "B2": blocks[2],
                  "OTHER": other_for(op, dtype)}
    module = compiler.build_tile_ir(KERNELS[rank], signature, constexprs, num_warps=num_warps)
    passes.run(module, compiler.PIPELINES["tgir"])
    return codegen.generate(module, arch=arch, num_warps=num_warps)


def reference(x, op, axis):
    x64 = x.astype(np.float64)
    reduce = {"sum": lambda: x64.sum(axis, keepdims=True),
              "max": lambda: x64.max(axis, keepdims=True),
              "min": lambda: x64.min(axis, keepdims=True),
              "argmax": lambda: np.expand_dims(x64.argmax(axis), axis),
              "argmin": lambda: np.expand_dims(x64.argmin(axis), axis),
              "pairs": lambda: (x64 + x64 * x64).sum(axis, keepdims=True),
              "cumsum": lambda: np.cumsum(x64, axis),
              "rscan": lambda: np.flip(np.cumsum(np.flip(x64, axis), axis), axis)}[op]()
    return np.broadcast_to(reduce, x.shape)


def simulate(rank, op, axis, dtype, shape, num_warps, rng, valid=None):
    """Runs the case's LLVM IR on the CPU; returns (output, reference). With `valid`, the
    kernel reads a valid^rank array into the block (rank 1 or 2), masked elements taking the
    reduction's identity."""
    result = compile_case(rank, op, axis, dtype, shape, num_warps)
    np_dtype = DTYPES[dtype]
    if dtype == "i32":
        x = rng.integers(-1000, 1000, shape).astype(np_dtype)
    else:
        x = rng.standard_normal(shape).astype(np_dtype)
    if valid is None:
        source, extents = x.reshape(-1), shape
    else:
        inside = tuple(slice(0, valid) for _ in shape)
        source, extents = np.ascontiguousarray(x[inside]).reshape(-1), (valid,) * rank
        x = np.full(shape, other_for(op, dtype), np_dtype)
        x[inside] = source.reshape(extents)
    m, n = (1, extents[0]) if rank == 1 else extents[:2]
    out = np.zeros(shape, DTYPES[out_dtype(op, dtype)])
    run_kernel(result["unoptimized_llvm_ir"], (1,), [source, out, m, n], num_warps,
               result["shared_bytes"])
    return out, reference(x, op, axis), reference(np.abs(x), op, axis)


def check(out, ref, scale, op, dtype):
    """Exact where the result is one of the elements (or integer); else the dtype's tolerance
    relative to the same sums of |x| (fp16/bf16 sums accumulate in fp16/bf16, as Triton's:
    their rounding error grows with the terms, not with a result that may cancel to ~0)."""
    if op in ("max", "min", "argmax", "argmin") or dtype == "i32":
        np.testing.assert_array_equal(out.astype(np.float64), ref)
        return
    out64 = out.astype(np.float64)
    assert not np.isnan(out64).any()
    error = np.linalg.norm(out64 - ref) / np.linalg.norm(scale)
    assert error <= TOLERANCE[dtype], f"relative error {error}"


CASES = [(rank, axis) for rank, shapes in ((1, 1), (2, 2), (3, 3)) for axis in range(rank)]
SHAPES = {1: [(64,), (1024,)], 2: [(16, 64), (64, 16), (2, 256)], 3: [(2, 8, 16), (4, 4, 64)]}


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("op", ["sum", "max", "argmin", "pairs", "cumsum", "rscan"])
@pytest.mark.parametrize("rank, axis", CASES)
def test_simulated_results(rng, rank, axis, op, num_warps):
    for shape in SHAPES[rank]:
        check(*simulate(rank, op, axis, "fp32", shape, num_warps, rng), op, "fp32")


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "i32"])
@pytest.mark.parametrize("op", ["sum", "max", "argmax", "min", "cumsum"])
def test_simulated_dtypes(rng, dtype, op):
    for rank, axis, shape in ((1, 0, (256,)), (2, 1, (8, 64)), (2, 0, (64, 8))):
        check(*simulate(rank, op, axis, dtype, shape, 4, rng), op, dtype)


@pytest.mark.parametrize("op", ["sum", "max", "min", "argmax", "argmin", "cumsum"])
@pytest.mark.parametrize("rank, axis", [(1, 0), (2, 0), (2, 1)])
def test_simulated_masked_edges(rng, rank, axis, op):
    # The kernel reads a 27 x 27 matrix (or 27 elements) into a 32 x 32 block: masked lanes
    # take the reduction's identity (0, -inf, +inf).
    shape = (32,) * rank
    out, ref, scale = simulate(rank, op, axis, "fp32", shape, 4, rng, valid=27)
    if op == "cumsum":  # only the valid part: the rest adds masked zeros
        inside = (slice(0, 27),) * rank
        out, ref, scale = out[inside], ref[inside], scale[inside]
    check(out, ref, scale, op, "fp32")


needs_ptxas = pytest.mark.skipif(ptxas.find_ptxas() is None,
                                 reason="ptxas not installed: PTX not assembled")


@needs_ptxas
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "i32"])
@pytest.mark.parametrize("op", ["sum", "argmax", "cumsum"])
@pytest.mark.parametrize("rank, axis", CASES)
def test_ptx_assembles_without_spills(rank, axis, op, dtype):
    shape = {1: (1024,), 2: (64, 64), 3: (4, 8, 32)}[rank]
    for arch in ("sm_80", "sm_90a") if rank == 2 else ("sm_90a",):
        result = compile_case(rank, op, axis, dtype, shape, arch=arch)
        assembled = ptxas.assemble(result["ptx"], arch)
        resources = assembled.kernels[f"kernel_{rank}d"]
        assert resources["spill_stores"] == 0 and resources["spill_loads"] == 0, assembled.log
        assert result["shared_bytes"] <= 48 * 1024


def test_butterfly_shuffles_then_shared_memory():
    # [1024] f32 over 4 warps: 8 registers per thread, 5 butterflies, 4 warp partials.
    result = compile_case(1, "sum", 0, "fp32", (1024,))
    ptx = result["ptx"]
    offsets = re.findall(r"shfl\.sync\.bfly\.b32\s+\S+, \S+, (\d+), 31, -1;", ptx)
    assert offsets == ["16", "8", "4", "2", "1"]
    # One barrier between the partials' stores and loads: nothing used shared memory before.
    assert ptx.count("bar.sync") == 1
    assert result["shared_bytes"] == 16  # one f32 per warp


def test_row_sums_need_no_shared_memory():
    # [16, 64] f32 along dim 1 with 1 warp: the lanes of a row meet in shuffles only, and the
    # reduce runs in the load's layout (no conversion before it).
    result = compile_case(2, "sum", 1, "fp32", (16, 64), num_warps=1)
    assert "bar.sync" not in result["ptx"].split("st.global")[0]
    assert re.search(r"shfl\.sync\.bfly\.b32", result["ptx"])
