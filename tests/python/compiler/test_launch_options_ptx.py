"""Launch options that change the generated code, checked in the PTX and through ptxas without
a GPU: enable_fp_fusion (a*b+c as one fma, or a rounded multiply then an add, in LLVM and in
ptxas) and maxnreg (the PTX .maxnreg directive; ptxas keeps the kernel's registers under it)."""
import re

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas


@tessera.jit
def fma_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    c = tl.load(c_ptr + offs, mask=m)
    tl.store(out_ptr + offs, a * b + c, mask=m)


@tessera.jit
def heavy(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    c = tl.load(a_ptr + n + offs, mask=m)
    d = tl.load(b_ptr + n + offs, mask=m)
    tl.store(out_ptr + offs, a * b + c * d + a * d, mask=m)


X = np.zeros(64, np.float32)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_enable_fp_fusion_decides_fma(arch):
    fused = fma_kernel.compile(X, X, X, X, 1000, BLOCK=256, arch=arch).asm["ptx"]
    split = fma_kernel.compile(X, X, X, X, 1000, BLOCK=256, arch=arch,
                               enable_fp_fusion=False).asm["ptx"]
    assert re.search(r"fma\.rn\.f32", fused) and not re.search(r"mul\.rn\.f32", fused)
    assert not re.search(r"fma\.rn", split)
    assert re.search(r"mul\.rn\.f32", split) and re.search(r"add\.rn\.f32", split)


def test_ptxas_is_told_not_to_fuse_either_when_fusion_is_off(monkeypatch):
    from tessera.compiler import compiler
    seen = []
    monkeypatch.setattr(compiler.ptxas, "assemble",
                        lambda ptx, arch, options=(): seen.append(tuple(options)))
    fma_kernel.compile(X, X, X, X, 1000, BLOCK=256, arch="sm_90a", enable_fp_fusion=False)
    fma_kernel.compile(X, X, X, X, 1000, BLOCK=256, arch="sm_90a")
    assert seen == [("--fmad=false",), ()]


@pytest.mark.parametrize("cap", [32, 40, 64])
def test_maxnreg_is_the_ptx_directive_and_ptxas_honours_it(cap):
    compiled = heavy.compile(X, X, X, 4096, BLOCK=4096, arch="sm_90a", maxnreg=cap)
    assert f".maxnreg {cap}" in compiled.asm["ptx"]
    assert ".maxnreg" not in heavy.compile(X, X, X, 4096, BLOCK=4096,
                                           arch="sm_90a").asm["ptx"]
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not installed")
    free = heavy.compile(X, X, X, 4096, BLOCK=4096, arch="sm_90a")
    assert compiled.n_regs <= cap < free.n_regs
    assert compiled.metadata["registers"] == compiled.n_regs
