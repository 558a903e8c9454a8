"""@jit options with Triton's meaning: do_not_specialize / do_not_specialize_on_alignment (counted
compilations, through the Python path and the C++ fast path, which must agree), debug (device
asserts), noinline, repr and launch_metadata; and kernels given None for a pointer or a
parameter named like a launch option. Without a GPU: kernels are "prepared" into recording
launchers (launch_fakes.py), one per compilation."""
import os
import random
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from launch_fakes import FakeGpu, expected_parameters, fast_launch_count  # noqa: E402

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.config import knobs  # noqa: E402

torch = pytest.importorskip("torch")
if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
    pytest.skip("this torch has no DLPack exchange table (the fast path needs it)",
                allow_module_level=True)


@pytest.fixture
def gpu(monkeypatch):
    knobs.interpret = False
    yield FakeGpu(monkeypatch)
    knobs.reset("interpret")


def make_scale(**options):
    @tessera.jit(**options)
    def scale(x_ptr, y_ptr, n, factor, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) * factor, mask=offs < n)
    return scale


def launch_all(kernel, x, ns):
    for n in ns:
        kernel[(1,)](x, x, n, 2.0, BLOCK=64)


def test_specialized_int_compiles_per_divisibility_and_one(gpu):
    kernel = make_scale()
    x = torch.zeros(64)
    launch_all(kernel, x, [16, 17, 1, 32, 33, 1])
    # n=16 and 32 (divisible by 16), 17 and 33 (neither), 1 (equal to 1): three kernels.
    assert len(gpu.prepared) == 3
    eq1 = [k.prepared_for[0][2] for k in gpu.prepared]
    div16 = [k.prepared_for[0][1] for k in gpu.prepared]
    assert {"n"} in eq1 and {"x_ptr", "y_ptr", "n"} in div16


@pytest.mark.parametrize("spec", [["n"], [2]])
def test_do_not_specialize_never_recompiles(gpu, spec):
    kernel = make_scale(do_not_specialize=spec)
    x = torch.zeros(64)
    values = [16, 17, 1, 32, 33, 1] + [random.randrange(1, 10**6) for _ in range(10)]
    launch_all(kernel, x, values)
    assert len(gpu.prepared) == 1
    specialization = gpu.prepared[0].prepared_for[0]
    assert "n" not in specialization[1] and "n" not in specialization[2]
    # The C++ key agrees: every launch after the first is a fast one (a C++ key finer than the
    # Python one would miss its table and come back through Python for new divisibilities).
    assert fast_launch_count(kernel) == len(values) - 1


def test_do_not_specialize_pointer_drops_alignment(gpu):
    kernel = make_scale(do_not_specialize=["x_ptr"])
    base = torch.zeros(80)
    kernel[(1,)](base, base, 64, 2.0, BLOCK=64)       # 16-byte aligned
    kernel[(1,)](base[1:], base, 64, 2.0, BLOCK=64)   # 4-byte aligned
    assert len(gpu.prepared) == 1
    assert "x_ptr" not in gpu.prepared[0].prepared_for[0][1]
    assert fast_launch_count(kernel) == 1


def test_do_not_specialize_on_alignment_keeps_equal_to_one(gpu):
    kernel = make_scale(do_not_specialize_on_alignment=["n"])
    x = torch.zeros(64)
    launch_all(kernel, x, [16, 17, 32, 1, 1, 48])
    # Divisibility is dropped, equality to 1 is not: {16, 17, 32, 48} and {1}.
    assert len(gpu.prepared) == 2
    assert sorted(bool(k.prepared_for[0][2]) for k in gpu.prepared) == [False, True]
    assert all("n" not in k.prepared_for[0][1] for k in gpu.prepared)
    assert fast_launch_count(kernel) == 4


def test_do_not_specialize_in_the_interpreter_counts_tile_ir_builds():
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, dtype=np.float32)
    for options, expected in (({}, 3), ({"do_not_specialize": ["n"]}, 1)):
        kernel = make_scale(interpret=True, **options)
        for n in (16, 17, 1, 33, 64):
            y[:] = 0
            kernel[(1,)](x, y, n, 2.0, BLOCK=64)
            np.testing.assert_array_equal(y[:n], 2 * x[:n])
            assert not y[n:].any()
        assert len(kernel._tile_ir) == expected


def test_launch_options_are_part_of_the_key_in_both_paths(gpu):
    kernel = make_scale()
    x = torch.zeros(64)
    for _ in range(3):
        kernel[(1,)](x, x, 64, 2.0, BLOCK=64, num_ctas=1)
        kernel[(1,)](x, x, 64, 2.0, BLOCK=64, maxnreg=64)
        kernel[(1,)](x, x, 64, 2.0, BLOCK=64, enable_fp_fusion=False)
        kernel[(1,)](x, x, 64, 2.0, BLOCK=64)
    options = [k.options for k in gpu.prepared]
    assert len(options) == 3          # num_ctas=1 is the default: the same kernel as none
    assert {o.maxnreg for o in options} == {None, 64}
    assert {o.enable_fp_fusion for o in options} == {True, False}
    assert fast_launch_count(kernel) == 12 - 4   # num_ctas=1 and none: two C++ keys, one kernel


def test_num_ctas_other_than_one_is_a_clear_error(gpu):
    kernel = make_scale()
    x = torch.zeros(64)
    with pytest.raises(ValueError, match=r"scale: num_ctas=2: thread-block clusters"):
        kernel[(1,)](x, x, 64, 2.0, BLOCK=64, num_ctas=2)
    with pytest.raises(ValueError, match=r"maxnreg=0"):
        kernel[(1,)](x, x, 64, 2.0, BLOCK=64, maxnreg=0)
    with pytest.raises(ValueError, match=r"launch_pdl=True is a Triton option"):
        kernel[(1,)](x, x, 64, 2.0, BLOCK=64, launch_pdl=True)
    kernel[(1,)](x, x, 64, 2.0, BLOCK=64, launch_pdl=False)   # Triton's default: accepted


def test_parameter_named_like_a_launch_option_gets_the_value_and_the_launch_too(gpu):
    @tessera.jit
    def warps(x_ptr, num_warps: tl.constexpr, num_stages, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.full((BLOCK,), num_warps * 100 + num_stages, tl.int32))

    x = torch.zeros(64, dtype=torch.int32)
    for _ in range(3):
        warps[(1,)](x, num_warps=8, num_stages=3, BLOCK=64)
    (kernel,) = gpu.prepared
    assert kernel.options.num_warps == 8 and kernel.options.num_stages == 3
    assert kernel.prepared_for[1]["num_warps"] == 8
    assert kernel.prepared_for[0][0]["num_stages"] == "i32"   # a runtime argument as well
    assert fast_launch_count(warps) == 2


def test_parameter_named_like_a_launch_option_in_the_interpreter():
    @tessera.jit(interpret=True)
    def warps(x_ptr, num_warps: tl.constexpr, num_stages, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.full((BLOCK,), num_warps * 100 + num_stages, tl.int32))

    x = np.zeros(16, dtype=np.int32)
    warps[(1,)](x, num_warps=2, num_stages=7, BLOCK=16)
    np.testing.assert_array_equal(x, np.full(16, 207))


def make_bias_kernel():
    @tessera.jit
    def add_bias(x_ptr, bias_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        if bias_ptr is not None:
            x += tl.load(bias_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x, mask=mask)
    return add_bias


def test_none_for_a_pointer_is_a_constexpr_none_in_the_interpreter():
    kernel = make_bias_kernel()
    kernel.interpret = True
    rng = np.random.default_rng()
    n = int(rng.integers(100, 300))
    x, bias = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    grid = (tessera.cdiv(n, 64),)
    kernel[grid](x, None, out, n, BLOCK=64)
    np.testing.assert_array_equal(out, x)
    kernel[grid](x, bias, out, n, BLOCK=64)
    np.testing.assert_array_equal(out, x + bias)
    assert len(kernel._tile_ir) == 2
    loads = sorted(module.str().count("= load") for module in kernel._tile_ir.values())
    assert loads == [1, 2]      # `if bias_ptr is not None:` folded away for None


def test_none_for_a_pointer_compiles_without_the_parameter(gpu):
    kernel = make_bias_kernel()
    x = torch.zeros(64)
    for _ in range(2):
        kernel[(1,)](x, None, x, 64, BLOCK=64)
        kernel[(1,)](x, x, x, 64, BLOCK=64)
    assert len(gpu.prepared) == 2
    without = [k for k in gpu.prepared if "bias_ptr" not in k.prepared_for[0][0]]
    assert len(without) == 1 and without[0].prepared_for[1]["bias_ptr"] is None
    assert without[0].arg_names == ["x_ptr", "out_ptr", "n"]
    # The C++ fast path takes None too (a key word of its own, no parameter packed): the
    # second round of both calls launched from C++, each with its own kernel and parameters.
    assert fast_launch_count(kernel) == 2
    kernel[(1,)](x, None, x, 48, BLOCK=64)      # n % 16 == 0 as before: the same kernel
    grid, _, parameters, launched, _ = kernel._dispatch_recorded()
    assert launched is without[0]
    assert parameters == expected_parameters([x, x, 48])
    # The tile IR of the None specialization has no bias load: the `if` folded.
    signature, div16, eq1, _ = without[0].prepared_for[0]
    from tessera.compiler import build_tile_ir
    module = build_tile_ir(kernel.fn, signature, without[0].prepared_for[1], div16, eq1)
    assert module.str().count("load") == 1


def test_debug_compiles_device_asserts_in():
    @tessera.jit
    def checked(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.device_assert(offs < n, "offset past n")
        tl.store(x_ptr + offs, offs, mask=offs < n)

    x = np.zeros(16, np.int32)
    plain = checked.asm(x, 16, BLOCK=16)["tir"]
    assert "assert" not in plain
    assert "assert" in checked.asm(x, 16, BLOCK=16, debug=True)["tir"]
    with knobs.scope(debug=True):
        assert "assert" in checked.asm(x, 16, BLOCK=16)["tir"]
    debug_kernel = tessera.jit(debug=True)(checked.fn)
    assert "assert" in debug_kernel.asm(x, 16, BLOCK=16)["tir"]
    assert "__assertfail" in debug_kernel.asm(x, 16, BLOCK=16)["ptx"]


def test_noinline_repr_and_launch_metadata_are_kept():
    @tessera.jit(noinline=True)
    def helper(x):
        return x * 3

    def name_of(specialization):
        return "custom-name"

    def metadata(grid, kernel, args):
        return {"name": "scale"}

    @tessera.jit(repr=name_of, launch_metadata=metadata, interpret=True)
    def outer(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, helper(tl.load(x_ptr + offs)))

    assert helper.noinline is True and outer.launch_metadata is metadata
    assert outer.repr(None) == "custom-name"
    assert helper.repr(None).endswith("helper")
    x = np.arange(8, dtype=np.float32)
    outer[(1,)](x, BLOCK=8)     # a noinline helper still runs (inlined: Tessera has no calls)
    np.testing.assert_array_equal(x, 3 * np.arange(8, dtype=np.float32))


def test_launch_options_are_normalized_and_checked():
    from tessera.launch_options import LaunchOptions, parse_options, split_launch_kwargs
    assert parse_options("k", {}, None) == LaunchOptions()
    assert parse_options("k", {"num_stages": 0}, None) == LaunchOptions(num_stages=1)
    assert parse_options("k", {"debug": None}, True).debug is True
    assert parse_options("k", {"debug": False}, True).debug is False
    assert parse_options("k", {"enable_fp_fusion": None}, None).enable_fp_fusion is True
    with pytest.raises(ValueError, match="k: launch option num_warps=3: must be a power of two "
                                         "from 1 to 32"):
        parse_options("k", {"num_warps": 3}, None)
    with pytest.raises(ValueError, match="num_ctas=True"):
        parse_options("k", {"num_ctas": True}, None)
    options, rest = split_launch_kwargs("k", {"x", "num_warps"},
                                        {"x": 1, "num_warps": 8, "maxnreg": 32,
                                         "launch_cooperative_grid": False})
    assert options == {"num_warps": 8, "maxnreg": 32}
    assert rest == {"x": 1, "num_warps": 8}


def test_a_cooperative_grid_runs_in_the_interpreter_and_is_refused_on_the_gpu(gpu):
    # Triton's launch_cooperative_grid=True: the interpreter takes it (every program runs, as
    # without it); a GPU launch refuses it clearly, on every call (the C++ fast path included).
    kernel = make_scale()
    rng = np.random.default_rng()
    n = int(rng.integers(1, 64))
    x = torch.from_numpy(rng.standard_normal(64).astype(np.float32))
    for _ in range(3):
        kernel[(1,)](x, x, n, 2.0, BLOCK=64)   # registers the specialization in C++
        with pytest.raises(ValueError, match=r"scale: launch option "
                           r"launch_cooperative_grid=True: a cooperative grid launch"):
            kernel[(1,)](x, x, n, 2.0, BLOCK=64, launch_cooperative_grid=True)
    knobs.interpret = True
    y = torch.zeros(64)
    for cooperative in (True, False, True):
        y.zero_()
        kernel[(1,)](x, y, n, 3.0, BLOCK=64, launch_cooperative_grid=cooperative)
        np.testing.assert_allclose(y.numpy()[:n], 3.0 * x.numpy()[:n], rtol=1e-6)
        assert not y.numpy()[n:].any()
