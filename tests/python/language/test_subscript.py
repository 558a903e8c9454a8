"""Subscripts of tiles (x[None, :]) in the interpreter, as Triton's tensor.__getitem__."""
import numpy as np
import pytest

import tessera
import tessera.language as tl



# Subscripts as Triton's tensor.__getitem__: None inserts a size-1 dim where it stands, ':'
# changes nothing, also past the tensor's last dim (a store pointer indexed for a keep_dims
# reduction of any rank), and other indices are refused.
@tessera.jit(interpret=True)
def _subscript_kernel(Z, X, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, N))
    s = tl.sum(x)
    t = s[None, None, :]
    tl.static_assert(t.shape == [1, 1])
    u = x[None, :, :]
    tl.static_assert(u.shape == [1, N])
    v = x[:, None, :]
    tl.static_assert(v.shape == [N, 1])
    z_ptr = Z[None, None, :]
    tl.store(z_ptr + tl.arange(0, N)[None, :] + tl.zeros([1, 1], tl.int32), u + t)


def test_subscript_colons_past_the_rank_change_nothing():
    rng = np.random.default_rng()
    n = 16
    x = rng.standard_normal(n).astype(np.float32)
    z = np.zeros(n, np.float32)
    _subscript_kernel[(1,)](z, x, n)
    np.testing.assert_allclose(z, x + x.astype(np.float64).sum(), rtol=1e-5, atol=1e-5)


@tessera.jit(interpret=True)
def _bad_subscript_kernel(X):
    X[2:]


def test_subscript_with_a_bound_is_refused():
    with pytest.raises(tessera.CompilationError, match="unsupported tensor index"):
        _bad_subscript_kernel[(1,)](np.zeros(4, np.float32))
