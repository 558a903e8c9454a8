"""Triton's host compile API: tessera.compile(ASTSource(...)) (signature, constexprs, attrs,
target, options as Triton spells them), must_use_result in kernels, and AsyncCompileMode /
FutureKernel (warmup compiles in an executor). Compiled code goes through ptxas; the
kernel's results are checked in the interpreter against NumPy."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ASTSource, ptxas
from tessera.runtime.driver import GPUTarget


@tessera.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "factor": "fp32",
             "BLOCK": "constexpr"}


def test_scale_kernel_interpreted():
    rng = np.random.default_rng()
    n = int(rng.integers(100, 900))
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    tessera.jit(scale_kernel.fn, interpret=True)[(tessera.cdiv(n, 128),)](x, out, n, 2.5,
                                                                         BLOCK=128)
    np.testing.assert_array_equal(out, x * np.float32(2.5))


@pytest.mark.parametrize("capability,arch", [(80, "sm_80"), (90, "sm_90a")])
def test_compile_ast_source(capability, arch):
    src = ASTSource(scale_kernel, SIGNATURE, constexprs={"BLOCK": 256},
                    attrs={(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]})
    compiled = tessera.compile(src, target=GPUTarget("cuda", capability, 32),
                               options={"num_warps": 2})
    assert compiled.metadata["arch"] == arch and compiled.metadata["num_warps"] == 2
    assert "divisibility = [16, 16, 1, 1]" in compiled.asm["tir"]
    # the same as the kernel's own compile for those arguments
    x = np.zeros(512, np.float32)
    own = scale_kernel.asm(x, x, 7, 2.0, BLOCK=256, arch=arch, num_warps=2)
    assert compiled.asm["ptx"] == own["ptx"]
    if ptxas.find_ptxas() is not None:
        assert "cubin" in compiled.asm


def test_compile_constexpr_by_path_and_equal_to_one():
    src = ASTSource(scale_kernel, SIGNATURE, constexprs={(4,): 64},
                    attrs={(2,): [["tt.equal_to", 1]]})
    tir = tessera.compile(src, target="sm_80").asm["tir"]
    body = tir.split("\n", 2)[2]  # after the func line
    assert "value = 64" in body and "%2," not in body and "%2 " not in body  # n is 1


def test_compile_rejects_what_it_cannot_do():
    with pytest.raises(TypeError, match="IRSource"):
        tessera.compile("kernel.ttir")
    with pytest.raises(TypeError, match="not a parameter"):
        ASTSource(scale_kernel, SIGNATURE, constexprs={"BLOK": 1})
    src = ASTSource(scale_kernel, SIGNATURE, constexprs={"BLOCK": 64})
    with pytest.raises(TypeError, match="unknown options"):
        tessera.compile(src, options={"num_wraps": 4})
    with pytest.raises(TypeError, match="GPUTarget"):
        tessera.compile(src, target=GPUTarget("hip", "gfx942", 64))


@tessera.must_use_result("use the returned sum")
@tessera.jit
def _sum_of(x):
    return tl.sum(x, axis=0)


@tessera.jit(interpret=True)
def uses_result(x_ptr, out_ptr, DROP: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if DROP:
        _sum_of(x)
    tl.store(out_ptr, _sum_of(x))


def test_must_use_result():
    x = np.random.default_rng().standard_normal(16).astype(np.float32)
    out = np.zeros(1, np.float32)
    uses_result[(1,)](x, out, DROP=False)
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-5)
    with pytest.raises(tessera.CompilationError,
                       match="The result of _sum_of is not being used. use the returned sum"):
        uses_result[(1,)](x, out, DROP=True)
    assert tessera.must_use_result(lambda: 0)._must_use_result is True


def test_async_compile_mode():
    blocks = (64, 128, 64)
    with ThreadPoolExecutor(2) as executor:
        with tessera.AsyncCompileMode(executor) as mode:
            futures = [scale_kernel.warmup("*fp32", "*fp32", "i32", "fp32", BLOCK=b,
                                           grid=(1,)) for b in blocks]
            assert all(isinstance(f, tessera.FutureKernel) for f in futures)
            assert futures[0] is futures[2]  # one compilation per specialization
            assert len(mode.raw_futures) == 2
        compiled = [f.result() for f in futures]
    assert [c.metadata["name"] for c in compiled] == ["scale_kernel"] * 3
    assert "BLOCK" not in compiled[1].asm["tir"] and compiled[0] is compiled[2]
    sync = scale_kernel.warmup("*fp32", "*fp32", "i32", "fp32", BLOCK=128, grid=(1,))
    assert sync.asm["ptx"] == compiled[1].asm["ptx"]


def test_async_compile_mode_errors():
    with ThreadPoolExecutor(1) as executor:
        with tessera.AsyncCompileMode(executor):
            with pytest.raises(RuntimeError, match="already active"):
                with tessera.AsyncCompileMode(executor):
                    pass
        with pytest.raises(tessera.CompilationError):
            with tessera.AsyncCompileMode(executor):
                scale_kernel.warmup("*fp32", "*fp32", "i32", "fp32", BLOCK=100, grid=(1,))
        with tessera.AsyncCompileMode(executor, ignore_errors=True):
            bad = scale_kernel.warmup("*fp32", "*fp32", "i32", "fp32", BLOCK=100, grid=(1,))
        assert bad.result(ignore_errors=True) is None
