# `a() if cond else b()` with a runtime condition where both sides only have effects (stores):
# an if without results, as Triton builds it; checked against NumPy on a ragged grid.
import numpy as np
import pytest

import tessera
import tessera.language as tl


@tessera.jit(interpret=True)
def store_either(Out, Yes, No, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(Out + offs, tl.load(Yes + offs, mask=mask), mask=mask) if pid % 3 == 1 else \
        tl.store(Out + offs, tl.load(No + offs, mask=mask) * 2, mask=mask)


@pytest.mark.parametrize("n", [1, 100, 257])
def test_effect_only_conditional_expression(n):
    rng = np.random.default_rng()
    block = 32
    yes = rng.standard_normal(n).astype(np.float32)
    no = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    store_either[(tessera.cdiv(n, block),)](out, yes, no, n, BLOCK=block)
    program = np.arange(n) // block
    np.testing.assert_array_equal(out, np.where(program % 3 == 1, yes, no * 2))


@tessera.jit(interpret=True)
def mixed_sides(Out, X):
    pid = tl.program_id(0)
    v = tl.load(X) if pid == 0 else tl.store(Out, 1.0)
    tl.store(Out, v)


def test_a_value_and_nothing_still_disagree():
    with pytest.raises(tessera.CompilationError, match="must have one type"):
        mixed_sides[(1,)](np.zeros(1, np.float32), np.zeros(1, np.float32))


@tessera.jit(interpret=True)
def bad_axis(X, AXIS: tl.constexpr):
    tl.store(X, tl.program_id(AXIS))


def test_program_id_axis_message_is_tritons():
    with pytest.raises(tessera.CompilationError) as info:
        bad_axis[(1,)](np.zeros(1, np.int32), 20)
    assert "program_id axis must be 0, 1, or 2 but got 20" in str(info.value)
