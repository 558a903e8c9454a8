# Property test of reductions and scans through the front end: random 2-D tiles (int32, fp32),
# random logical sizes inside the tile (masked loads fill the rest with the op's identity),
# random op and axis. The interpreter equals NumPy (exact for integers, float64 tolerance for
# floats), and the IR after canonicalize/cse/dce gives bit-identical results.
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
import tessera.language as tl
from tessera import interpreter
from tessera._tessera import passes
from tessera.compiler import build_tile_ir

OPS = ["sum", "max", "min", "argmax", "argmin", "cumsum"]


@tessera.jit
def reduce_kernel(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr,
                  OP: tl.constexpr, AXIS: tl.constexpr, FILL: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=FILL)
    if OP == "cumsum":
        y = tl.cumsum(x, axis=AXIS)
        tl.store(out_ptr + rows[:, None] * N + cols[None, :], y, mask=mask)
    else:
        if OP == "sum":
            r = tl.sum(x, axis=AXIS)
        elif OP == "max":
            r = tl.max(x, axis=AXIS)
        elif OP == "min":
            r = tl.min(x, axis=AXIS)
        elif OP == "argmax":
            r = tl.argmax(x, axis=AXIS)
        else:
            r = tl.argmin(x, axis=AXIS)
        if AXIS == 0:
            tl.store(out_ptr + cols, r, mask=cols < N)
        else:
            tl.store(out_ptr + rows, r, mask=rows < M)


def fill_for(op: str, dtype) -> object:
    """The identity of the op, so masked-off elements never change the result."""
    if op in ("sum", "cumsum"):
        return 0 if dtype == np.int32 else 0.0
    big = np.iinfo(np.int32).max if dtype == np.int32 else float("inf")
    return -big if op in ("max", "argmax") else big


def reference(x: np.ndarray, op: str, axis: int) -> np.ndarray:
    if op == "cumsum":
        return np.cumsum(x.astype(np.float64 if x.dtype != np.int32 else np.int64), axis=axis)
    return {"sum": lambda: x.astype(np.float64 if x.dtype != np.int32 else np.int64).sum(axis),
            "max": lambda: x.max(axis), "min": lambda: x.min(axis),
            "argmax": lambda: x.argmax(axis), "argmin": lambda: x.argmin(axis)}[op]()


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from([np.int32, np.float32]))
    bm, bn = draw(st.sampled_from([2, 4, 8, 16])), draw(st.sampled_from([4, 8, 32]))
    m, n = draw(st.integers(1, bm)), draw(st.integers(1, bn))
    op, axis = draw(st.sampled_from(OPS)), draw(st.sampled_from([0, 1]))
    seed = draw(st.integers(0, 2 ** 31 - 1))
    return dtype, bm, bn, m, n, op, axis, seed


def run_case(module, x, out, m, n):
    interpreter.run(module, (1,), [x, out, m, n], kernel_name="reduce_kernel")


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_random_reductions_match_numpy_and_survive_cleanup(case):
    dtype, bm, bn, m, n, op, axis, seed = case
    rng = np.random.default_rng(seed)
    # Few distinct integer values: ties exercise argmax/argmin's smallest-index rule.
    x = (rng.integers(-4, 5, (m, n)) if dtype == np.int32 else rng.standard_normal((m, n)))
    x = np.ascontiguousarray(x.astype(dtype))
    signature = {"x_ptr": "*i32" if dtype == np.int32 else "*fp32",
                 "M": "i32", "N": "i32"}
    index_result = op in ("argmax", "argmin")
    out_dtype = np.int32 if (dtype == np.int32 or index_result) else np.float32
    signature["out_ptr"] = "*i32" if out_dtype == np.int32 else "*fp32"
    signature = {k: signature[k] for k in ("x_ptr", "out_ptr", "M", "N")}
    constexprs = {"BM": bm, "BN": bn, "OP": op, "AXIS": axis, "FILL": fill_for(op, dtype)}
    module = build_tile_ir(reduce_kernel.fn, signature, constexprs)
    shape = x.shape if op == "cumsum" else (x.shape[1 - axis],)
    out = np.full(shape, -7, dtype=out_dtype)
    run_case(module, x, out, m, n)
    ref = reference(x, op, axis)
    if out_dtype == np.int32:
        np.testing.assert_array_equal(out, ref.astype(np.int64).astype(np.int32))
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * max(1, m, n))
    cleaned = module.clone()
    passes.run(cleaned, ["canonicalize", "cse", "dce"])
    again = np.full(shape, -7, dtype=out_dtype)
    run_case(cleaned, x, again, m, n)
    np.testing.assert_array_equal(again, out)
