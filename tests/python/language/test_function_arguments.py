"""@jit functions passed as kernel arguments, as Triton: alone or inside a (named) tuple with
the arguments they capture, they are compile-time values the kernel calls; each function is
its own specialization. Run in the interpreter against NumPy on ragged sizes."""
from collections import namedtuple

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.specialization import argument_key

BLOCK = 64
Closure = namedtuple("Closure", ["fn", "captured"])


@tessera.jit
def scale_by(x, a_ptr):
    return x * tl.load(a_ptr)


@tessera.jit
def shift_by(x, a_ptr):
    return x + tl.load(a_ptr)


@tessera.jit(interpret=True)
def apply_fn(fn, x_ptr, y_ptr, a_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, fn(tl.load(x_ptr + offs, mask=mask), a_ptr), mask=mask)


@tessera.jit(interpret=True)
def apply_closure(closure, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, closure.fn(x, *closure.captured), mask=mask)


@pytest.mark.parametrize("fn, reference", [(scale_by, np.multiply), (shift_by, np.add)])
def test_a_function_argument_is_called_by_the_kernel(fn, reference):
    rng = np.random.default_rng()
    n = int(rng.integers(1, 4 * BLOCK))
    x = rng.standard_normal(n).astype(np.float32)
    a = rng.standard_normal(1).astype(np.float32)
    y = np.zeros(n, np.float32)
    apply_fn[(tessera.cdiv(n, BLOCK),)](fn, x, y, a, n, BLOCK=BLOCK)
    np.testing.assert_allclose(y, reference(x.astype(np.float64), float(a[0])), rtol=1e-6,
                               atol=1e-6)


def test_a_namedtuple_of_a_function_and_its_captured_arguments():
    rng = np.random.default_rng()
    n = int(rng.integers(1, 4 * BLOCK))
    x = rng.standard_normal(n).astype(np.float32)
    a = rng.standard_normal(1).astype(np.float32)
    for fn, reference in ((scale_by, np.multiply), (shift_by, np.add), (scale_by, np.multiply)):
        y = np.zeros(n, np.float32)
        apply_closure[(tessera.cdiv(n, BLOCK),)](Closure(fn, (a,)), x, y, n, BLOCK=BLOCK)
        np.testing.assert_allclose(y, reference(x.astype(np.float64), float(a[0])),
                                   rtol=1e-6, atol=1e-6)


def test_each_function_is_its_own_compile_time_specialization():
    assert argument_key(scale_by) == ("constexpr", scale_by)
    assert argument_key(scale_by) != argument_key(shift_by)
    key = argument_key(Closure(scale_by, (np.zeros(4, np.float32),)))
    assert key[0] == "tuple" and key[1] is Closure and key[2][0] == ("constexpr", scale_by)
