"""`return` inside a runtime `if` (early exit), with Triton's semantics: in kernels (the rest of
the kernel does not run for that program) and in @jit helpers (the value of the call is the
value of the return that ran), through nested ifs, compile-time loops and helpers called from
runtime loops; against NumPy references on fresh inputs. Errors as Triton's: a return inside a
runtime loop, inconsistent return types."""
import numpy as np
import pytest

import tessera
import tessera.language as tl


@tessera.jit(interpret=True)
def guarded_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:  # programs past the end leave at once
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


def test_kernel_early_exit(rng):
    n = int(rng.integers(1, 500))
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full(n + 64, 7.0, np.float32)
    # a grid far larger than needed: a program past n that did not return would store past n
    guarded_copy[(tessera.cdiv(n, 32) + 3,)](x, y, n, BLOCK=32)
    np.testing.assert_array_equal(y[:n], x + 1)
    np.testing.assert_array_equal(y[n:], 7.0)


@tessera.jit
def classify(v, lo, hi):
    """-1 below lo, 1 above hi, else v: three returns, two of them early."""
    if v < lo:
        return v * 0 - 1
    elif v > hi:
        return v * 0 + 1
    return v


@tessera.jit
def first_negative(x_ptr, n, BLOCK: tl.constexpr):
    """A helper that returns from inside an if nested in a compile-time loop."""
    for i in tl.static_range(BLOCK):
        if i < n:
            if tl.load(x_ptr + i) < 0:
                return i
    return -1


@tessera.jit(interpret=True)
def helper_kernel(x_ptr, out_ptr, idx_ptr, n, lo, hi, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = 0.0
    for i in range(0, n):  # a helper with early returns called from a runtime loop
        acc += classify(tl.load(x_ptr + pid * n + i), lo, hi)
    tl.store(out_ptr + pid, acc)
    tl.store(idx_ptr + pid, first_negative(x_ptr + pid * n, n, BLOCK))


def test_helper_early_returns(rng):
    rows, n = 5, int(rng.integers(1, 16))
    x = rng.standard_normal((rows, n)).astype(np.float32) * 2
    x[rng.integers(0, rows)] = np.abs(x[0]) + 0.5  # one row without negatives
    lo, hi = -0.5, 1.0
    out, idx = np.zeros(rows, np.float32), np.zeros(rows, np.int32)
    helper_kernel[(rows,)](x.reshape(-1), out, idx, n, lo, hi, BLOCK=16)
    expected = np.where(x < lo, -1.0, np.where(x > hi, 1.0, x)).astype(np.float32)
    np.testing.assert_allclose(out, expected.sum(axis=1), rtol=1e-5, atol=1e-5)
    negative = x < 0
    np.testing.assert_array_equal(idx, np.where(negative.any(axis=1), negative.argmax(axis=1), -1))


@tessera.jit
def split_tile(x, limit):
    """Tuples of tiles returned early: (x, x * 2) or (x * 0, x) when the sum is large."""
    if tl.sum(x, axis=0) > limit:
        return x * 0, x
    return x, x * 2


@tessera.jit(interpret=True)
def tuple_kernel(x_ptr, a_ptr, b_ptr, count_ptr, limit, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    a, b = split_tile(tl.load(x_ptr + offs), limit)
    tl.store(a_ptr + offs, a)
    count = 0
    while count < 3:  # variables changed after an early return reach the end of the kernel
        count += 1
    if pid % 2 == 1:
        tl.store(count_ptr + pid, count + 100)
        return
    count += pid
    tl.store(b_ptr + offs, b)
    tl.store(count_ptr + pid, count)


def test_tuples_and_state_after_return(rng):
    programs, block = 6, 16
    x = rng.standard_normal(programs * block).astype(np.float32)
    a, b = np.zeros_like(x), np.full_like(x, 5.0)
    count = np.zeros(programs, np.int32)
    tuple_kernel[(programs,)](x, a, b, count, 0.0, BLOCK=block)
    rows = x.reshape(programs, block)
    large = rows.sum(axis=1) > 0
    np.testing.assert_array_equal(a.reshape(programs, block), np.where(large[:, None], 0, rows))
    odd = np.arange(programs) % 2 == 1
    expected_b = np.where(large[:, None], rows, rows * 2)
    np.testing.assert_array_equal(b.reshape(programs, block),
                                  np.where(odd[:, None], 5.0, expected_b))
    np.testing.assert_array_equal(count, np.where(odd, 103, 3 + np.arange(programs)))


def _compile_error(kernel, *args, **kwargs):
    with pytest.raises(tessera.CompilationError) as info:
        kernel[(1,)](*args, **kwargs)
    return str(info.value)


def test_return_inside_a_runtime_loop_is_an_error():
    @tessera.jit(interpret=True)
    def loop_return(x_ptr, n):
        for i in range(n):
            if tl.load(x_ptr + i) < 0:
                return
            tl.store(x_ptr + i, 1.0)

    message = _compile_error(loop_return, np.zeros(4, np.float32), 4)
    assert message.startswith("loop_return: ")
    assert "Cannot have `return` statements inside `while` or `for` statements" in message
    assert message.splitlines()[-2].strip() == "return"  # the source line of the return


def test_inconsistent_return_types():
    @tessera.jit
    def half_returns(v):
        if v > 0:
            return v

    @tessera.jit(interpret=True)
    def falls_off(x_ptr):
        tl.store(x_ptr, half_returns(tl.load(x_ptr)))

    message = _compile_error(falls_off, np.zeros(1, np.float32))
    assert "Inconsistent return types" in message and "half_returns" in message

    @tessera.jit
    def two_types(v):
        if v > 0:
            return v
        return 1  # int32 vs fp32

    @tessera.jit(interpret=True)
    def mixed(x_ptr):
        tl.store(x_ptr, two_types(tl.load(x_ptr)))

    message = _compile_error(mixed, np.zeros(1, np.float32))
    assert "Inconsistent return types: fp32[] and int32[]" in message
    assert "return 1  # int32 vs fp32" in message and "in two_types(), inlined at" in message
