# libdevice (tl.extra.cuda.libdevice) in the interpreter: every function of the table on fresh
# random inputs and special values (NaN, inf, -0, extremes), sizes not a multiple of the block,
# against the independent reference of tessera.testing.libdevice_reference (SciPy, decimal,
# exact comparisons), within tessera.testing.libdevice_cases.cpu_tolerance. Also: the table
# covers Triton's names, the import paths, Triton's dispatch rules (exact dtypes, broadcast,
# scalars, int1 results) and the generic tl.extern_elementwise / core.extern.
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.errors import CompilationError
from tessera.language import core
from tessera.language.extra import libdevice
from tessera.language.extra.libdevice_table import BY_SYMBOL, FUNCTIONS, TRITON_NAMES
from tessera.testing import libdevice_cases as cases
from tessera.testing.libdevice_reference import describe, expected, mismatches

GROUPS = cases.groups()


@pytest.fixture
def interpret():
    tessera.config.knobs.interpret = True
    yield
    tessera.config.knobs.reset("interpret")


def test_table_covers_every_triton_libdevice_function():
    assert set(FUNCTIONS) == set(TRITON_NAMES) and len(TRITON_NAMES) == 197
    symbols = [s.symbol for f in FUNCTIONS.values() for s in f.signatures]
    assert len(symbols) == len(set(symbols)) == len(BY_SYMBOL)
    assert all(s.startswith("__nv_") for s in symbols)
    for function in FUNCTIONS.values():  # one arity per function, arguments of one table
        assert len({len(s.args) for s in function.signatures}) == 1
        assert len({s.args for s in function.signatures}) == len(function.signatures)


def test_import_paths_give_one_module():
    from tessera.language.extra.cuda import libdevice as cuda_libdevice
    import tessera.language.extra.libdevice as extra_libdevice

    assert libdevice is cuda_libdevice is extra_libdevice
    assert tl.extra.cuda.libdevice is tl.extra.libdevice is libdevice
    assert sorted(libdevice.__all__) == sorted(TRITON_NAMES)
    for name in TRITON_NAMES:
        function = getattr(libdevice, name)
        assert core.is_builtin(function) and "Example:" in function.__doc__
        assert FUNCTIONS[name].signatures[0].symbol in function.__doc__
    with pytest.raises(AttributeError, match="libdevice has no function 'tanhh'"):
        libdevice.tanhh


@tessera.jit
def attribute_paths_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.extra.cuda.libdevice.rsqrt_rn(x))  # Triton's spellings
    tl.store(out_ptr + BLOCK + offs, tl.extra.libdevice.cbrt(x))


def test_attribute_paths_in_a_kernel(interpret, rng):
    x = rng.uniform(0.5, 100, 64).astype(np.float32)
    out = np.zeros(128, np.float32)
    attribute_paths_kernel[(1,)](x, out, BLOCK=64)
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(out[:64], (1 / np.sqrt(x64)).astype(np.float32))
    np.testing.assert_array_equal(out[64:], np.cbrt(x64).astype(np.float32))


@pytest.mark.parametrize("group", GROUPS, ids=[g.label for g in GROUPS])
def test_every_function_against_the_reference(interpret, rng, group):
    n, block = (37, 16) if group.slow else (203, 64)  # ragged: 203 = 3 * 64 + 11
    inputs = cases.make_inputs(group, n, rng)
    out = np.zeros((len(group.members), n), dtype=group.result)
    cases.KERNELS[len(group.args)][(tessera.cdiv(n, block),)](
        *inputs, out, n, NAMES=group.names, BLOCK=block)
    failures = []
    for k, (name, signature) in enumerate(group.members):
        args = [a[k] for a in inputs]
        want = expected(name, signature, args)
        bad = mismatches(out[k], want, *cases.cpu_tolerance(name, signature))
        if len(bad):
            failures.append(describe(name, args, out[k], want, bad))
    assert not failures, "\n".join(failures)


@tessera.jit
def dispatch_kernel(x_ptr, y_ptr, i_ptr, out_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask, other=1.0)
    i = tl.load(i_ptr + offs, mask=mask)
    # Python numbers: 3 is int32 (powi), 2.0 fp32 (powf); a row against a column broadcasts.
    tl.store(out_ptr + offs, libdevice.pow(x, 3), mask=mask)
    tl.store(out_ptr + BLOCK + offs, libdevice.pow(x, 2.0), mask=mask)
    tl.store(out_ptr + 2 * BLOCK + offs, libdevice.ldexp(x, i), mask=mask)
    grid = libdevice.atan2(x[:, None], y[None, :])
    tl.store(out_ptr + 3 * BLOCK + offs, tl.sum(grid, axis=1), mask=mask)
    tl.store(out_ptr + 4 * BLOCK + offs, x * 0 + libdevice.tanh(0.5), mask=mask)
    tl.store(flag_ptr + offs, tl.where(libdevice.isnan(x), 1, 0), mask=mask)


def test_dispatch_broadcast_scalars_and_int1_results(interpret, rng):
    n, block = 29, 32
    x = rng.standard_normal(n).astype(np.float32)
    x[3] = np.nan
    y = rng.standard_normal(n).astype(np.float32)
    i = rng.integers(-20, 20, n).astype(np.int32)
    out = np.zeros(5 * block, np.float32)
    flags = np.zeros(n, np.int32)
    dispatch_kernel[(1,)](x, y, i, out, flags, n, BLOCK=block)
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(out[:n], (x64 ** 3).astype(np.float32))
    np.testing.assert_array_equal(out[block:block + n], (x64 ** 2).astype(np.float32))
    np.testing.assert_array_equal(out[2 * block:2 * block + n], np.ldexp(x, i))
    padded = np.ones(block, np.float64)  # the masked-off lanes of y load 1.0
    padded[:n] = y
    rows = np.arctan2(x64[:, None], padded[None, :]).sum(axis=1)
    np.testing.assert_allclose(out[3 * block:3 * block + n], rows, rtol=1e-5, atol=1e-5)
    assert out[4 * block] == np.float32(np.tanh(0.5))
    np.testing.assert_array_equal(flags, np.isnan(x).astype(np.int32))


@tessera.jit
def unary_kernel(x_ptr, out_ptr, NAME: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, getattr(libdevice, NAME)(tl.load(x_ptr + offs)))


@pytest.mark.parametrize("dtype,message", [
    (np.float16, r"libdevice\.tanh takes argument dtypes \(fp32\) or \(fp64\), got \(fp16\); "
                 r"fp16/bf16 are not accepted"),
    (np.int32, r"libdevice\.tanh takes argument dtypes \(fp32\) or \(fp64\), got \(int32\)"),
])
def test_dtypes_must_match_a_signature(interpret, dtype, message):
    x = np.zeros(16, dtype)
    with pytest.raises(CompilationError, match=message) as info:
        unary_kernel[(1,)](x, np.zeros(16, np.float32), NAME="tanh", BLOCK=16)
    assert "unary_kernel" in str(info.value) and "getattr(libdevice, NAME)" in str(info.value)


@tessera.jit
def arity_kernel(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK), libdevice.atan2(x))


@tessera.jit
def missing_kernel(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK), libdevice.not_a_function(x))


def test_bad_calls_name_the_function_and_the_line(interpret):
    x = np.zeros(16, np.float32)
    with pytest.raises(CompilationError, match=r"libdevice\.atan2: missing a required "
                                               r"argument: 'arg1'"):
        arity_kernel[(1,)](x, BLOCK=16)
    with pytest.raises(CompilationError, match="libdevice has no function 'not_a_function'") \
            as info:
        missing_kernel[(1,)](x, BLOCK=16)
    assert "missing_kernel" in str(info.value)


@core.extern
def my_erf(arg0, _semantic=None):
    return core.extern_elementwise("", "", [arg0], {
        (core.dtype("fp32"),): ("__nv_erff", core.dtype("fp32")),
        (core.dtype("fp64"),): ("__nv_erf", core.dtype("fp64")),
    }, is_pure=True, _semantic=_semantic)


@core.extern
def float_bits(arg0, _semantic=None):
    return tl.extern_elementwise("", "", [arg0], {(tl.float32,): ("__nv_float_as_int",
                                                                  tl.int32)},
                                 is_pure=True, _semantic=_semantic)


@tessera.jit
def user_extern_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, my_erf(x))
    tl.store(out_ptr + BLOCK + offs, float_bits(x).to(tl.float32, bitcast=True))


def test_user_written_extern_calls(interpret, rng):
    import math

    x = rng.standard_normal(64).astype(np.float32)
    out = np.zeros(128, np.float32)
    user_extern_kernel[(1,)](x, out, BLOCK=64)
    np.testing.assert_array_equal(out[:64], np.array([math.erf(v) for v in x.tolist()],
                                                     dtype=np.float32))
    np.testing.assert_array_equal(out[64:], x)


@core.extern
def my_fn(arg0, _semantic=None):
    return core.extern_elementwise("mylib", "/nowhere/mylib.bc", [arg0],
                                   {(core.dtype("fp32"),): ("my_fn", core.dtype("fp32"))},
                                   is_pure=False, _semantic=_semantic)


@tessera.jit
def unknown_symbol_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, my_fn(tl.load(x_ptr + offs)))


def test_an_unknown_symbol_cannot_run_in_the_interpreter(interpret):
    with pytest.raises(Exception, match="cannot run the external function 'my_fn'"):
        unknown_symbol_kernel[(1,)](np.zeros(16, np.float32), BLOCK=16)


def test_existing_math_functions_are_unchanged():
    # tl.math keeps its own ops (fast paths, fp16/bf16 computed in fp32): not libdevice's.
    assert tl.math.exp is tl.exp and tl.math.tanh is not libdevice.tanh
