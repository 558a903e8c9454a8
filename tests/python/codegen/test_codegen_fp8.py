"""The software fp8 conversions codegen emits for sm_80 (exact integer/float code, no fp8
instructions), run on the CPU by the SIMT simulator over every fp8 code and random values of
every source type, agree bit for bit with the interpreter's numerics (which
tests/python/interpreter/test_interpreter_fp8.py checks against exact rounding)."""
import ml_dtypes
import numpy as np
import pytest
from simt import run_kernel

import tessera.language as tl
from tessera._tessera import codegen, passes
from tessera.compiler import compiler
from tessera.interpreter import numerics as nm

FORMATS = {"fp8e4nv": ml_dtypes.float8_e4m3fn, "fp8e5": ml_dtypes.float8_e5m2,
           "fp8e4b8": ml_dtypes.float8_e4m3fnuz, "fp8e5b16": ml_dtypes.float8_e5m2fnuz}
SOURCES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16,
           "fp64": np.float64}


def convert_kernel(x_ptr, codes_ptr, out_ptr, ROUNDING: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(codes_ptr + offs, x.to(codes_ptr.dtype.element_ty, fp_downcast_rounding=ROUNDING))
    tl.store(out_ptr + offs, tl.load(codes_ptr + offs).to(out_ptr.dtype.element_ty))


def decode_kernel(codes_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(codes_ptr + offs).to(out_ptr.dtype.element_ty))


def generate(fn, signature, constexprs):
    module = compiler.build_tile_ir(fn, signature, constexprs, num_warps=1)
    passes.run(module, compiler.PIPELINES["tgir"])
    return codegen.generate(module, arch="sm_80", num_warps=1)["unoptimized_llvm_ir"]


def run(source, fp8, rounding, x, dest="fp32"):
    signature = {"x_ptr": "*" + source, "codes_ptr": "*" + fp8, "out_ptr": "*" + dest}
    block = x.size
    module = compiler.build_tile_ir(convert_kernel, signature,
                                    {"ROUNDING": rounding, "BLOCK": block}, num_warps=1)
    passes.run(module, compiler.PIPELINES["tgir"])
    result = codegen.generate(module, arch="sm_80", num_warps=1)
    codes = np.zeros(block, np.uint8)
    out = np.zeros(block, SOURCES[dest])
    run_kernel(result["unoptimized_llvm_ir"], (1,), [x, codes, out], num_warps=1)
    return codes, out


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("fp8", list(FORMATS))
def test_sm80_software_conversions_match_the_interpreter(fp8, source, rounding):
    rng = np.random.default_rng(abs(hash((fp8, source, rounding))) % 2**32)
    fmt = np.dtype(FORMATS[fp8])
    limit = float(ml_dtypes.finfo(fmt).max)
    x = np.exp2(rng.uniform(-22, np.log2(limit) + 2, 256)) * rng.choice([-1.0, 1.0], 256)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, limit, -3 * limit, 1.0]
    # Ties: the midpoints between neighbouring fp8 values (exact in every source but bf16).
    finite = np.unique(np.arange(256, dtype=np.uint8).view(fmt).astype(np.float64))
    finite = finite[np.isfinite(finite)]
    x[8:40] = rng.choice((finite[1:] + finite[:-1]) / 2, 32)
    with np.errstate(over="ignore"):
        x = x.astype(SOURCES[source])
    codes, out = run(source, fp8, rounding, x)
    expected = nm.to_float_toward_zero(x, fmt) if rounding == "rtz" else nm.to_float(x, fmt)
    expected_codes = np.asarray(expected).view(np.uint8)
    nan = np.isnan(np.asarray(expected).astype(np.float64))
    np.testing.assert_array_equal(codes[~nan], expected_codes[~nan])
    assert np.all(np.isnan(np.asarray(codes).view(fmt).astype(np.float64)[nan]))


@pytest.mark.parametrize("dest", list(SOURCES))
@pytest.mark.parametrize("fp8", list(FORMATS))
def test_sm80_decodes_every_code_exactly(fp8, dest):
    fmt = np.dtype(FORMATS[fp8])
    codes = np.arange(256, dtype=np.uint8)
    out = np.zeros(256, SOURCES[dest])
    llvm_ir = generate(decode_kernel, {"codes_ptr": "*" + fp8, "out_ptr": "*" + dest},
                       {"BLOCK": 256})
    run_kernel(llvm_ir, (1,), [codes, out], num_warps=1)
    expected = codes.view(fmt).astype(np.float64)
    got = out.astype(np.float64)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan], expected[~nan])
    np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(expected[~nan]))


@pytest.mark.parametrize("source", list(SOURCES))
def test_fp8e4b15_encoding_is_tritons(source):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-2.5, 2.5, 200), np.exp2(rng.uniform(-20, 0, 48)),
                        [0.0, -0.0, np.nan, 1.8, -7.0, 1e-9, np.inf, -np.inf]])
    with np.errstate(over="ignore"):
        x = x.astype(SOURCES[source])
    codes, out = run(source, "fp8e4b15", "rtne", x)
    np.testing.assert_array_equal(codes, nm.to_e4b15(x))
    np.testing.assert_array_equal(out, nm.from_e4b15(codes))


@pytest.mark.parametrize("dest", ["fp16", "bf16"])
@pytest.mark.parametrize("source", ["fp32", "fp64"])
def test_toward_zero_narrowing_to_16_bits(source, dest):
    rng = np.random.default_rng(9)
    x = (np.exp2(rng.uniform(-30, 20, 256)) * rng.choice([-1.0, 1.0], 256))
    x[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30]
    x = x.astype(SOURCES[source])
    out = np.zeros(256, SOURCES[dest])
    llvm_ir = generate(narrow_kernel, {"x_ptr": "*" + source, "out_ptr": "*" + dest},
                       {"BLOCK": 256})
    run_kernel(llvm_ir, (1,), [x, out], num_warps=1)
    expected = nm.to_float_toward_zero(x, np.dtype(SOURCES[dest]))
    np.testing.assert_array_equal(out.view(np.uint16)[~np.isnan(x)],
                                  np.asarray(expected).view(np.uint16)[~np.isnan(x)])


def narrow_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs,
             tl.load(x_ptr + offs).to(out_ptr.dtype.element_ty, fp_downcast_rounding="rtz"))
