"""Every libdevice function compiles for sm_80 and sm_90a and ptxas assembles it (batched: one
kernel per signature, calling each of its functions), with the symbol the table picks in the
IR and nothing left unresolved; user extern calls link their own bitcode library (lib_path);
an impure extern call is never merged, a pure one is."""
import shutil
import subprocess

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas
from tessera.language import core
from tessera.testing import libdevice_cases as cases

GROUPS = cases.groups()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("group", GROUPS, ids=[g.label for g in GROUPS])
def test_every_function_compiles_and_assembles(group, arch):
    n = 100
    args = [np.zeros((len(group.members), n), dtype) for dtype in group.args]
    out = np.zeros((len(group.members), n), group.result)
    stages = cases.KERNELS[len(group.args)].asm(*args, out, n, NAMES=group.names, BLOCK=64,
                                                 arch=arch)
    for name, signature in group.members:
        assert f'symbol = "{signature.symbol}"' in stages["tgir"], name
    assert ".extern .func" not in stages["ptx"]  # every __nv_ function was linked and inlined
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    ptxas.assemble(stages["ptx"], arch)


@core.extern
def twice(arg0, lib_path="", _semantic=None):
    return core.extern_elementwise("mylib", lib_path, [arg0], {
        (core.dtype("fp32"),): ("my_twice", core.dtype("fp32"))}, is_pure=True,
        _semantic=_semantic)


@tessera.jit
def twice_kernel(x_ptr, LIB: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, twice(tl.load(x_ptr + offs), LIB))


_MY_LIB = """
target triple = "nvptx64-nvidia-cuda"
define float @my_twice(float %x) {
  %y = fmul float %x, 3.5
  ret float %y
}
"""


def test_user_extern_links_its_library(tmp_path):
    assembler = shutil.which("llvm-as-22") or shutil.which("llvm-as")
    if assembler is None:
        pytest.skip("llvm-as not found: no bitcode library to link")
    source = tmp_path / "mylib.ll"
    source.write_text(_MY_LIB)
    library = tmp_path / "mylib.bc"
    subprocess.run([assembler, str(source), "-o", str(library)], check=True)
    x = np.zeros(32, np.float32)
    ptx = twice_kernel.asm(x, LIB=str(library), BLOCK=32, arch="sm_90a")["ptx"]
    assert "3.5" in ptx or "0f40600000" in ptx  # the library's body, inlined
    assert "my_twice" not in ptx
    with pytest.raises(Exception, match="nowhere/mylib.bc"):
        twice_kernel.asm(x, LIB="/nowhere/mylib.bc", BLOCK=32, arch="sm_90a")


@core.extern
def clock_like(arg0, pure=True, _semantic=None):
    return core.extern_elementwise("", "", [arg0], {
        (core.dtype("fp32"),): ("__nv_fast_expf", core.dtype("fp32"))}, is_pure=pure,
        _semantic=_semantic)


@tessera.jit
def purity_kernel(x_ptr, PURE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, clock_like(x, PURE) + clock_like(x, PURE))


@pytest.mark.parametrize("pure,calls", [(True, 1), (False, 2)])
def test_an_impure_call_is_kept(pure, calls):
    tgir = purity_kernel.asm(np.zeros(32, np.float32), PURE=pure, BLOCK=32,
                             arch="sm_90a")["tgir"]
    assert tgir.count("extern_elementwise") == calls
    assert f"pure = {'true' if pure else 'false'}" in tgir
