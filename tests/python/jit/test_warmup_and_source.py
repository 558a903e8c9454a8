"""JITFunction.warmup (compile without launching, Triton's CompiledKernel fields) and kernels
whose source is given as text: JITFunction.src / _unsafe_update_src (as Triton's tests patch
kernels) and functions made with exec. Compiles on the CPU (ptxas when present)."""
import linecache
import textwrap

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas
from tessera.config import knobs

needs_ptxas = pytest.mark.skipif(ptxas.find_ptxas() is None, reason="ptxas not installed")


@tessera.jit
def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + tl.load(y_ptr + offs, mask=mask), mask=mask)


@needs_ptxas
@pytest.mark.parametrize("pointer", ["array", "numpy dtype", "type string", "tl dtype",
                                     "mock"])
def test_warmup_returns_a_compiled_kernel_without_launching(pointer):
    stand_in = {"array": np.zeros(16, np.float32), "numpy dtype": np.dtype(np.float32),
                "type string": "*fp32", "tl dtype": tl.float32,
                "mock": tessera.MockTensor(np.dtype(np.float32))}[pointer]
    compiled = axpy.warmup(stand_in, stand_in, stand_in, 1000, 0.5, BLOCK=256, grid=(4,),
                           num_warps=2)
    assert compiled.name == "axpy"
    assert compiled.metadata["num_warps"] == compiled.metadata.num_warps == 2
    assert compiled.metadata.shared == 0
    assert compiled.n_regs > 0 and compiled.n_spills == 0
    assert ".entry axpy" in compiled.asm["ptx"] and compiled.asm["ttir"] == compiled.asm["tir"]
    assert isinstance(compiled.asm["cubin"], bytes)
    # Stand-ins are 16-byte aligned pointers, as Triton's MockTensor.
    assert ".align 16" in compiled.asm["ptx"]


@needs_ptxas
def test_warmup_takes_launch_options_and_torch_dtypes():
    torch = pytest.importorskip("torch")
    compiled = axpy.warmup(torch.float16, torch.float16, torch.float16, "i32", 2.0, BLOCK=128,
                           grid=(1,), maxnreg=24, enable_fp_fusion=False)
    ptx = compiled.asm["ptx"]
    assert ".maxnreg 24" in ptx and compiled.n_regs <= 24
    assert "fma.rn" not in ptx


def test_warmup_in_interpret_mode_returns_none():
    with knobs.scope(interpret=True):
        assert axpy.warmup("*fp32", "*fp32", "*fp32", 10, 1.0, BLOCK=16, grid=(1,)) is None


def test_src_is_the_text_from_def():
    assert axpy.src.startswith("def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK")
    with pytest.raises(AttributeError, match="_unsafe_update_src"):
        axpy.src = "def axpy(): pass"


def test_unsafe_update_src_recompiles_from_the_new_text():
    @tessera.jit(interpret=True)
    def patched(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)

    x = np.arange(8, dtype=np.float32)
    patched[(1,)](x, BLOCK=8)
    np.testing.assert_array_equal(x, np.arange(8) + 1)
    # As Triton's own tests do: replace an operator in the kernel's text.
    patched._unsafe_update_src(patched.src.replace("+ 1", "* 3"))
    assert "* 3" in patched.src and patched.hash is None
    patched[(1,)](x, BLOCK=8)
    np.testing.assert_array_equal(x, (np.arange(8) + 1) * 3)


def test_unsafe_update_src_of_a_helper_reaches_its_callers():
    @tessera.jit
    def helper(x):
        return x + 1

    @tessera.jit(interpret=True)
    def caller(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, helper(tl.load(x_ptr + offs)))

    x = np.zeros(4, np.float32)
    caller[(1,)](x, BLOCK=4)
    helper._unsafe_update_src(helper.src.replace("x + 1", "x - 5"))
    caller[(1,)](x, BLOCK=4)
    np.testing.assert_array_equal(x, np.full(4, -4.0))


KERNEL_TEXT = textwrap.dedent("""
    def generated(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) * OP_VALUE)
""")


def test_kernel_made_with_exec_runs_once_its_text_is_given():
    namespace = {"tl": tl}
    exec(compile(KERNEL_TEXT.replace("OP_VALUE", "4"), "<generated kernel>", "exec"), namespace)
    # No frame holds the text any more (frontend/exec_source.py would find it there).
    kernel = tessera.jit(namespace["generated"], interpret=True)
    y = np.arange(8, dtype=np.float32)
    with pytest.raises(Exception, match="cannot read the source.*_unsafe_update_src"):
        kernel[(1,)](y, BLOCK=8)
    kernel._unsafe_update_src(KERNEL_TEXT.replace("OP_VALUE", "4"))
    kernel[(1,)](y, BLOCK=8)
    np.testing.assert_array_equal(y, np.arange(8) * 4)


def test_kernel_made_with_exec_through_linecache():
    text = KERNEL_TEXT.replace("OP_VALUE", "-2")
    filename = "<generated kernel via linecache>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = {"tl": tl}
    exec(compile(text, filename, "exec"), namespace)
    kernel = tessera.jit(namespace["generated"], interpret=True)
    y = np.arange(8, dtype=np.float32)
    kernel[(1,)](y, BLOCK=8)
    np.testing.assert_array_equal(y, np.arange(8) * -2)
    assert kernel.src.startswith("def generated(")
