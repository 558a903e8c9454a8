"""tl.map_elementwise (Triton 3.6): a scalar @jit function over tensors, branching on element
values (each element takes only its own path: loads under a branch are masked to it), with
several results, early returns, nested helpers and pack. Interpreter against NumPy on ragged
sizes; compiled for sm_80 / sm_90a through ptxas."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas

BLOCK = 256


@tessera.jit
def selu_scalar(x, alpha):
    if x > 0:
        return x
    else:
        return alpha * (tl.exp(x) - 1)


@tessera.jit
def bucket(x):
    # early returns in order: the first that matches wins
    if x > 1.0:
        return x * 10.0, 3
    if x > 0.0:
        return x + 100.0, 2
    y = -x
    if y > 1.0:
        y = y * 0.5
    return y, 1


@tessera.jit
def lookup(i, table_ptr, n):
    # reads the table only where the index is valid: other elements must not touch memory
    if i < n:
        v = tl.load(table_ptr + i)
    else:
        v = -1.0
    return v


@tessera.jit
def swap_and_sum(x0, x1, y0, y1):
    return x1 + y1, x0 + y0


@tessera.jit
def kernel(x_ptr, idx_ptr, table_ptr, out_ptr, n, table_n, KIND: tl.constexpr,
           BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if KIND == "selu":
        tl.store(out_ptr + offs, tl.map_elementwise(selu_scalar, x, 1.67), mask=mask)
    elif KIND == "bucket":
        value, which = tl.map_elementwise(bucket, x)
        tl.store(out_ptr + offs, value + which.to(tl.float32) * 1000.0, mask=mask)
    elif KIND == "lookup":
        i = tl.load(idx_ptr + offs, mask=mask, other=0)
        tl.store(out_ptr + offs, tl.map_elementwise(lookup, i, table_ptr, table_n), mask=mask)
    else:
        y = x * 2.0
        (r,) = tl.map_elementwise(swap_and_sum, x, y, pack=2)
        tl.store(out_ptr + offs, r, mask=mask)


def _reference(kind, x, idx, table):
    x64 = x.astype(np.float64)
    if kind == "selu":
        return np.where(x64 > 0, x64, np.float32(1.67) * (np.exp(x64) - 1))
    if kind == "bucket":
        y = np.where(-x64 > 1.0, -x64 * 0.5, -x64)
        return np.select([x64 > 1.0, x64 > 0.0], [x64 * 10 + 3000, x64 + 100 + 2000], y + 1000)
    if kind == "lookup":
        valid = idx < len(table)
        return np.where(valid, table[np.where(valid, idx, 0)], -1.0)
    # pack=2 over the program's 256-element tile: pairs (x0, x1) -> (x1 + y1, x0 + y0)
    pairs = (x64 * 3).reshape(-1, 2)
    return pairs[:, ::-1].reshape(-1)


def _inputs(n):
    rng = np.random.default_rng()
    x = (rng.standard_normal(n) * 2).astype(np.float32)
    table = rng.standard_normal(int(rng.integers(10, 50))).astype(np.float32)
    idx = rng.integers(0, 2 * len(table), n).astype(np.int32)
    return x, idx, table


@pytest.mark.parametrize("kind", ["selu", "bucket", "lookup", "pack"])
def test_map_elementwise_interpreted(kind):
    n = BLOCK * 3 if kind == "pack" else int(np.random.default_rng().integers(300, 900))
    x, idx, table = _inputs(n)
    out = np.zeros(n, np.float32)
    run = tessera.jit(kernel.fn, interpret=True)
    run[(tessera.cdiv(n, BLOCK),)](x, idx, table, out, n, len(table), KIND=kind, BLOCK=BLOCK)
    expected = _reference(kind, x, idx, table)
    if kind in ("lookup", "pack"):
        np.testing.assert_array_equal(out, expected.astype(np.float32))
    else:
        np.testing.assert_allclose(out, expected, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("kind", ["selu", "bucket", "lookup", "pack"])
def test_map_elementwise_compiles(kind, arch):
    x, idx, table = _inputs(BLOCK)
    stages = kernel.asm(x, idx, table, np.zeros(BLOCK, np.float32), BLOCK, len(table),
                        KIND=kind, BLOCK=BLOCK, arch=arch)
    assert "st.global" in stages["ptx"]
    if ptxas.find_ptxas() is not None:
        assert "cubin" in stages


@tessera.jit
def _loops_forever(x):
    while x > 0:
        x -= 1.0
    return x


@tessera.jit
def _prints(x):
    if x > 0:
        tl.device_print("x", x)
    return x


@tessera.jit
def _falls_off(x):
    if x > 0:
        return x


@tessera.jit(interpret=True)
def bad_kernel(x_ptr, WHICH: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if WHICH == 0:
        x = tl.map_elementwise(_loops_forever, x)
    elif WHICH == 1:
        x = tl.map_elementwise(_prints, x)
    elif WHICH == 2:
        x = tl.map_elementwise(_falls_off, x)
    else:
        x = tl.map_elementwise(selu_scalar, x, 1.0, pack=3)
    tl.store(x_ptr + tl.arange(0, 16), x)


@pytest.mark.parametrize("which,message", [(0, "while loop on element values"),
                                           (1, "device_print under a condition"),
                                           (2, "fall off the end"),
                                           (3, "power of two")])
def test_map_elementwise_errors(which, message):
    with pytest.raises(tessera.CompilationError, match=message):
        bad_kernel[(1,)](np.zeros(16, np.float32), WHICH=which)


LIMIT = tl.constexpr(5)


@tessera.jit
def _count_below(x):
    # a per-element counter in a loop, starting from a literal
    count = 0
    for i in range(LIMIT):
        if x > i:
            count += 1
    return count


@tessera.jit(interpret=True)
def count_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.map_elementwise(_count_below, x), mask=offs < n)


def test_map_elementwise_loop_carried_counter():
    rng = np.random.default_rng()
    n = int(rng.integers(10, 128))
    x = (rng.standard_normal(n) * 4).astype(np.float32)
    out = np.zeros(n, np.int32)
    count_kernel[(1,)](x, out, n, BLOCK=128)
    np.testing.assert_array_equal(out, (x[:, None] > np.arange(5)).sum(axis=1))
