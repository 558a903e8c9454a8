"""Row masks tested before and after a loop are not kept live across it: codegen recomputes a
predicate (an i1 compare) past the loop instead of holding the one LLVM's CSE would share
(codegen/sink_predicates.cpp). Live predicates across attention's key loop cost ptxas its
interleaving of exp2 with the P@V wgmma (30% of the forward on an H200). Checked on the PTX:
every predicate a branch or a predicated instruction reads after the loop is set after it;
ptxas assembles it, and the interpreter agrees with NumPy on a ragged size."""
import re

import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera.compiler import ptxas


@tessera.jit
def scaled_rows(x_ptr, w_ptr, out_ptr, M, K, stride, D: tl.constexpr, BLOCK: tl.constexpr):
    """out[rows] = x[rows] * prod_k w[k], the rows masked on the way in and out."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs = rows[:, None] * stride + tl.arange(0, D)[None, :]
    x = tl.load(x_ptr + offs, mask=rows[:, None] < M, other=0.0)
    for k in range(0, K):
        x = x * tl.load(w_ptr + k)
    tl.store(out_ptr + offs, x, mask=rows[:, None] < M)


def loop_end(ptx: str) -> int:
    """Offset just past the last backward branch (the end of the loop)."""
    end = -1
    for branch in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx):
        if ptx.find(branch.group(1) + ":") < branch.start():
            end = branch.end()
    assert end > 0, "no loop in the PTX"
    return end


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_predicates_after_the_loop_are_set_after_it(arch):
    x = np.zeros((256, 64), np.float32)
    compiled = scaled_rows.compile(x, x[0], x, 256, 8, 64, D=64, BLOCK=128, arch=arch,
                                   num_warps=4)
    ptx = compiled.asm["ptx"]
    end = loop_end(ptx)
    before, after = ptx[:end], ptx[end:]
    read_after = set(re.findall(r"@!?(%p\d+)", after))
    assert read_after, "the masked store reads no predicate after the loop"
    set_before = set(re.findall(r"setp\.[\w.]+\s+(%p\d+)", before))
    set_after = set(re.findall(r"setp\.[\w.]+\s+(%p\d+)", after))
    assert read_after <= set_after, sorted(read_after - set_after)
    assert set_before, "the masked load reads no predicate before the loop"
    if ptxas.find_ptxas():
        assert compiled.metadata["spill_stores"] == 0


def test_interpreter_matches_numpy(monkeypatch):
    monkeypatch.setenv("TESSERA_INTERPRET", "1")
    rng = np.random.default_rng()
    M, K = 77, 3
    x = rng.standard_normal((M, 64)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, K).astype(np.float32)
    out = np.full_like(x, np.nan)
    scaled_rows[(2,)](x, w, out, M, K, 64, D=64, BLOCK=64)
    np.testing.assert_allclose(out, x * np.prod(w.astype(np.float64)), rtol=1e-6)
