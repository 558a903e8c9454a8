"""``tl.extra.cuda.convert_custom_float8_sm80`` / ``_sm70`` (float8e4b15 <-> float16/float32)
against a float64 reference that decodes the format from its definition (E4M3, bias 15, no
specials) and rounds by searching its value grid. Interpreter over every code and random,
huge, tiny and NaN inputs on ragged sizes; both directions compile through ptxas."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas
from tessera.language.extra import cuda

BLOCK = 128
CONVERTERS = {"sm80": cuda.convert_custom_float8_sm80, "sm70": cuda.convert_custom_float8_sm70}


def decode(code: int) -> float:
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 7
    if exponent == 0:
        return sign * mantissa / 8 * 2.0 ** -14
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 15)


GRID = np.array([decode(c) for c in range(0x7F)])  # magnitudes up to 1.75 (code 0x7e)


def f16_toward_zero(x: np.float32) -> np.float16:
    with np.errstate(over="ignore"):  # beyond 65504: inf, then stepped back below
        nearest = np.float16(x)
    if np.isfinite(x) and abs(float(nearest)) > abs(float(x)):
        nearest = np.nextafter(nearest, np.float16(0))
    return nearest


def encode(value: np.float16) -> int:
    sign = 0x80 if np.signbit(value) else 0
    magnitude = 1.75 if np.isnan(value) else min(abs(float(value)), 1.75)
    distance = np.abs(GRID - magnitude)
    ties = np.flatnonzero(distance == distance.min())
    return sign | int(ties[-1])  # halfway: the larger magnitude (away from zero)


def make_kernels(which: str):
    convert = CONVERTERS[which]

    @tessera.jit
    def down(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        y = convert(tl.load(x_ptr + offs, mask=mask), tl.float8e4b15)
        tl.store(out_ptr + offs, y.to(tl.uint8, bitcast=True), mask=mask)

    @tessera.jit
    def up(bits_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        codes = tl.load(bits_ptr + offs, mask=mask).to(tl.float8e4b15, bitcast=True)
        y = convert(codes, out_ptr.dtype.element_ty)
        tl.store(out_ptr + offs, y, mask=mask)

    return down, up


def _inputs(rng, n, dtype):
    values = rng.standard_normal(n) * 2.0 ** rng.integers(-20, 4, n)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.75, 1.8125, 1e6, -7e4, 2.0 ** -17 * 1.5]
    values[: min(n, len(specials))] = specials[:n]
    with np.errstate(over="ignore"):  # 1e6 as float16 is inf, on purpose
        return values.astype(dtype)


@pytest.mark.parametrize("which", sorted(CONVERTERS))
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("n", [1, 200, 1000])
def test_to_float8e4b15(which, dtype, n):
    rng = np.random.default_rng()
    x = _inputs(rng, n, dtype)
    out = np.zeros(n, np.uint8)
    down, _ = make_kernels(which)
    tessera.jit(down.fn, interpret=True)[(tessera.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    halves = [v if dtype == np.float16 else f16_toward_zero(v) for v in x]
    expected = np.array([encode(np.float16(h)) for h in halves], np.uint8)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("which", sorted(CONVERTERS))
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_from_float8e4b15_every_code(which, dtype):
    rng = np.random.default_rng()
    codes = rng.permutation(np.arange(256, dtype=np.uint8))
    out = np.zeros(256, dtype)
    _, up = make_kernels(which)
    tessera.jit(up.fn, interpret=True)[(tessera.cdiv(256, BLOCK),)](codes, out, 256, BLOCK=BLOCK)
    expected = np.array([decode(int(c)) for c in codes])
    np.testing.assert_array_equal(out.astype(np.float64), expected)
    np.testing.assert_array_equal(np.signbit(out), codes >= 0x80)


def test_bad_dtype_is_rejected():
    @tessera.jit
    def bad(x_ptr, out_ptr):
        tl.store(out_ptr, cuda.convert_custom_float8_sm80(tl.load(x_ptr), tl.float8e4b15))
    with pytest.raises(Exception, match="convert_custom_float8.*int32"):
        tessera.jit(bad.fn, interpret=True)[(1,)](np.zeros(1, np.int32), np.zeros(1, np.int32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compiles_through_ptxas(arch):
    down, up = make_kernels("sm80")
    for kernel, args in ((down, (np.zeros(8, np.float32), np.zeros(8, np.uint8))),
                         (up, (np.zeros(8, np.uint8), np.zeros(8, np.float16)))):
        stages = kernel.asm(*args, 8, BLOCK=BLOCK, arch=arch)
        if ptxas.find_ptxas() is not None:
            assert "cubin" in stages
