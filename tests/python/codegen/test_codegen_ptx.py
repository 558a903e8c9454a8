"""Codegen through the Python binding: PTX shape, ptxas acceptance, metadata and errors.

ptxas runs where it is installed; tests that need it are skipped visibly otherwise.
"""
import re

import pytest
from codegen_ir import Kernel, blocked, tensor, vector_add
from tessera._tessera import codegen, ir, passes
from tessera.compiler import ptxas

ARCHS = ["sm_80", "sm_90a"]
LAYOUT_PIPELINE = ["assign_layouts", "coalesce", "remove_layout_conversions", "canonicalize",
                   "cse", "dce"]
BLOCKED_4 = blocked([4], [32], [4], [0])
needs_ptxas = pytest.mark.skipif(ptxas.find_ptxas() is None,
                                 reason="ptxas not installed: PTX not assembled")


def global_accesses(ptx: str):
    """The distinct ld/st.global opcodes of the PTX, e.g. {'ld.global.v4.b32'}."""
    return set(re.findall(r"\b(?:ld|st)\.global[.a-z0-9]*", ptx))


def assemble_without_spills(ptx: str, arch: str, kernel: str):
    """The last step of a test: ptxas accepts the PTX, no spills; skipped visibly without it."""
    result = ptxas.assemble(ptx, arch)
    if result is None:
        pytest.skip("ptxas not installed: PTX not assembled")
    resources = result.kernels[kernel]
    assert resources["spill_stores"] == 0 and resources["spill_loads"] == 0, result.log
    return resources


def test_llvm_version():
    assert re.fullmatch(r"22\.\d+\.\d+", codegen.llvm_version())


@pytest.mark.parametrize("arch", ARCHS)
def test_vector_add_uses_16_byte_accesses(arch):
    result = codegen.generate(vector_add(layout=BLOCKED_4).module(), arch=arch)
    assert result["kernel_name"] == "add"
    assert result["num_warps"] == 4 and result["shared_bytes"] == 0
    assert f".target {arch}" in result["ptx"] and ".maxntid 128" in result["ptx"]
    assert global_accesses(result["ptx"]) == {"ld.global.v4.b32", "st.global.v4.b32"}
    assert result["ptx"].count("ld.global.v4.b32") == 4  # 8 registers: 2 vectors per operand
    assert 'define ptx_kernel void @add' in result["llvm_ir"]
    assert "load <4 x float>" in result["unoptimized_llvm_ir"]


@needs_ptxas
@pytest.mark.parametrize("arch", ARCHS)
def test_vector_add_assembles_without_spills(arch):
    result = codegen.generate(vector_add(layout=BLOCKED_4).module(), arch=arch)
    resources = assemble_without_spills(result["ptx"], arch, "add")
    assert 0 < resources["registers"] <= 64


@pytest.mark.parametrize("opt_level", [0, 1, 2, 3])
def test_every_opt_level_keeps_vector_accesses(opt_level):
    # The lowering itself emits the vector accesses; O0 must not depend on LLVM to form them.
    result = codegen.generate(vector_add(layout=BLOCKED_4).module(), opt_level=opt_level)
    assert global_accesses(result["ptx"]) == {"ld.global.v4.b32", "st.global.v4.b32"}
    assemble_without_spills(result["ptx"], "sm_90a", "add")


# After the layout passes every access is as wide as 16 bytes and the elements per thread
# allow (1024 elements over 128 threads = 8 each: i8 gets 8 bytes).
WIDEST_ACCESS = {"f32": "v4.b32", "i32": "v4.b32", "f16": "v4.b32", "bf16": "v4.b32",
                 "i16": "v4.b32", "i8": "v2.b32", "f64": "v2.b64", "i64": "v2.b64"}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("element", sorted(WIDEST_ACCESS))
def test_layout_pipeline_then_codegen(element, arch):
    module = vector_add(element).module()
    passes.run(module, LAYOUT_PIPELINE)
    result = codegen.generate(module, arch=arch)
    width = WIDEST_ACCESS[element]
    assert global_accesses(result["ptx"]) == {f"ld.global.{width}", f"st.global.{width}"}
    assemble_without_spills(result["ptx"], arch, "add")


def test_mask_that_may_change_inside_a_vector_gives_scalar_accesses():
    # n is not known to be a multiple of 4: `i < n` may flip inside a vector of 4.
    kernel = vector_add(layout=BLOCKED_4, divisibility=(16, 16, 16, 1))
    result = codegen.generate(kernel.module())
    assert global_accesses(result["ptx"]) == {"ld.global.b32", "st.global.b32"}


def test_num_warps_comes_from_the_module():
    layout = blocked([4], [32], [8], [0])
    kernel = vector_add(block=1024, layout=layout)
    kernel.num_warps = 8
    result = codegen.generate(kernel.module(), num_warps=4)
    assert result["num_warps"] == 8
    assert ".maxntid 256" in result["ptx"]


def test_layout_for_other_warp_count_is_rejected():
    kernel = vector_add(layout=blocked([4], [32], [8], [0]))  # module says 4 warps
    with pytest.raises(ir.CompileError, match="does not cover a CTA of 4 warps"):
        codegen.generate(kernel.module())


def test_convert_layout_reports_its_shared_memory():
    dst = blocked([1], [32], [4], [0])
    k = Kernel("convert", ["ptr<f32>", "ptr<f32>"], [16, 16])
    r = k.op("make_range", [], tensor([1024], "i32", BLOCKED_4), start=0, end=1024)
    p = k.op("addptr", [k.op("splat", [k.args[0]], tensor([1024], "ptr<f32>", BLOCKED_4)), r],
             tensor([1024], "ptr<f32>", BLOCKED_4))
    v = k.op("load", [p], tensor([1024], "f32", BLOCKED_4))
    w = k.op("convert_layout", [v], tensor([1024], "f32", dst))
    r2 = k.op("make_range", [], tensor([1024], "i32", dst), start=0, end=1024)
    q = k.op("addptr", [k.op("splat", [k.args[1]], tensor([1024], "ptr<f32>", dst)), r2],
             tensor([1024], "ptr<f32>", dst))
    k.op("store", [q, w])
    result = codegen.generate(k.module(), arch="sm_90a")
    assert result["shared_bytes"] == 1024 * 4
    # One barrier, between the stores and the loads: nothing used shared memory before (membar).
    assert result["ptx"].count("bar.sync") == 1
    assemble_without_spills(result["ptx"], "sm_90a", "convert")


def test_unknown_arch_is_a_compile_error():
    with pytest.raises(ir.CompileError, match="unsupported arch 'sm_70'"):
        codegen.generate(vector_add(layout=BLOCKED_4).module(), arch="sm_70")
    with pytest.raises(ir.CompileError, match="does not know arch 'sm_99'"):
        codegen.generate(vector_add(layout=BLOCKED_4).module(), arch="sm_99")


def test_tensor_without_layout_names_the_op():
    with pytest.raises(ir.CompileError, match="'program_id'|'make_range'|'splat'") as error:
        codegen.generate(vector_add().module())
    assert "has no layout encoding" in str(error.value)


def test_fp8_arithmetic_is_reported_not_miscompiled():
    k = Kernel("fp8", ["ptr<f8e4m3>"])
    x = k.op("load", [k.args[0]], "f8e4m3")
    k.op("store", [k.args[0], k.op("addf", [x, x], "f8e4m3")])
    with pytest.raises(ir.CompileError, match="'addf' on fp8 values is not supported"):
        codegen.generate(k.module())
