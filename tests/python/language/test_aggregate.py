"""``tl.core._aggregate``: a record of tiles built in a kernel, its fields read, its @jit
methods called (``obj.method()``), passed to and returned from @jit helpers. Interpreter
results against NumPy on ragged sizes; the compiled kernel goes through ptxas; misuse gives
errors naming the field."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas


@tl.core._aggregate
class Pair:
    lo: tl.tensor
    hi: tl.tensor

    def __init__(self, lo, hi):
        self.lo = lo
        self.hi = hi

    @tessera.jit
    def weighted(self, w):
        return self.lo * w + self.hi

    @tessera.jit
    def swapped(self):
        return Pair(self.hi, self.lo)


@tessera.jit
def scale_pair(p, factor):
    return Pair(p.lo * factor, p.hi * factor)


@tessera.jit
def pair_kernel(a_ptr, b_ptr, out_ptr, n, w, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = Pair(tl.load(a_ptr + offs, mask=mask), tl.load(b_ptr + offs, mask=mask))
    q = scale_pair(p.swapped(), 2.0)
    tl.store(out_ptr + offs, q.weighted(w) - p.lo, mask=mask)


def _reference(a, b, w):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (2 * b64) * w + 2 * a64 - a64


@pytest.mark.parametrize("n", [1, 100, 333])
def test_aggregate_in_a_kernel(n):
    rng = np.random.default_rng()
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    w = float(rng.standard_normal())
    out = np.zeros(n, np.float32)
    tessera.jit(pair_kernel.fn, interpret=True)[(tessera.cdiv(n, 64),)](a, b, out, n, w,
                                                                        BLOCK=64)
    np.testing.assert_allclose(out, _reference(a, b, np.float32(w)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_aggregate_compiles(arch):
    x = np.zeros(64, np.float32)
    stages = pair_kernel.asm(x, x, x, 64, 1.5, BLOCK=64, arch=arch)
    if ptxas.find_ptxas() is not None:
        assert "cubin" in stages


@tl.core._aggregate
class Partial:
    acc: tl.tensor
    count: tl.tensor

    def __init__(self, acc):
        self.acc = acc


@tessera.jit
def partial_kernel(x_ptr):
    Partial(tl.load(x_ptr))


def test_missing_field_is_reported():
    with pytest.raises(Exception, match="did not initialize attribute 'count'"):
        tessera.jit(partial_kernel.fn, interpret=True)[(1,)](np.zeros(1, np.float32))


@tl.core._aggregate
class Extra:
    acc: tl.tensor

    def __init__(self, acc):
        self.acc = acc
        self.mid = acc


def test_unknown_and_mistyped_fields_are_rejected():
    with pytest.raises(AttributeError, match="Extra has no attribute 'mid'"):
        Extra(tl.tensor.__new__(tl.tensor))
    with pytest.raises(TypeError, match="attribute 'lo'"):
        Pair(1, 2)


def test_the_source_key_holds_the_constructor_and_the_methods():
    # An edited method or constructor must not reuse a cubin on disk made from the old text.
    key = pair_kernel.source_key()
    assert "self.lo = lo" in key                        # Pair.__init__, run at compile time
    assert "return self.lo * w + self.hi" in key        # Pair.weighted
    assert "return Pair(self.hi, self.lo)" in key       # Pair.swapped
    assert "aggregate" in key and "lo: tensor, hi: tensor" in key
