"""tl.where with a non-boolean condition, as Triton 3.6: taken as `cond != 0`, with a
deprecation warning at compile time; a boolean condition warns nothing. Checked in the
interpreter against NumPy on a ragged size."""
import warnings

import numpy as np
import pytest

import tessera
import tessera.language as tl

BLOCK = 128


@tessera.jit(interpret=True)
def select(c_ptr, x_ptr, y_ptr, out_ptr, n, BOOL: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = tl.load(c_ptr + offs, mask=mask, other=0)
    if BOOL:
        c = c != 0
    out = tl.where(c, tl.load(x_ptr + offs, mask=mask), tl.load(y_ptr + offs, mask=mask))
    tl.store(out_ptr + offs, out, mask=mask)


@pytest.mark.parametrize("dtype", [np.uint32, np.int8, np.float32])
def test_a_non_boolean_condition_selects_nonzero_and_warns(dtype):
    rng = np.random.default_rng()
    n = int(rng.integers(1, 3 * BLOCK))
    c = rng.integers(0, 3, n).astype(dtype)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    with pytest.warns(UserWarning, match="tl.where with a non-boolean condition is deprecated"):
        select[(tessera.cdiv(n, BLOCK),)](c, x, y, out, n, BOOL=False, BLOCK=BLOCK)
    np.testing.assert_array_equal(out, np.where(c != 0, x, y))
    out[:] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        select[(tessera.cdiv(n, BLOCK),)](c, x, y, out, n, BOOL=True, BLOCK=BLOCK)
    np.testing.assert_array_equal(out, np.where(c != 0, x, y))
