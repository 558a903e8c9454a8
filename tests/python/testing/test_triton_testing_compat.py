"""tessera.testing as triton.testing: assert_close with Triton's defaults (atol 1e-2, rtol 0,
callable tolerances, NaNs equal, bf16 tensors), and do_bench / do_bench_cudagraph taking
Triton's keywords."""
import inspect

import ml_dtypes
import numpy as np
import pytest

import tessera as triton


def test_assert_close_uses_tritons_default_tolerances():
    rng = np.random.default_rng()
    x = rng.standard_normal(100)
    triton.testing.assert_close(x, x + 0.009)               # atol 1e-2 by default
    with pytest.raises(AssertionError):
        triton.testing.assert_close(x, x + 0.011)
    big = x * 1e6
    with pytest.raises(AssertionError):                      # rtol 0 by default
        triton.testing.assert_close(big, big * (1 + 1e-6))
    triton.testing.assert_close(big, big * (1 + 1e-6), rtol=1e-5)
    nan = np.array([1.0, np.nan])
    triton.testing.assert_close(nan, nan.copy())


def test_assert_close_callable_tolerances_see_the_dtype():
    seen = []

    def atol(dtype):
        seen.append(dtype)
        return 0.5

    triton.testing.assert_close(np.float32([1.0, 2.0]), [1.4, 2.4], atol=atol)
    assert seen == [np.dtype(np.float32)]


def test_assert_close_scalars_and_lists_and_message():
    triton.testing.assert_close(1.0, 1.005)
    with pytest.raises(AssertionError, match=r"^my message 1\.0 is not close to 2\.0"):
        triton.testing.assert_close(1.0, 2.0, err_msg="my message")
    triton.testing.assert_close([1, 2, 3], (1, 2, 3))


def test_assert_close_on_bfloat16():
    x = np.array([1.0, 2.5, -3.0], dtype=ml_dtypes.bfloat16)
    triton.testing.assert_close(x, [1.0, 2.5, -3.0], atol=0)
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.0, 2.5, -3.0], dtype=torch.bfloat16)
    triton.testing.assert_close(t, torch.tensor([1.0, 2.5, -3.0]), atol=0)
    with pytest.raises(AssertionError):
        triton.testing.assert_close(t, torch.tensor([1.0, 2.5, -3.1]), atol=0.05)


def test_benchmark_functions_take_tritons_keywords():
    triton_do_bench = ["fn", "warmup", "rep", "grad_to_none", "quantiles", "return_mode"]
    params = list(inspect.signature(triton.testing.do_bench).parameters)
    assert params[:len(triton_do_bench)] == triton_do_bench
    defaults = inspect.signature(triton.testing.do_bench).parameters
    assert (defaults["warmup"].default, defaults["rep"].default) == (25, 100)
    graph = inspect.signature(triton.testing.do_bench_cudagraph).parameters
    assert list(graph) == ["fn", "rep", "grad_to_none", "quantiles", "return_mode"]
    assert graph["rep"].default == 20
    with pytest.raises(ValueError, match="return_mode"):
        triton.testing.do_bench_cudagraph(lambda: None, return_mode="p99")
