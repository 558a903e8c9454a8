"""Masked stores compile to one predicated PTX store each (`@p st.global...`, no branch): for
every element size and vector width (f32 x4, f16 x8 packed in four words, i8 x8 in two, f64
and i64 x2, single i16 and i8 when the pointers are not 16-byte aligned), the PTX assembles,
and the generated LLVM IR, run thread by thread on the CPU (simt.py), writes exactly the
unmasked elements: the rest of the output keeps its sentinel."""
import re

import numpy as np
import pytest
from simt import run_kernel

import tessera
import tessera.language as tl
from tessera._tessera import codegen, passes
from tessera.compiler import compiler, ptxas


@tessera.jit
def masked_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    # x covers every program's block: only the store is masked (masked loads still branch).
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) + 1, mask=offs < n)


# dtype, aligned (pointers and n divisible by 16), the store the PTX must show
CASES = [
    (np.float32, True, r"st\.global\.v4\.b32"),
    (np.float16, True, r"st\.global\.v4\.b32"),
    (np.int8, True, r"st\.global\.v2\.b32"),  # 8 per thread in the default layout
    (np.float64, True, r"st\.global\.v2\.b64"),
    (np.int64, True, r"st\.global\.v2\.b64"),
    (np.int16, False, r"st\.global\.b16"),
    (np.int8, False, r"st\.global\.b8"),
]
IDS = [f"{np.dtype(d).name}-{'aligned' if a else 'ragged'}" for d, a, _ in CASES]
NAMES = {np.float32: "fp32", np.float16: "fp16", np.int8: "i8", np.float64: "fp64",
         np.int64: "i64", np.int16: "i16"}


def generate(dtype, aligned, warps):
    signature = {"x_ptr": "*" + NAMES[dtype], "y_ptr": "*" + NAMES[dtype], "n": "i32"}
    module = compiler.build_tile_ir(masked_copy.fn, signature, {"BLOCK": 1024},
                                    divisibility_16=["x_ptr", "y_ptr", "n"] if aligned else [],
                                    num_warps=warps)
    passes.run(module, compiler.PIPELINES["tgir"])
    return codegen.generate(module, arch="sm_90a", num_warps=warps)


@pytest.mark.parametrize("dtype, aligned, store", CASES, ids=IDS)
def test_masked_store_is_one_predicated_instruction(dtype, aligned, store):
    ptx = generate(dtype, aligned, 4)["ptx"]
    predicates = re.findall(r"(@%p\d+ )?st\.global", ptx)
    assert predicates and all(predicates)  # every store predicated
    assert not re.search(r"\bbra\b", ptx)  # and no branch around one
    assert re.search(r"@%p\d+ " + store + r" ", ptx)
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    assert ptxas.assemble(ptx, "sm_90a").report["spill_stores"] == 0


@pytest.mark.parametrize("dtype, aligned, store", CASES, ids=IDS)
def test_masked_store_writes_only_unmasked_elements(dtype, aligned, store):
    rng = np.random.default_rng()
    warps, programs = 4, 2
    n = 1024 + 496 if aligned else 1024 + 333  # the second program is partly masked
    x = (rng.standard_normal(programs * 1024) * 50).astype(dtype)
    sentinel = np.array(7, dtype)
    y = np.full(programs * 1024, sentinel, dtype)
    result = generate(dtype, aligned, warps)
    run_kernel(result["unoptimized_llvm_ir"], (programs,), [x, y, n], warps,
               result["shared_bytes"])
    np.testing.assert_array_equal(y[:n], (x[:n] + np.array(1, dtype)).astype(dtype))
    assert (y[n:] == sentinel).all()
