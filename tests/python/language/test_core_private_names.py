"""Triton's ``tl.core`` helper names that public kernels import: ``tl.core.constexpr_function``
(the same object as ``tessera.constexpr_function``) and ``tl.core._unwrap_if_constexpr``.
A kernel sizes its work with a tl.core constexpr function; interpreter results against NumPy on
ragged sizes, the compiled kernel (sm_80, sm_90a) through ptxas."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas

ARCHS = ["sm_80", "sm_90a"]


@tl.core.constexpr_function
def doubled_block(block):
    # Called with the kernel's constexpr: unwrap it as Triton helpers do.
    return 2 * tl.core._unwrap_if_constexpr(block)


@tessera.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    WIDE: tl.constexpr = doubled_block(BLOCK)
    offs = tl.program_id(0) * WIDE + tl.arange(0, WIDE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * WIDE, mask=mask)


def test_constexpr_function_is_one_object():
    assert tl.core.constexpr_function is tessera.constexpr_function


def test_unwrap_if_constexpr_matches_triton():
    c = tl.constexpr
    assert tl.core._unwrap_if_constexpr(c(3)) == 3
    assert tl.core._unwrap_if_constexpr([c(1), 2, [c(4)]]) == [1, 2, [4]]
    nested = tl.core._unwrap_if_constexpr((c(1.5), (c(2), "a")))
    assert nested == (1.5, (2, "a")) and type(nested) is tuple
    kept = tl.core._unwrap_if_constexpr(tl.tuple([c(7), 8]))
    assert type(kept) is tl.tuple and tuple(kept) == (7, 8)
    sentinel = object()
    assert tl.core._unwrap_if_constexpr(sentinel) is sentinel


@pytest.mark.parametrize("n", [1, 100, 257])
def test_kernel_uses_a_tl_core_constexpr_function(n):
    rng = np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros_like(x)
    block = 32
    grid = (-(-n // (2 * block)),)
    tessera.jit(scale_kernel.fn, interpret=True)[grid](x, out, n, BLOCK=block)
    np.testing.assert_array_equal(out, (x.astype(np.float64) * 64).astype(np.float32))


@pytest.mark.parametrize("arch", ARCHS)
def test_kernel_compiles_through_ptxas(arch):
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not installed")
    x = np.zeros(8, np.float32)
    stages = scale_kernel.asm(x, x, 8, BLOCK=32, arch=arch)
    assert "cubin" in stages and ".reg" in stages["ptx"]
