"""tl.multiple_of / max_contiguous / max_constancy feed the axis analysis as in Triton: loads
whose alignment, contiguity or mask constancy only the hint states become 16-byte vector
accesses (ld.global.v4); without the hint they stay scalar. tl.debug_barrier is a bar.sync.
Hints leave results unchanged (interpreter, on inputs that satisfy them)."""
import re

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas

BLOCK = 1024  # 128 threads x 8 elements: two 16-byte vectors per thread when vectorised


@tessera.jit
def hinted_copy(x_ptr, idx_ptr, start_ptr, rows_ptr, y_ptr, n, KIND: tl.constexpr,
                HINT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if KIND == "gather":  # indices loaded from memory: nothing known about them
        idx = tl.load(idx_ptr + offs)
        if HINT:
            idx = tl.max_contiguous(tl.multiple_of(idx, 4), 4)
        tl.store(y_ptr + offs, tl.load(x_ptr + idx))
    elif KIND == "start":  # a loaded scalar start: its alignment unknown
        start = tl.load(start_ptr + tl.program_id(0))
        if HINT:
            start = tl.multiple_of(start, 16)
        tl.store(y_ptr + offs, tl.load(x_ptr + start + offs))
    else:  # a mask from loaded row numbers: its runs of equal values unknown
        mask = tl.load(rows_ptr + offs) < n
        if HINT:
            mask = tl.max_constancy(mask, 4)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0.0))


def _args(n=2 * BLOCK):
    rng = np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    idx = (rng.integers(0, n // 4 - 1, BLOCK // 4)[:, None] * 4 + np.arange(4)).ravel()
    start = np.array([16 * int(rng.integers(0, BLOCK // 16))], np.int32)
    rows = np.repeat(rng.integers(0, 10, BLOCK // 4), 4).astype(np.int32)
    return x, idx.astype(np.int32), start, rows, np.zeros(BLOCK, np.float32), 5


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("kind", ["gather", "start", "mask"])
def test_hint_vectorises_the_load(arch, kind):
    x, idx, start, rows, y, n = _args()
    counts = {}
    for hint in (False, True):
        stages = hinted_copy.asm(x, idx, start, rows, y, n, KIND=kind, HINT=hint, BLOCK=BLOCK,
                                 arch=arch)
        ptx = stages["ptx"]
        vectors = len(re.findall(r"ld\.global[.\w:]*\.v4\.b32", ptx))
        counts[hint] = (vectors, len(re.findall(r"ld\.global[.\w:]*\.b32", ptx)) - vectors)
        if hint and ptxas.find_ptxas() is not None:
            assert ptxas.assemble(ptx, arch).report["spill_stores"] == 0
    print(kind, counts)
    # x's load per thread: 8 scalar loads without the hint, 2 vectors with it (start: plus
    # the scalar start). The index or
    # row load is 2 vectors without; with a contiguity or constancy hint on its values only
    # one value per run of 4 is used, so it shrinks to 2 scalar loads.
    expected = {"gather": {False: (2, 8), True: (2, 2)}, "start": {False: (0, 9), True: (2, 1)},
                "mask": {False: (2, 8), True: (2, 2)}}[kind]
    assert counts == expected


@pytest.mark.parametrize("kind", ["gather", "start", "mask"])
def test_hints_keep_results(kind):
    x, idx, start, rows, y, n = _args()
    interpreted = tessera.jit(hinted_copy.fn, interpret=True)
    interpreted[(1,)](x, idx, start, rows, y, n, KIND=kind, HINT=True, BLOCK=BLOCK)
    if kind == "gather":
        expected = x[idx]
    elif kind == "start":
        expected = x[start[0]:start[0] + BLOCK]
    else:
        expected = np.where(rows < n, x[:BLOCK], 0.0)
    np.testing.assert_array_equal(y, expected)


@tessera.jit
def shift_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2)
    tl.debug_barrier()
    tl.store(y_ptr + BLOCK + offs, tl.load(y_ptr + (BLOCK - 1 - offs)))


def test_debug_barrier_is_bar_sync_and_orders_the_interpreter():
    x = np.random.default_rng().standard_normal(256).astype(np.float32)
    y = np.zeros(512, np.float32)
    stages = shift_kernel.asm(x, y, BLOCK=256, arch="sm_90a")
    assert "barrier" in stages["tir"]
    assert len(re.findall(r"bar\.sync\s+0|barrier\.sync\s+0", stages["ptx"])) == 1
    tessera.jit(shift_kernel.fn, interpret=True)[(1,)](x, y, BLOCK=256)
    np.testing.assert_array_equal(y, np.concatenate([2 * x, (2 * x)[::-1]]))


def test_hint_errors_name_the_kernel_and_line():
    @tessera.jit(interpret=True)
    def bad(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.multiple_of(tl.arange(0, BLOCK), [4, 4])
        tl.store(x_ptr + offs, 0.0, mask=offs < n)

    with pytest.raises(tessera.CompilationError, match=r"(?s)bad.*multiple_of does not match "
                       r"the length of values.*tl\.multiple_of"):
        bad[(1,)](np.zeros(64, np.float32), 64, BLOCK=64)

    @tessera.jit(interpret=True)
    def runtime_value(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.max_contiguous(tl.arange(0, BLOCK), n)
        tl.store(x_ptr + offs, 0.0)

    with pytest.raises(tessera.CompilationError, match="max_contiguous: values element 0 must "
                       "be a compile-time"):
        runtime_value[(1,)](np.zeros(64, np.float32), 64, BLOCK=64)


@tessera.jit
def assume_kernel(x_ptr, n, stride, BLOCK: tl.constexpr):
    tl.assume(n > 0)
    tl.assume(stride >= 1)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs * stride, offs.to(tl.float32), mask=offs < n)


def test_assume_is_accepted_and_builds_nothing():
    x = np.zeros(64, np.float32)
    tir = assume_kernel.asm(x, 10, 2, BLOCK=32, arch="sm_90a")["tir"]
    assert "cmpi" in tir and tir.count("cmpi") == 1  # only the mask's: assume adds no op
    tessera.jit(assume_kernel.fn, interpret=True)[(1,)](x, 10, 2, BLOCK=32)
    np.testing.assert_array_equal(x[:20:2], np.arange(10))

    @tessera.jit(interpret=True)
    def assume_pointer(x_ptr):
        tl.assume(x_ptr)

    with pytest.raises(tessera.CompilationError, match="assume needs a boolean condition"):
        assume_pointer[(1,)](x)
