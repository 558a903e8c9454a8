"""Launch options that change the generated code, checked in the PTX and through ptxas without
a GPU: enable_fp_fusion (a*b+c as one fma, or a rounded multiply then an add, in LLVM and in
ptxas; the kernel's own arithmetic only, never libdevice's) and maxnreg (the PTX .maxnreg
directive; ptxas keeps the kernel's registers under it)."""
import re

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas
from tessera.language.extra import libdevice


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


@tessera.jit
def pow_then_fma(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, libdevice.pow(x, y) * x + y, mask=m)


def stored_value_definition(ptx: str) -> str:
    """The instruction that computes the register the kernel stores (its last definition
    before the store: blocks placed after it reuse registers)."""
    store = re.search(r"st\.global\.b(?:32|64)\s+\[[^]]+\],\s*(%\w+);", ptx)
    before = ptx[:store.start()]
    definitions = re.findall(rf"^\s+([a-z][\w.]*)\s+{re.escape(store.group(1))},", before,
                             re.M)
    return definitions[-1]


@pytest.mark.parametrize("dtype, bits", [(np.float32, "f32"), (np.float64, "f64")])
def test_fusion_contracts_the_kernel_but_never_libdevice(dtype, bits):
    # libdevice's compensated steps must round as written: contracting powf's m1 - 2*m1*rcp
    # into an fma cost its log2 most of its extra precision (tens of ulp in x**y where
    # |y * log2 x| nears 128: tests/gpu/test_libdevice.py). Every add/sub/mul of the inlined
    # library carries .rn (cpp/codegen/libdevice.cpp), which neither LLVM nor ptxas fuses;
    # the kernel's own pow(x, y) * x + y is still one fma.
    x = np.zeros(64, dtype)
    ptx = pow_then_fma.compile(x, x, x, 64, BLOCK=64, arch="sm_90a").asm["ptx"]
    assert not re.findall(rf"^\s+(?:add|sub|mul)\.{bits}\s", ptx, re.M)
    assert len(re.findall(rf"^\s+sub\.rn\.{bits}\s", ptx, re.M)) >= 2
    assert stored_value_definition(ptx) == f"fma.rn.{bits}"
    split = pow_then_fma.compile(x, x, x, 64, BLOCK=64, arch="sm_90a",
                                 enable_fp_fusion=False).asm["ptx"]
    assert stored_value_definition(split) == f"add.rn.{bits}"


def test_ptxas_is_told_not_to_fuse_either_when_fusion_is_off(monkeypatch):
    from tessera.compiler import compiler
    seen = []
    monkeypatch.setattr(compiler.ptxas, "assemble",
                        lambda ptx, arch, options=(), **_: seen.append(tuple(options)))
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
