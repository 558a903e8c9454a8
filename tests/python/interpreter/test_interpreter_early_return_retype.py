"""After ``if c: return`` the rest of a kernel is straight-line code in Triton, so it may give a
variable another type: a scalar pointer becomes a tile of pointers (``X = X + rows[:, None] *
stride + cols[None, :]``, as rotary and attention kernels do after their bounds check), a
Python int becomes a runtime value. Tessera runs that tail under ``if not returned``; such a
variable is not carried out of it, and reading it where the other paths join is a clear error.
Checked against NumPy on fresh ragged shapes, and compiled to PTX."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas


@tessera.jit
def shifted_rows(X, OUT, n_rows, n_cols, stride, shift, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, SHIFTED: tl.constexpr):
    pid = tl.program_id(0)
    count = 0  # a Python int before the early return, a runtime value after it
    if SHIFTED:
        X = X + shift  # a compile-time branch before the exit: X stays a scalar pointer
    if pid * BLOCK_M >= n_rows:
        return
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    X = X + rows[:, None] * stride + cols[None, :]  # scalar pointer -> tile of pointers
    OUT = OUT + rows[:, None] * n_cols + cols[None, :]
    count = tl.sum(mask.to(tl.int32))
    tl.store(OUT, tl.load(X, mask=mask, other=0.0) * 2.0 + count, mask=mask)


@pytest.mark.parametrize("shifted", [False, True])
def test_tail_after_early_return_may_retype(rng, shifted):
    n_rows, n_cols = int(rng.integers(1, 40)), int(rng.integers(1, 30))
    shift = 3 if shifted else 0
    x = rng.standard_normal(n_rows * (n_cols + 5) + shift).astype(np.float32)
    out = np.full((n_rows, n_cols), 5.0, np.float32)
    block_m = 8
    grid = (tessera.cdiv(n_rows, block_m) + 2,)  # two programs past the end return at once
    interpreted = tessera.jit(interpret=True)(shifted_rows.fn)
    interpreted[grid](x, out, n_rows, n_cols, n_cols + 5, shift, BLOCK_M=block_m, BLOCK_N=32,
                      SHIFTED=shifted)
    view = x[shift:shift + n_rows * (n_cols + 5)].reshape(n_rows, n_cols + 5)[:, :n_cols]
    counts = np.array([min(block_m, n_rows - r // block_m * block_m) * n_cols
                       for r in range(n_rows)], np.float32)
    np.testing.assert_allclose(out, view * 2.0 + counts[:, None], rtol=1e-6)


def test_retyped_variable_read_after_the_join_is_an_error():
    @tessera.jit(interpret=True)
    def read_after(X, OUT, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        if pid < n:
            if pid == 0:
                return
            X = X + tl.arange(0, BLOCK)  # retyped in the guarded rest of the then branch
        tl.store(OUT + tl.arange(0, BLOCK), tl.load(X))  # X: a pointer or a tile of them?

    x = np.zeros(16, np.float32)
    with pytest.raises(tessera.CompilationError) as info:
        read_after[(2,)](x, x, 2, BLOCK=16)
    message = str(info.value)
    assert "'X'" in message and "another type after the early return" in message


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_retyping_tail_compiles(arch):
    x = np.zeros(256, np.float32)
    stages = shifted_rows.asm(x, x, 20, 7, 9, 0, BLOCK_M=8, BLOCK_N=32, SHIFTED=False,
                              arch=arch)
    assert " = if " in stages["tir"]
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    ptxas.assemble(stages["ptx"], arch)
