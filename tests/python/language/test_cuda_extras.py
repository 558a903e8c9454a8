"""``tl.extra.cuda``'s device helpers: num_warps / num_threads (compile-time, from the launch
options), gdc_wait / gdc_launch_dependents (griddepcontrol; no-ops in the interpreter),
globaltimer / smid (PTX special registers; GPU only, as in Triton). Interpreter results
against NumPy on ragged sizes; the compiled kernels go through ptxas (sm_80, sm_90a)."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas
from tessera.interpreter.errors import KernelRuntimeError
from tessera.language.extra import cuda

ARCHS = ["sm_80", "sm_90a"]


@tessera.jit
def warps_kernel(x_ptr, out_ptr, n):
    cuda.gdc_wait()
    offs = tl.program_id(0) * cuda.num_threads() + tl.arange(0, cuda.num_threads())
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    cuda.gdc_launch_dependents()
    tl.store(out_ptr + offs, x * cuda.num_warps(), mask=mask)


@tessera.jit
def timer_kernel(elapsed_ptr, sm_ptr):
    start = cuda.globaltimer()
    tl.store(sm_ptr + tl.program_id(0), cuda.smid())
    tl.store(elapsed_ptr + tl.program_id(0), cuda.globaltimer() - start)


def test_names_match_triton():
    assert set(cuda.__all__) >= {"libdevice", "gdc_wait", "gdc_launch_dependents", "num_warps",
                                 "num_threads", "globaltimer", "smid"}
    assert tl.extra.cuda is cuda


@pytest.mark.parametrize("num_warps", [1, 2, 4, 8])
def test_num_warps_and_threads_interpreted(num_warps):
    rng = np.random.default_rng()
    n = int(rng.integers(1, 1000))
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = np.zeros_like(x)
    threads = 32 * num_warps
    grid = (-(-n // threads),)
    tessera.jit(warps_kernel.fn, interpret=True)[grid](x, out, n, num_warps=num_warps)
    np.testing.assert_array_equal(out, x.astype(np.int64) * num_warps)


def test_num_warps_is_a_compile_time_constant():
    x = np.zeros(64, np.int32)
    for num_warps in (2, 4):
        tir = warps_kernel.asm(x, x, 64, num_warps=num_warps, arch="sm_90a")["tir"]
        assert f"make_range {{end = {32 * num_warps}, start = 0}}" in tir


def test_gdc_compiles_to_griddepcontrol_on_sm90():
    x = np.zeros(64, np.int32)
    stages = warps_kernel.asm(x, x, 64, arch="sm_90a")
    assert "griddepcontrol.wait;" in stages["ptx"]
    assert "griddepcontrol.launch_dependents;" in stages["ptx"]
    if ptxas.find_ptxas() is not None:
        assert "cubin" in stages


def test_gdc_needs_sm90():
    # As Triton: the instruction is emitted for every target and ptxas rejects it before sm_90.
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not installed")
    x = np.zeros(64, np.int32)
    with pytest.raises(ptxas.PtxasError, match="sm_90"):
        warps_kernel.asm(x, x, 64, arch="sm_80")


@pytest.mark.parametrize("arch", ARCHS)
def test_globaltimer_and_smid_compile(arch):
    stages = timer_kernel.asm(np.zeros(4, np.int64), np.zeros(4, np.int32), arch=arch)
    assert stages["ptx"].count("%globaltimer;") >= 2  # not pure: both reads stay
    assert "%smid" in stages["ptx"]
    if ptxas.find_ptxas() is not None:
        assert "cubin" in stages


def test_globaltimer_is_gpu_only_in_the_interpreter():
    with pytest.raises(KernelRuntimeError, match="timer_kernel.*inline"):
        tessera.jit(timer_kernel.fn, interpret=True)[(1,)](np.zeros(1, np.int64),
                                                           np.zeros(1, np.int32))
