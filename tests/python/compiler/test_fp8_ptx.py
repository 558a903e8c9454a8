"""fp8 conversions compile on sm_80 (exact software conversions) and sm_90a (the hardware's
cvt.rn.satfinite e4m3x2/e5m2x2 and cvt.rn.f16x2 from e4m3x2/e5m2x2), and ptxas accepts them."""
import ml_dtypes
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas


@tessera.jit
def round_trip_kernel(x_ptr, codes_ptr, out_ptr, n, ROUNDING: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    codes = x.to(codes_ptr.dtype.element_ty, fp_downcast_rounding=ROUNDING)
    tl.store(codes_ptr + offs, codes, mask=offs < n)
    tl.store(out_ptr + offs, tl.load(codes_ptr + offs, mask=offs < n).to(tl.float32) * 2.0,
             mask=offs < n)


FP8 = {"e4nv": ml_dtypes.float8_e4m3fn, "e5": ml_dtypes.float8_e5m2}


def compile_round_trip(arch, fmt, rounding="rtne", source=np.float32, codes=None):
    x = np.zeros(1024, source)
    codes = np.zeros(1024, FP8[fmt]) if codes is None else codes
    return round_trip_kernel.asm(x, codes, np.zeros(1024, np.float32), 1000,
                                 ROUNDING=rounding, BLOCK=1024, arch=arch)


def assemble(ptx, arch):
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    result = ptxas.assemble(ptx, arch)
    assert result.report["spill_stores"] == 0


@pytest.mark.parametrize("fmt,name", [("e4nv", "e4m3x2"), ("e5", "e5m2x2")])
def test_sm90a_uses_the_hardware_conversions(fmt, name):
    ptx = compile_round_trip("sm_90a", fmt)["ptx"]
    assert f"cvt.rn.satfinite.{name}.f32" in ptx
    assert f"cvt.rn.f16x2.{name}" in ptx
    assemble(ptx, "sm_90a")


@pytest.mark.parametrize("fmt", ["e4nv", "e5"])
@pytest.mark.parametrize("source", [np.float32, np.float16, np.float64])
def test_sm80_converts_in_software(fmt, source):
    ptx = compile_round_trip("sm_80", fmt, source=source)["ptx"]
    assert "e4m3x2" not in ptx and "e5m2x2" not in ptx  # sm_80 has no fp8 instructions
    assert "cvt.rni" in ptx  # the rounding to the quantum
    assemble(ptx, "sm_80")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_toward_zero_truncates_the_quantum(arch):
    ptx = compile_round_trip(arch, "e4nv", rounding="rtz")["ptx"]
    assert "cvt.rzi" in ptx and "satfinite.e4m3x2" not in ptx
    assemble(ptx, arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_fp8e4b15_and_fnuz_formats_compile(arch):
    codes = tessera.reinterpret(np.zeros(1024, np.uint8), tl.float8e4b15)
    ptx = compile_round_trip(arch, "e4nv", codes=codes)["ptx"]
    assert "cvt.rz.f16.f32" in ptx  # Triton's e4b15 conversion narrows toward zero first
    assemble(ptx, arch)
    ptx = compile_round_trip(arch, "e4nv", codes=np.zeros(1024, ml_dtypes.float8_e4m3fnuz))["ptx"]
    assemble(ptx, arch)


def test_fp16_rtz_uses_cvt_rz():
    ptx = compile_round_trip("sm_80", "e4nv", rounding="rtz",
                             codes=np.zeros(1024, np.float16))["ptx"]
    assert "cvt.rz.f16.f32" in ptx
    assemble(ptx, "sm_80")
