"""The C++ fast launch path (cpp/bindings/launch.cpp) against the Python path (jit.py), without
a GPU: kernels are prepared into launchers without a kernel (launch_fakes.py), whose launches the
fast path records. Each call's kernel and parameter bytes are checked against what the Python
path's own specialization key and an independent packer (expected_parameters) say."""
import os
import random
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from launch_fakes import STREAM, FakeGpu, expected_parameters, fast_launch_count  # noqa: E402

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.config import knobs  # noqa: E402

torch = pytest.importorskip("torch")
if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
    pytest.skip("this torch has no DLPack exchange table (the fast path needs it for CPU "
                "tensors in recording mode)", allow_module_level=True)


@pytest.fixture
def gpu(monkeypatch):
    knobs.interpret = False       # whatever the environment says
    yield FakeGpu(monkeypatch)
    knobs.reset("interpret")


@pytest.fixture
def rng():
    seed = random.randrange(2**32)
    print(f"seed: {seed}")
    return random.Random(seed)


def make_mixed():
    """A fresh kernel per test (its launch table starts empty). It is never compiled here."""
    @tessera.jit
    def mixed(x_ptr, y_ptr, n, scale, flag, BLOCK: tl.constexpr, MODE: tl.constexpr = "add"):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) * scale, mask=offs < n)
    return mixed


def frozen(prepared_for):
    """A hashable form of (specialization, constexprs, num_warps, num_stages)."""
    (signature, div16, eq1, large), constexprs, num_warps, num_stages = prepared_for
    return (tuple(sorted(signature.items())), tuple(sorted(div16)), tuple(sorted(eq1)),
            tuple(sorted(large)), tuple(sorted(constexprs.items())), num_warps, num_stages)


def python_key(kernel, args, kwargs):
    """What the Python path specializes on (type strings, div16, eq1, constexprs, options),
    and the bound runtime values."""
    kwargs = dict(kwargs)
    num_warps, num_stages = kwargs.pop("num_warps", 4), kwargs.pop("num_stages", 1)
    values, constexprs, keys = kernel._arguments(args, kwargs)
    return frozen((kernel._specialization(keys), kernel._constexpr_dict(constexprs), num_warps,
                   num_stages)), values


def launch_and_see(gpu, kernel, grid, args, kwargs):
    """Launches; returns (the RecordingLaunchable used, its parameter bytes, fast?)."""
    python_before = [len(k.python_launches) for k in gpu.prepared]
    fast_before = fast_launch_count(kernel)
    kernel[grid](*args, **kwargs)
    if fast_launch_count(kernel) == fast_before + 1:
        _, stream, parameters, launched, _ = kernel._dispatch_recorded()
        assert stream == STREAM
        return launched, parameters, True
    grown = [k for i, k in enumerate(gpu.prepared)
             if len(k.python_launches) > (python_before[i] if i < len(python_before) else 0)]
    assert len(grown) == 1, "exactly one launch per call"
    return grown[0], grown[0].python_launches[-1][2], False


def random_call(rng, tensors):
    args = [rng.choice(tensors), rng.choice(tensors),
            rng.choice([1, 16, 17, 4096, rng.randrange(-2**31, 2**31),
                        2**40 + rng.randrange(16), 2**63 + 16 * rng.randrange(2**20)]),
            rng.choice([0.5, rng.uniform(-4, 4)]), rng.random() < 0.5]
    kwargs = {"BLOCK": rng.choice([128, 256])}
    if rng.random() < 0.3:
        kwargs["MODE"] = rng.choice(["add", "mul"])
    if rng.random() < 0.3:
        kwargs["num_warps"] = rng.choice([4, 8])
    if rng.random() < 0.5:        # some arguments by keyword, in any order
        kwargs.update(flag=args.pop(), scale=args.pop())
    return args, kwargs


def test_every_call_gets_the_kernel_of_its_specialization(gpu, rng):
    mixed = make_mixed()
    base = torch.randn(300)
    # 8 GiB never written (no pages touched): a tensor of 2**31 elements and one just short.
    huge = torch.empty(2 ** 31, dtype=torch.float32)
    tensors = [base[:256], base[1:257], base[4:], torch.randn(64).half(),
               torch.randint(0, 9, (40,), dtype=torch.int32), huge, huge[4:]]
    keys = set()
    fast_calls = 0
    for _ in range(400):
        args, kwargs = random_call(rng, tensors)
        key, values = python_key(mixed, args, kwargs)
        launched, parameters, fast = launch_and_see(gpu, mixed, (3, 2), args, kwargs)
        assert frozen(launched.prepared_for) == key
        assert parameters == expected_parameters(list(values))
        if fast:
            assert mixed._dispatch_recorded()[0] == (3, 2, 1)
            assert key in keys, "a specialization launched from C++ before Python prepared it"
        fast_calls += fast
        keys.add(key)
    # One kernel per specialization; every call after the first of its kind was fast.
    assert len(gpu.prepared) == len(keys)
    assert any(key[3] for key in keys), "no call had a tensor of 2**31 elements"
    assert fast_calls == 400 - len(keys)


def test_keywords_defaults_and_options(gpu):
    mixed = make_mixed()
    x, y = torch.randn(256), torch.randn(256)
    forms = [((x, y, 100, 2.0, True), {"BLOCK": 128}),
             ((x, y), {"BLOCK": 128, "flag": True, "n": 100, "scale": 2.0}),
             ((), {"MODE": "add", "flag": True, "BLOCK": 128, "y_ptr": y, "scale": 2.0,
                   "n": 100, "x_ptr": x}),
             ((x, y, 100, 2.0, True, 128, "add"), {})]
    for args, kwargs in forms * 3:
        launched, parameters, fast = launch_and_see(gpu, mixed, 5, args, kwargs)
        assert launched is gpu.prepared[0]
    assert len(gpu.prepared) == 1 and fast
    assert parameters == expected_parameters([x, y, 100, 2.0, True])
    # num_warps / num_stages are options, not kernel arguments: new specializations.
    for options in ({"num_warps": 8}, {"num_stages": 3}, {"num_warps": 8, "num_stages": 3}):
        for _ in range(2):
            launched, _, fast = launch_and_see(gpu, mixed, 5, (x, y, 100, 2.0, True),
                                               {"BLOCK": 128, **options})
        assert fast and launched.prepared_for[2:] == (options.get("num_warps", 4),
                                                      options.get("num_stages", 1))
    assert len(gpu.prepared) == 4


def test_grids(gpu):
    mixed = make_mixed()
    x = torch.randn(256)
    args = (x, x, 256, 1.0, False)
    for grid, expected in [(7, (7, 1, 1)), ((7,), (7, 1, 1)), ([2, 3], (2, 3, 1)),
                           ((2, 3, 4), (2, 3, 4)), ((2**32 - 1, 1, 1), (2**32 - 1, 1, 1))]:
        mixed[grid](*args, BLOCK=128)
        mixed[grid](*args, BLOCK=128)
        assert mixed._dispatch_recorded()[0] == expected
    count = fast_launch_count(mixed)
    mixed[(0, 4)](*args, BLOCK=128)               # an empty grid launches nothing
    assert fast_launch_count(mixed) == count and gpu.python_launch_count() == 1
    for bad in [(-1,), (1, 2, 3, 4), (), (1, 2.5), "abc", 2**32]:
        with pytest.raises((TypeError, ValueError), match="grid"):
            mixed[bad](*args, BLOCK=128)


def test_a_callable_grid_is_called_once_with_every_argument(gpu):
    mixed = make_mixed()
    x, y = torch.randn(256), torch.randn(256)
    calls = []

    def grid(meta):
        calls.append(dict(meta))
        return (tessera.cdiv(meta["n"], meta["BLOCK"]),)

    for n in (1000, 1000, 1000, 17):           # one specialization (i32, not 1, not 16k)
        mixed[grid](x, y, n, 0.25, True, BLOCK=128)
        assert calls[-1] == {"x_ptr": x, "y_ptr": y, "n": n, "scale": 0.25, "flag": True,
                             "BLOCK": 128, "MODE": "add"}
        assert list(calls[-1]) == ["x_ptr", "y_ptr", "n", "scale", "flag", "BLOCK", "MODE"]
    assert len(calls) == 4 and fast_launch_count(mixed) == 3
    assert mixed._dispatch_recorded()[0] == (1, 1, 1)
    # A grid that fails, or returns no grid, is called once too, and its error propagates.
    with pytest.raises(ZeroDivisionError):
        mixed[lambda meta: calls.append(0) or 1 // 0](x, y, 1000, 0.25, True, BLOCK=128)
    with pytest.raises(ValueError, match="grid"):
        mixed[lambda meta: calls.append(0) or (-1,)](x, y, 1000, 0.25, True, BLOCK=128)
    assert len(calls) == 6


def test_errors_name_the_kernel_and_the_argument(gpu):
    mixed = make_mixed()
    x = torch.randn(256)
    for _ in range(2):                            # the second round with a hot fast path
        mixed[1](x, x, 10, 1.0, True, BLOCK=128)
        with pytest.raises(TypeError, match=r"mixed: .*missing .*'flag'"):
            mixed[1](x, x, 10, 1.0, BLOCK=128)
        with pytest.raises(TypeError, match=r"mixed: .*BLOCK"):
            mixed[1](x, x, 10, 1.0, True)
        with pytest.raises(TypeError, match=r"mixed: .*positional"):
            mixed[1](x, x, 10, 1.0, True, 128, "add", 5)
        with pytest.raises(TypeError, match=r"mixed: .*unexpected keyword .*'bogus'"):
            mixed[1](x, x, 10, 1.0, True, BLOCK=128, bogus=1)
        with pytest.raises(TypeError, match=r"mixed: argument 'y_ptr': unsupported .*str"):
            mixed[1](x, "y", 10, 1.0, True, BLOCK=128)
        with pytest.raises(OverflowError):
            mixed[1](x, x, 2**64, 1.0, True, BLOCK=128)
        with pytest.raises(TypeError, match="mixed: constexpr parameter 'MODE' .* not hashable"):
            mixed[1](x, x, 10, 1.0, True, BLOCK=128, MODE=["unhashable"])
    assert len(gpu.prepared) == 1


def test_constexpr_values_of_any_hashable_type(gpu):
    mixed = make_mixed()
    x = torch.randn(256)
    modes = ["".join(["a", "dd"]), "add", tl.float16, tl.float32, 2.5, (1, 2), None, 2**70]
    for mode in modes * 2:
        launched, _, _ = launch_and_see(gpu, mixed, 1, (x, x, 10, 1.0, True),
                                        {"BLOCK": 128, "MODE": mode})
        assert launched.prepared_for[1]["MODE"] == mode
    # Equal values share a kernel (the two "add" strings), the others each have one.
    assert len(gpu.prepared) == len(modes) - 1
    # 1 and True are equal constexprs to the Python path, and so one kernel (C++ keys differ).
    for block in (1, True, 1, True):
        launch_and_see(gpu, mixed, 1, (x, x, 10, 1.0, True), {"BLOCK": block})
    assert len(gpu.prepared) == len(modes)


def test_interpret_mode_is_never_launched_from_cpp(gpu, monkeypatch):
    mixed = make_mixed()
    interpreted = []
    monkeypatch.setattr(type(mixed), "_run_interpreted",
                        lambda self, *a: interpreted.append(self.__name__))
    x = torch.randn(256)
    mixed[1](x, x, 10, 1.0, True, BLOCK=128)
    mixed[1](x, x, 10, 1.0, True, BLOCK=128)
    assert fast_launch_count(mixed) == 1
    knobs.interpret = True
    mixed[1](x, x, 10, 1.0, True, BLOCK=128)
    knobs.reset("interpret")
    monkeypatch.setenv("TESSERA_INTERPRET", " On ")
    mixed[1](x, x, 10, 1.0, True, BLOCK=128)
    monkeypatch.setenv("TESSERA_INTERPRET", "0")
    knobs.interpret = False
    mixed[1](x, x, 10, 1.0, True, BLOCK=128)      # the override wins over the environment
    mixed.interpret = True
    mixed[1](x, x, 10, 1.0, True, BLOCK=128)
    assert interpreted == ["mixed"] * 3
    assert fast_launch_count(mixed) == 2 and gpu.python_launch_count() == 1


def test_keywords_spelled_at_run_time_bind_as_written_ones(gpu):
    """Keyword names built at run time are not interned: the fast path compares them by value,
    parameters and launch options alike."""
    mixed = make_mixed()
    x = torch.randn(256)
    block, warps = "".join(["BLO", "CK"]), "".join(["num_", "warps"])
    assert block is not sys.intern("BLOCK") and warps is not sys.intern("num_warps")
    for expected_fast in (False, True, True):
        kernel, parameters, fast = launch_and_see(gpu, mixed, 1, (x, x, 10, 1.0, True),
                                                  {block: 128, warps: 8})
        assert fast == expected_fast and kernel.prepared_for[2] == 8
        assert parameters == expected_parameters([x, x, 10, 1.0, True])
    assert len(gpu.prepared) == 1


def test_a_new_jit_function_sends_the_next_launch_through_python(gpu, monkeypatch):
    mixed = make_mixed()
    checks = []
    original = type(mixed)._check_redefinitions
    monkeypatch.setattr(type(mixed), "_check_redefinitions",
                        lambda self: checks.append(self.__name__) or original(self))
    x = torch.randn(256)
    for _ in range(3):
        mixed[1](x, x, 10, 1.0, True, BLOCK=128)
    assert fast_launch_count(mixed) == 2 and checks == []
    make_mixed()                                   # e.g. a notebook cell run again
    for _ in range(3):
        mixed[1](x, x, 10, 1.0, True, BLOCK=128)
    assert checks == ["mixed"] and fast_launch_count(mixed) == 4
    assert gpu.python_launch_count() == 2 and len(gpu.prepared) == 1
    mixed._dispatch_clear()                        # what a changed helper's source does
    mixed[1](x, x, 10, 1.0, True, BLOCK=128)
    assert fast_launch_count(mixed) == 4 and gpu.python_launch_count() == 3


def test_arguments_the_fast_path_leaves_to_python(gpu):
    mixed = make_mixed()
    host = np.zeros(256, np.float32)
    for n in (10, np.int64(10)):                   # NumPy arrays and scalars
        for _ in range(3):
            mixed[1](host, host, n, 1.0, True, BLOCK=128)
    assert fast_launch_count(mixed) == 0 and gpu.python_launch_count() == 6
    assert mixed._dispatch_entries() == 0
    assert not mixed._dispatch_register((host, host, 10, 1.0, True), (128, "add"), 4, 1,
                                        gpu.prepared[0])


def test_kernels_wider_than_the_fast_path_still_launch(gpu):
    names = [f"a{i}" for i in range(70)]
    namespace = {"tl": tl}
    exec(f"def wide({', '.join(names)}, BLOCK: tl.constexpr):\n    pass\n", namespace)
    wide = tessera.jit(namespace["wide"])
    values = [torch.randn(4) for _ in names]
    for _ in range(3):
        wide[1](*values, BLOCK=16)
    assert gpu.python_launch_count() == 3 and fast_launch_count(wide) == 0


@pytest.mark.parametrize("knob, variable", [("tma", "TESSERA_TMA"), ("wgmma", "TESSERA_WGMMA"),
                                            ("debug", "TESSERA_DEBUG")])
def test_a_knob_that_changes_the_code_is_never_launched_stale(gpu, monkeypatch, knob, variable):
    """Knobs read at each launch (TESSERA_TMA, ...) are part of the kernel's key: the fast path
    must not launch the kernel compiled under the other value, whether the knob was set in
    Python, through the environment, or set back."""
    monkeypatch.delenv(variable, raising=False)
    mixed = make_mixed()
    x = torch.randn(256)

    def launched():
        kernel, _, fast = launch_and_see(gpu, mixed, 1, (x, x, 10, 1.0, True), {"BLOCK": 128})
        return kernel, fast, getattr(kernel.options, knob)

    off, _, off_value = launched()
    assert launched() == (off, True, off_value)
    with knobs.scope(**{knob: not off_value}):
        on, fast, value = launched()
        assert on is not off and not fast and value == (not off_value)
        assert launched() == (on, True, not off_value)
    assert launched() == (off, False, off_value)          # set back: the first kernel again
    assert launched() == (off, True, off_value)
    monkeypatch.setenv(variable, "0" if not off_value else "1")
    assert launched()[0] is off and launched()[1]         # the same value: still fast
    monkeypatch.setenv(variable, "1" if not off_value else "0")
    assert launched() == (on, False, not off_value)
    assert launched() == (on, True, not off_value)
    assert len(gpu.prepared) == 2
