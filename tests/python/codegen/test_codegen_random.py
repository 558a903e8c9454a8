"""tl.randint4x / rand / randn compiled: the PTX assembles for sm_80 and sm_90a (ptxas, no
spills), Philox's products are mul.hi.u32 / mul.lo, and the generated LLVM IR, run thread by
thread on the CPU (simt.py), gives the NumPy reference's bits (philox_reference.py)."""
import numpy as np
import pytest
from simt import run_kernel

import philox_reference as ref
import tessera
import tessera.language as tl
from tessera._tessera import codegen, passes
from tessera.compiler import compiler, ptxas


@tessera.jit
def random_kernel(bits_ptr, uniform_ptr, normal_ptr, seed, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    r0, r1, r2, r3 = tl.randint4x(seed, offs)
    tl.store(bits_ptr + offs, r0 ^ r3, mask=mask)
    tl.store(uniform_ptr + offs, tl.rand(seed, offs), mask=mask)
    tl.store(normal_ptr + offs, tl.randn(seed, offs), mask=mask)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_random_ptx_assembles(arch):
    bits, floats = np.zeros(1000, np.uint32), np.zeros(1000, np.float32)
    ptx = random_kernel.asm(bits, floats, floats, 2**40, 1000, BLOCK=256, arch=arch)["ptx"]
    assert "mul.hi.u32" in ptx  # umulhi, the high half of Philox's products
    assert "mul.lo.s32" in ptx or "mad.lo.s32" in ptx or "mul.lo.u32" in ptx
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    report = ptxas.assemble(ptx, arch).report
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0


@pytest.mark.parametrize("seed, seed_type", [(987654321, "i32"), (-(2**45) - 11, "i64")])
def test_generated_code_gives_the_reference_bits(seed, seed_type):
    n, block, warps = 150, 64, 2  # ragged: the last of 3 programs is partial
    signature = {"bits_ptr": "*u32", "uniform_ptr": "*fp32", "normal_ptr": "*fp32",
                 "seed": seed_type, "n": "i32"}
    module = compiler.build_tile_ir(random_kernel.fn, signature, {"BLOCK": block},
                                    divisibility_16=["bits_ptr", "uniform_ptr", "normal_ptr"],
                                    num_warps=warps)
    passes.run(module, compiler.PIPELINES["tgir"])
    result = codegen.generate(module, arch="sm_90a", num_warps=warps)
    bits, uniform, normal = np.zeros(n, np.uint32), np.zeros(n, np.float32), np.zeros(n, np.float32)
    run_kernel(result["unoptimized_llvm_ir"], (3,), [bits, uniform, normal, seed, n], warps,
               result["shared_bytes"])
    words = ref.randint4x(seed, np.arange(n, dtype=np.int32))
    np.testing.assert_array_equal(bits, words[0] ^ words[3])
    np.testing.assert_array_equal(uniform, ref.uniform(words[0]))
    expected, _ = ref.box_muller(ref.uniform(words[0]), ref.uniform(words[1]))
    np.testing.assert_allclose(normal, expected, rtol=1e-5, atol=1e-5)
