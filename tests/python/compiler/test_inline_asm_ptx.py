"""tl.inline_asm_elementwise compiles to the given PTX once per group of `pack` elements (narrow
elements packed in 32-bit registers, several outputs from one asm call), ptxas accepts it; the
interpreter refuses it naming the kernel and line; int64 <-> pointer casts compile."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas
from tessera.interpreter import KernelRuntimeError


def two_output_kernel(a_ptr, b_ptr, c_ptr, d_ptr, BLOCK: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, BLOCK))  # uint8
    b = tl.load(b_ptr + tl.arange(0, BLOCK))  # float32
    # Per 4 elements: c = int32(a), d = max(float(a), b) (Triton's documented example).
    (c, d) = tl.inline_asm_elementwise(
        asm="""
        {
            .reg .b8 tmp<4>;
            mov.b32 {tmp0, tmp1, tmp2, tmp3}, $8;
            cvt.u32.u8 $0, tmp0;
            cvt.u32.u8 $1, tmp1;
            cvt.u32.u8 $2, tmp2;
            cvt.u32.u8 $3, tmp3;
        }
        cvt.rn.f32.s32 $4, $0;
        cvt.rn.f32.s32 $5, $1;
        cvt.rn.f32.s32 $6, $2;
        cvt.rn.f32.s32 $7, $3;
        max.f32 $4, $4, $9;
        max.f32 $5, $5, $10;
        max.f32 $6, $6, $11;
        max.f32 $7, $7, $12;
        """,
        constraints="=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r",
        args=[a, b], dtype=(tl.int32, tl.float32), is_pure=True, pack=4)
    tl.store(c_ptr + tl.arange(0, BLOCK), c)
    tl.store(d_ptr + tl.arange(0, BLOCK), d)


def smid_kernel(out_ptr):
    tl.store(out_ptr, tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32,
                                                is_pure=False, pack=1))


def bad_constraints_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 128))
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r", [x], dtype=tl.float32,
                                  is_pure=True, pack=1)
    tl.store(x_ptr + tl.arange(0, 128), y)


def assemble(ptx, arch):
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    ptxas.assemble(ptx, arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("block", [256, 2048])
def test_one_asm_call_per_pack_group_for_both_outputs(arch, block):
    kernel = tessera.jit(two_output_kernel)
    a, b = np.zeros(block, np.uint8), np.zeros(block, np.float32)
    ptx = kernel.asm(a, b, np.zeros(block, np.int32), b, BLOCK=block, arch=arch,
                     num_warps=4)["ptx"]
    per_thread = block // 128
    groups = -(-per_thread // 4)  # the last group is padded
    assert ptx.count("cvt.u32.u8") == 4 * groups  # the two outputs share each call
    assert ptx.count("max.f32") == 4 * groups
    assemble(ptx, arch)


def test_side_effect_asm_without_arguments():
    ptx = tessera.jit(smid_kernel).asm(np.zeros(1, np.int32), arch="sm_90a")["ptx"]
    assert "%smid" in ptx
    assemble(ptx, "sm_90a")


def test_constraints_that_do_not_fit_are_a_compile_error_naming_the_op():
    from tessera import _tessera
    with pytest.raises(_tessera.ir.CompileError, match="inline_asm constraints"):
        tessera.jit(bad_constraints_kernel).asm(np.zeros(128, np.float32), arch="sm_80")


def test_interpreter_names_the_kernel_and_line():
    kernel = tessera.jit(two_output_kernel, interpret=True)
    a, b = np.zeros(128, np.uint8), np.zeros(128, np.float32)
    with pytest.raises(KernelRuntimeError, match="inline_asm_elementwise runs PTX") as error:
        kernel[(1,)](a, b, np.zeros(128, np.int32), b, BLOCK=128)
    assert "two_output_kernel" in str(error.value)
    assert "test_inline_asm_ptx.py:17" in str(error.value)


def test_bad_arguments_are_front_end_errors():
    def kernel(x_ptr, PACK: tl.constexpr, PURE: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, 16))
        a, b = tl.inline_asm_elementwise("", "=r,=r,r", [x], dtype=(tl.int32, tl.int32),
                                         is_pure=PURE, pack=PACK)
        tl.store(x_ptr + tl.arange(0, 16), a + b)
    jitted = tessera.jit(kernel, interpret=True)
    x = np.zeros(16, np.int32)
    with pytest.raises(tessera.CompilationError, match="pack must be a positive int"):
        jitted[(1,)](x, PACK=0, PURE=True)
    with pytest.raises(tessera.CompilationError, match="is_pure=False and several outputs"):
        jitted[(1,)](x, PACK=1, PURE=False)


def pointer_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    addresses = x_ptr.to(tl.int64) + offs.to(tl.int64) * 4
    values = tl.load(addresses.to(tl.pointer_type(tl.float32)), mask=offs < n)
    tl.store(tl.cast(out_ptr, tl.pointer_type(tl.int32)) + offs, values.to(tl.int32, bitcast=True),
             mask=offs < n)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_int64_pointer_casts_compile(arch):
    x = np.zeros(1024, np.float32)
    ptx = tessera.jit(pointer_kernel).asm(x, x, 1000, BLOCK=1024, arch=arch)["ptx"]
    assert "ld.global" in ptx
    assemble(ptx, arch)
