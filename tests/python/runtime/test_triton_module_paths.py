"""Triton module paths public code imports: ``triton.compiler.compiler.ASTSource`` and
``triton.backends.compiler.GPUTarget`` give the classes of ``tessera.compiler`` and
``tessera.runtime.driver``; a kernel compiled through them (sm_80, sm_90a) assembles with
ptxas and its interpreted result matches NumPy on ragged sizes."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.backends.compiler import GPUTarget
from tessera.compiler import ptxas
from tessera.compiler.compiler import ASTSource


@tessera.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)


SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
             "BLOCK": "constexpr"}


def test_same_classes():
    assert ASTSource is tessera.compiler.ASTSource
    assert GPUTarget is tessera.runtime.driver.GPUTarget
    with pytest.raises(AttributeError, match="no_such_name"):
        tessera.compiler.compiler.no_such_name


@pytest.mark.parametrize("n", [1, 130, 999])
def test_kernel_interpreted(n):
    rng = np.random.default_rng()
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = np.zeros(n, np.float32)
    tessera.jit(add_kernel.fn, interpret=True)[(tessera.cdiv(n, 128),)](x, y, out, n, BLOCK=128)
    np.testing.assert_array_equal(out, (x.astype(np.float64) + y).astype(np.float32))


@pytest.mark.parametrize("capability,arch", [(80, "sm_80"), (90, "sm_90a")])
def test_compile_through_the_triton_paths(capability, arch):
    src = ASTSource(add_kernel, SIGNATURE, constexprs={"BLOCK": 128})
    compiled = tessera.compile(src, target=GPUTarget("cuda", capability, 32))
    assert compiled.metadata["arch"] == arch
    if ptxas.find_ptxas() is not None:
        assert "cubin" in compiled.asm


def test_other_triton_names_say_not_supported():
    from tessera.errors import TritonAPINotSupported
    with pytest.raises(TritonAPINotSupported, match="triton.backends.compiler.BaseBackend"):
        tessera.backends.compiler.BaseBackend
    with pytest.raises(TritonAPINotSupported, match="triton.runtime.cache.triton_key"):
        tessera.runtime.cache.triton_key
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        tessera.runtime.cache.nonsense
