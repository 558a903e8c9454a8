"""Launches that used to fail with a vague message: a kernel parameter named ``grid`` (or
``warmup``) given by keyword, a grid callable reading a key the launch does not have, PTX that
ptxas rejects. Results against NumPy in the interpreter; the GPU launch paths with recording
launchers (tests/python/jit); ptxas runs on the CPU."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "jit"))
from launch_fakes import FakeGpu, fast_launch_count  # noqa: E402

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.compiler import ptxas  # noqa: E402
from tessera.config import knobs  # noqa: E402
from tessera.launch_grid import GridKeyError  # noqa: E402


@tessera.jit
def add_grid(x_ptr, grid, n, BLOCK: tl.constexpr):
    """A kernel whose own parameter is named grid (a value added to every element)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + grid, mask=mask)


@tessera.jit
def add_warmup(x_ptr, n, warmup, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + warmup, mask=mask)


@pytest.fixture
def interpret():
    knobs.interpret = True
    yield
    knobs.reset("interpret")


@pytest.fixture
def gpu(monkeypatch):
    knobs.interpret = False
    yield FakeGpu(monkeypatch)
    knobs.reset("interpret")


def data(n=100):
    return np.random.default_rng().standard_normal(n).astype(np.float32)


@pytest.mark.parametrize("call", ["keyword", "all keywords", "positional"])
def test_a_parameter_named_grid(interpret, call):
    x = data()
    expected = x.astype(np.float64) + 3.0
    launch = add_grid[lambda meta: (tessera.cdiv(meta["n"], meta["BLOCK"]),)]
    if call == "keyword":
        launch(x, grid=3.0, n=100, BLOCK=32)
    elif call == "all keywords":
        launch(BLOCK=32, n=100, grid=3.0, x_ptr=x)
    else:
        launch(x, 3.0, 100, BLOCK=32)
    np.testing.assert_allclose(x, expected, rtol=1e-6)


def test_a_parameter_named_warmup_is_not_a_warmup(interpret):
    x = data()
    expected = x.astype(np.float64) + 2.0
    add_warmup[(4,)](x, 100, warmup=2.0, BLOCK=32)  # launched, not only compiled
    np.testing.assert_allclose(x, expected, rtol=1e-6)


def test_a_parameter_named_grid_on_the_fast_path(gpu):
    torch = pytest.importorskip("torch")
    x = torch.zeros(64)
    for _ in range(3):
        add_grid[(2,)](x, grid=1.5, n=50, BLOCK=32)
    assert len(gpu.prepared) == 1 and fast_launch_count(add_grid) >= 2
    add_grid[(2,)](x, grid=2, n=50, BLOCK=32)  # an int: a new specialization, Python path
    assert len(gpu.prepared) == 2
    assert gpu.prepared[-1].python_launches[-1][0] == (2,)  # the grid of the brackets


def test_a_parameter_named_grid_under_autotune_and_heuristics(interpret):
    kernel = tessera.autotune(configs=[tessera.Config({"BLOCK": 32})], key=["n"])(
        tessera.heuristics({"EVEN": lambda args: args["n"] % 2 == 0})(
            tessera.jit(_autotuned_body)))
    x = data()
    expected = x.astype(np.float64) + 0.5
    kernel[lambda meta: (tessera.cdiv(meta["n"], meta["BLOCK"]),)](x, grid=0.5, n=100)
    np.testing.assert_allclose(x, expected, rtol=1e-6)


def _autotuned_body(x_ptr, grid, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + grid, mask=mask)


def test_run_with_the_grid_parameter_by_keyword_says_why(interpret):
    # run()'s grid= is the launch grid (as Triton's); the message says how to pass the kernel's.
    x = data()
    with pytest.raises(TypeError, match=r"add_grid: .*missing 1 required positional argument: "
                                        r"'grid'.*keywords grid= and warmup= are the launch's "
                                        r"own .*pass the kernel's 'grid' by position"):
        add_grid.run(x, n=100, BLOCK=32, grid=(4,))
    with pytest.raises(TypeError, match="add_grid: got multiple values for argument 'grid'"):
        add_grid[(4,)](x, 1.0, 100, BLOCK=32, grid=2.0)


@pytest.mark.parametrize("path", ["interpret", "gpu-path"])
def test_a_grid_reading_a_missing_key_names_the_kernel_the_key_and_the_keys(monkeypatch, path):
    if path == "gpu-path":
        FakeGpu(monkeypatch)
    knobs.interpret = path == "interpret"
    try:
        x = data()
        with pytest.raises(KeyError) as raised:
            add_grid[lambda meta: (tessera.cdiv(meta["N"], meta["BLOCK"]),)](x, 1.0, 100,
                                                                            BLOCK=32)
    finally:
        knobs.reset("interpret")
    assert isinstance(raised.value, GridKeyError) and raised.value.key == "N"
    assert str(raised.value) == (
        "add_grid: the grid callable reads META['N'], which is not a parameter of the kernel; "
        "META holds the kernel's parameters by name (an autotuner config's values among "
        "them): x_ptr, grid, n, BLOCK")


def test_a_grid_reading_a_missing_key_after_the_fast_path_took_over(gpu):
    torch = pytest.importorskip("torch")
    x = torch.zeros(64)
    for _ in range(3):
        add_grid[lambda meta: (2,)](x, 1.0, 50, BLOCK=32)
    assert fast_launch_count(add_grid) >= 2
    with pytest.raises(GridKeyError, match=r"add_grid: the grid callable reads META\['BLOCK_N'\]"
                                           r".*: x_ptr, grid, n, BLOCK$"):
        add_grid[lambda meta: (meta["BLOCK_N"],)](x, 1.0, 50, BLOCK=32)


def test_a_key_error_of_the_grid_s_own_is_left_alone(interpret):
    table = {}
    with pytest.raises(KeyError) as raised:
        add_grid[lambda meta: table[meta["n"]]](data(), 1.0, 100, BLOCK=32)
    assert not isinstance(raised.value, GridKeyError) and raised.value.args == (100,)


@tessera.jit
def bad_asm(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.inline_asm_elementwise("frobnicate.f32 $0, $1;", "=r,r", [tl.load(x_ptr + offs)],
                                  dtype=tl.float32, is_pure=True, pack=1)
    tl.store(y_ptr + offs, y)


@pytest.mark.skipif(ptxas.find_ptxas() is None, reason="ptxas not installed")
def test_a_ptxas_failure_shows_ptxas_s_message_the_kernel_and_the_ptx_line(tmp_path):
    knobs.cache_dir = str(tmp_path)
    try:
        with pytest.raises(ptxas.PtxasError) as raised:
            bad_asm.warmup("*fp32", "*fp32", BLOCK=64, grid=(1,))
    finally:
        knobs.reset("cache_dir")
    text = str(raised.value)
    assert text.startswith("bad_asm: ptxas failed for sm_")
    # ptxas's own words, citing the file by the kernel's name (not a deleted temporary path)
    assert "bad_asm.ptx, line " in text and "tessera-ptxas-" not in text
    assert "Not a name of any known instruction: 'frobnicate'" in text
    assert text.splitlines()[-1].startswith("PTX line ")
    assert "frobnicate.f32" in text.splitlines()[-1]
    assert raised.value.log and "frobnicate" in raised.value.log
