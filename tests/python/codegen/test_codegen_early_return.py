"""Early returns compiled: the tile IR's if yields the returned flag (no unstructured
branches), the PTX assembles for sm_80 and sm_90a, and the generated LLVM IR, run thread by
thread on the CPU (simt.py), leaves a kernel early and returns a helper's value from the
return that ran, against NumPy."""
import numpy as np
import pytest
from simt import run_kernel

import tessera
import tessera.language as tl
from tessera._tessera import codegen, passes
from tessera.compiler import compiler, ptxas


@tessera.jit
def clamp_low(v, lo):
    if v < lo:
        return lo + v * 0
    return v


@tessera.jit
def early_kernel(x_ptr, y_ptr, n, lo, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if pid == 1:
        tl.store(y_ptr + offs, -x, mask=offs < n)
        return
    scale = clamp_low(tl.load(x_ptr + pid), lo)
    tl.store(y_ptr + offs, x * scale, mask=offs < n)


SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "lo": "fp32"}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_early_return_ptx_assembles(arch):
    x = np.zeros(256, np.float32)
    stages = early_kernel.asm(x, x, 200, 0.5, BLOCK=64, arch=arch)
    assert stages["tir"].count("return") == 1  # only the func's own, at its end
    assert stages["tir"].count(" = if ") >= 3  # flags of the two early exits, guarded rests
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    assert ptxas.assemble(stages["ptx"], arch).report["spill_stores"] == 0


def test_generated_code_returns_early():
    rng = np.random.default_rng()
    n, block, warps, programs = 150, 64, 2, 5  # programs 3 and 4 start past n
    x = rng.standard_normal(programs * block).astype(np.float32)
    y = np.full(programs * block, 9.0, np.float32)
    lo = 0.25
    module = compiler.build_tile_ir(early_kernel.fn, SIGNATURE, {"BLOCK": block},
                                    divisibility_16=["x_ptr", "y_ptr"], num_warps=warps)
    passes.run(module, compiler.PIPELINES["tgir"])
    result = codegen.generate(module, arch="sm_90a", num_warps=warps)
    run_kernel(result["unoptimized_llvm_ir"], (programs,), [x, y, n, lo], warps,
               result["shared_bytes"])
    expected = np.full_like(y, 9.0)
    for pid in range(3):
        rows = slice(pid * block, min(n, (pid + 1) * block))
        scale = -1.0 if pid == 1 else max(x[pid], np.float32(lo))
        expected[rows] = x[rows] * np.float32(scale)
    np.testing.assert_array_equal(y, expected)
