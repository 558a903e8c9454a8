"""``triton.testing``'s checking and CUDA-graph timing helpers, with Triton's semantics.

    assert_close(out, ref, atol=1e-2)             # numbers, lists, NumPy arrays or tensors
    ms = do_bench_cudagraph(lambda: kernel[grid](x, y), rep=20)
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Union

import numpy as np

from .bench import RETURN_MODES, summarize


def _to_numpy(value: Any) -> np.ndarray:
    """Any input as a NumPy array on the host; 16-bit floats NumPy lacks become float32."""
    if type(value).__module__.split(".", 1)[0] == "torch":
        import torch
        if value.dtype == torch.bfloat16:
            value = value.float()
        return value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype.kind == "V" or array.dtype.name in ("bfloat16",) or \
            array.dtype.name.startswith("float8"):
        array = array.astype(np.float32)   # ml_dtypes' bfloat16 / fp8
    return array


def _dtype_of(value: Any) -> Any:
    return getattr(value, "dtype", np.asarray(value).dtype)


def assert_close(x: Any, y: Any, atol: Union[float, Callable, None] = None,
                 rtol: Union[float, Callable, None] = None, err_msg: str = "") -> None:
    """Asserts ``|x - y| <= atol + rtol * |y|`` elementwise, NaNs equal (as
    ``triton.testing.assert_close``): ``atol`` defaults to 1e-2, ``rtol`` to 0, and either may
    be a function of ``x``'s dtype. Example: ``assert_close(out, ref, atol=1e-3, rtol=0)``."""
    atol = 1e-2 if atol is None else atol
    rtol = 0.0 if rtol is None else rtol
    atol = atol(_dtype_of(x)) if callable(atol) else atol
    rtol = rtol(_dtype_of(x)) if callable(rtol) else rtol
    x, y = _to_numpy(x), _to_numpy(y)
    if x.size > 1 or y.size > 1:
        np.testing.assert_allclose(x, y, atol=atol, rtol=rtol, equal_nan=True, err_msg=err_msg)
        return
    if not np.allclose(x, y, atol=atol, rtol=rtol):
        raise AssertionError(f"{err_msg} {x} is not close to {y} (atol={atol}, rtol={rtol})")


def do_bench_cudagraph(fn: Callable[[], object], rep: float = 20,
                       grad_to_none: Optional[Sequence] = None,
                       quantiles: Optional[Sequence[float]] = None,
                       return_mode: str = "mean") -> Union[float, List[float]]:
    """Milliseconds per call of ``fn``, measured by replaying a CUDA graph of enough calls to
    fill ``rep`` ms (as ``triton.testing.do_bench_cudagraph``; no launch overhead, no L2 flush).
    Runs on a side stream, which the graph capture needs; kernels launch on PyTorch's current
    stream, so they are captured."""
    if return_mode not in RETURN_MODES:
        raise ValueError(f"return_mode must be one of {RETURN_MODES}, got {return_mode!r}")
    import torch

    with torch.cuda.stream(torch.cuda.Stream()):
        fn()
        for tensor in grad_to_none or ():
            tensor.detach_()
            tensor.requires_grad_(True)
            tensor.grad = None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            fn()
        end.record()
        torch.cuda.synchronize()
        estimate = start.elapsed_time(end) / 5
        n_repeat = 1000 if estimate == 0 else max(1, int(rep / estimate))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n_repeat):
                for tensor in grad_to_none or ():
                    tensor.grad = None
                fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / n_repeat)
    return summarize(times, quantiles, return_mode)
