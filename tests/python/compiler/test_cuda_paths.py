"""Finding ptxas and libdevice (python/tessera/compiler/cuda_paths.py) in CUDA toolkits and in
NVIDIA's pip wheels. A fake site-packages folder holds the wheels' layouts, as the wheels
themselves lay them out:

    nvidia-cuda-nvcc-cu12 12.x  nvidia/cuda_nvcc/bin/ptxas,
                                nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc
    nvidia-cuda-nvcc 13.x       nvidia/cu13/bin/ptxas
    nvidia-nvvm 13.x            nvidia/cu13/nvvm/libdevice/libdevice.10.bc

Its files link to this machine's real ptxas and libdevice where installed, so a kernel compiles
through them; without any, a cubin or a libdevice function is a clear error.
"""
import os

import pytest
import tessera
import tessera.language as tl
from tessera._tessera import ir
from tessera.compiler import compiler, cuda_paths, ptxas
from tessera.compiler.compiler import CompileOptions, MissingStage, compile_kernel

REAL_PTXAS = ptxas.find_ptxas()
REAL_LIBDEVICE = compiler.libdevice_path() or None


@tessera.jit
def erf_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.math.erf(tl.load(x_ptr + offs, mask=mask)), mask=mask)


@tessera.jit
def exp2_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.math.exp2(tl.load(x_ptr + offs, mask=mask)), mask=mask)


def compile_for_sm80(kernel):
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}
    return compile_kernel(kernel.fn, signature, {"BLOCK": 128}, divisibility_16=["x_ptr", "y_ptr"],
                          options=CompileOptions(arch="sm_80"))


@pytest.fixture
def bare(monkeypatch, tmp_path):
    """A machine with no CUDA toolkit: nothing on PATH, no CUDA_HOME/CUDA_PATH, no knob, and an
    empty default toolkit folder."""
    monkeypatch.setattr(ptxas.shutil, "which", lambda name: None)
    for name in ("CUDA_HOME", "CUDA_PATH", "TESSERA_PTXAS", "TESSERA_LIBDEVICE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cuda_paths, "DEFAULT_TOOLKIT", str(tmp_path / "no-cuda"))
    return tmp_path


def fake_root(root, with_ptxas=True, with_libdevice=True):
    """A toolkit-shaped folder: bin/ptxas and nvvm/libdevice/libdevice.10.bc (links to the real
    ones where installed, else stand-ins)."""
    if with_ptxas:
        os.makedirs(root / "bin")
        if REAL_PTXAS:
            os.symlink(REAL_PTXAS, root / "bin" / "ptxas")
        else:
            (root / "bin" / "ptxas").write_text("#!/bin/sh\necho 'release 13.0'\n")
            os.chmod(root / "bin" / "ptxas", 0o755)
    if with_libdevice:
        os.makedirs(root / "nvvm" / "libdevice")
        target = root / "nvvm" / "libdevice" / "libdevice.10.bc"
        if REAL_LIBDEVICE:
            os.symlink(REAL_LIBDEVICE, target)
        else:
            target.write_bytes(b"BC")
    return root


@pytest.mark.parametrize("layout", ["cu13", "cuda_nvcc"])
def test_wheels_on_sys_path_are_found(bare, monkeypatch, layout):
    site = bare / "site-packages"
    root = fake_root(site / "nvidia" / layout)
    assert ptxas.find_ptxas() is None and compiler.libdevice_path() == ""
    monkeypatch.syspath_prepend(str(site))
    assert cuda_paths.wheel_roots() == [str(root)]
    assert ptxas.find_ptxas() == str(root / "bin" / "ptxas")
    assert compiler.libdevice_path() == str(root / "nvvm" / "libdevice" / "libdevice.10.bc")


def test_cuda13_split_wheels(bare, monkeypatch):
    # CUDA 13 ships ptxas and libdevice in two wheels that share nvidia/cu13/.
    site = bare / "site-packages"
    fake_root(site / "nvidia" / "cu13", with_libdevice=False)
    fake_root(site / "nvidia" / "cu13", with_ptxas=False)
    monkeypatch.syspath_prepend(str(site))
    assert ptxas.find_ptxas().endswith(os.path.join("nvidia", "cu13", "bin", "ptxas"))
    assert compiler.libdevice_path().endswith(
        os.path.join("nvidia", "cu13", "nvvm", "libdevice", "libdevice.10.bc"))


def test_toolkit_comes_before_wheels(bare, monkeypatch):
    site = bare / "site-packages"
    fake_root(site / "nvidia" / "cu13")
    home = fake_root(bare / "cuda-home")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("CUDA_HOME", str(home))
    assert ptxas.find_ptxas() == str(home / "bin" / "ptxas")
    assert compiler.libdevice_path() == str(home / "nvvm" / "libdevice" / "libdevice.10.bc")
    assert cuda_paths.cuda_roots()[0] == str(home)


@pytest.mark.skipif(not (REAL_PTXAS and REAL_LIBDEVICE), reason="needs ptxas and libdevice")
def test_a_kernel_compiles_through_a_wheel(bare, monkeypatch):
    site = bare / "site-packages"
    fake_root(site / "nvidia" / "cuda_nvcc")
    monkeypatch.syspath_prepend(str(site))
    compiled = compile_for_sm80(erf_kernel)
    assert "__nv_erff" not in compiled.asm["ptx"]  # libdevice's body was linked in
    assert compiled.asm["cubin"][:4] == b"\x7fELF" and compiled.metadata["registers"] > 0


def test_no_ptxas_is_a_clear_error_when_a_cubin_is_asked_for(bare):
    compiled = compile_for_sm80(exp2_kernel)  # PTX still; the driver can assemble it on a GPU
    assert "ex2.approx" in compiled.asm["ptx"] and "cubin" not in compiled.asm
    with pytest.raises(MissingStage) as error:
        compiled.asm["cubin"]
    message = str(error.value)
    assert "ptxas was not found" in message and "TESSERA_PTXAS" in message
    assert "pip install nvidia-cuda-nvcc" in message and "nvidia/{cu13,cuda_nvcc}" in message
    with pytest.raises(KeyError):
        compiled.asm["sass"]


def test_no_libdevice_is_a_clear_error(bare):
    with pytest.raises(ir.CompileError, match=r"__nv_erff needs libdevice.*TESSERA_LIBDEVICE.*"
                                              r"pip install nvidia-nvvm.*nvidia-cuda-nvcc-cu12"):
        compile_for_sm80(erf_kernel)

