"""triton.testing's device helpers: peak DRAM bandwidth and peak FLOP rates from the device's
properties, nvidia-smi queries, clock locking, and running a test under NVIDIA's memory
checker. Same signatures and formulas as Triton 3.6.

Properties come from ``driver.active.utils.get_device_properties`` (with
``TESSERA_INTERPRET=1`` and no GPU, the interpreter's modeled H100). ``nvsmi`` and
``set_gpu_clock`` need ``nvidia-smi``; ``cuda_memcheck`` needs ``compute-sanitizer`` (or the
older ``cuda-memcheck``): without them they raise a RuntimeError that says so.

Example::

    gbps = tessera.testing.get_dram_gbps()           # 3352.32 on an H100 SXM5
    tflops = tessera.testing.get_max_tensorcore_tflops(torch.float16, clock_rate=1.98e6)
"""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

__all__ = ["nvsmi", "get_dram_gbps", "get_max_tensorcore_tflops", "get_max_simd_tflops",
           "set_gpu_clock", "cuda_memcheck"]


def _tool(name: str, why: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{why} needs {name}, which is not on PATH (it comes with the NVIDIA "
                           "driver / CUDA toolkit of a GPU machine)")
    return path


def nvsmi(attrs: Sequence[str]) -> List[int]:
    """Integer values of nvidia-smi ``--query-gpu`` fields for GPU 0, e.g.
    ``nvsmi(["clocks.max.sm", "clocks.max.mem"])``."""
    command = [_tool("nvidia-smi", "nvsmi()"), "-i", "0", "--query-gpu=" + ",".join(attrs),
               "--format=csv,noheader,nounits"]
    out = subprocess.check_output(command).decode(sys.stdout.encoding or "utf-8")
    return [int(value) for value in out.split(",")]


def _properties(device: Optional[int]) -> Tuple[dict, int]:
    """(device properties, compute capability as major*10+minor) of ``device`` (None: the
    current one)."""
    from ..device.driver import active
    if device is None:
        device = active.get_current_device()
    arch = active.get_current_target().arch
    return active.utils.get_device_properties(device), int(arch)


def get_dram_gbps(device: Optional[int] = None) -> float:
    """Peak DRAM bandwidth in GB/s: memory clock (kHz) x bus width (bits) x 2 (double data
    rate) / 8 bits per byte."""
    props, _ = _properties(device)
    return props["mem_clock_rate"] * props["mem_bus_width"] * 2 / 1e6 / 8


def _dtype_name(dtype: Any) -> str:
    """"fp16", "i8", "fp8e4nv", ... of a torch / NumPy / tl dtype."""
    from ..type_codes import dtype_code
    if isinstance(dtype, type):  # np.float32, a scalar type
        import numpy as np
        dtype = np.dtype(dtype)
    name = getattr(dtype, "name", None)
    if isinstance(name, str) and name.startswith("fp8"):  # tl.float8e4nv, ...
        return name
    try:
        return dtype_code(dtype)
    except TypeError:
        raise RuntimeError(f"dtype not supported: {dtype}") from None


_TENSORCORE_OPS = {"fp32": 256, "i32": 256, "fp16": 512, "bf16": 512, "i16": 512,
                   "i8": 1024, "fp8e4nv": 1024, "fp8e4b15": 1024, "fp8e5": 1024}
_SIMD_OPS = {"fp32": 32, "fp16": 64, "bf16": 64}


def get_max_tensorcore_tflops(dtype: Any, clock_rate: float, device: Optional[int] = None
                              ) -> float:
    """Peak tensor-core TFLOPS for operands of ``dtype`` at ``clock_rate`` (kHz): 4
    sub-cores per multiprocessor, each doing 256 (fp32/tf32, int32), 512 (fp16, bf16) or
    1024 (int8, fp8) ops per clock on sm_80+ (256 fp16 ops before)."""
    props, capability = _properties(device)
    name = _dtype_name(dtype)
    if capability < 80:
        if name != "fp16":
            raise RuntimeError("dtype not supported: before sm_80 only fp16 tensor cores")
        ops = 256
    elif name in _TENSORCORE_OPS:
        ops = _TENSORCORE_OPS[name]
    else:
        raise RuntimeError(f"dtype not supported: {dtype}")
    return props["multiprocessor_count"] * 4 * clock_rate * ops * 1e-9


def get_max_simd_tflops(dtype: Any, clock_rate: float, device: Optional[int] = None) -> float:
    """Peak CUDA-core (SIMD) TFLOPS for ``dtype`` at ``clock_rate`` (kHz): 4 sub-cores per
    multiprocessor, 32 fp32 or 64 fp16/bf16 ops per clock (bf16 from sm_80)."""
    props, capability = _properties(device)
    name = _dtype_name(dtype)
    if name not in _SIMD_OPS or (capability < 80 and name == "bf16"):
        raise RuntimeError(f"dtype not supported: {dtype}")
    return props["multiprocessor_count"] * 4 * clock_rate * _SIMD_OPS[name] * 1e-9


@contextlib.contextmanager
def set_gpu_clock(ref_sm_clock: int = 1350, ref_mem_clock: int = 1215
                  ) -> Iterator[Tuple[float, float]]:
    """Locks GPU 0's SM and memory clocks (MHz) for stable timings (needs the rights to
    change them); yields (TFLOPS, GB/s) at those clocks with Triton's A100 formulas; resets
    the clocks on exit."""
    smi = _tool("nvidia-smi", "set_gpu_clock()")
    try:
        subprocess.check_output([smi, "-i", "0", "-pm", "1"])
        subprocess.check_output([smi, "-i", "0",
                                 f"--lock-gpu-clocks={ref_sm_clock},{ref_sm_clock}"])
        subprocess.check_output([smi, "-i", "0",
                                 f"--lock-memory-clocks={ref_mem_clock},{ref_mem_clock}"])
        sm_clock = nvsmi(["clocks.current.sm"])[0]
        mem_clock = nvsmi(["clocks.current.memory"])[0]
        if abs(sm_clock - ref_sm_clock) >= 10 or abs(mem_clock - ref_mem_clock) >= 10:
            raise RuntimeError(f"set_gpu_clock: the GPU runs at {sm_clock} / {mem_clock} MHz, "
                               f"not the {ref_sm_clock} / {ref_mem_clock} MHz asked for")
        yield 1e-6 * 2 * 108 * 4 * 256 * ref_sm_clock, 640 * 2 * ref_mem_clock * 1e-3
    finally:
        subprocess.check_output([smi, "-i", "0", "-pm", "0"])
        subprocess.check_output([smi, "-i", "0", "-rgc"])
        subprocess.check_output([smi, "-i", "0", "-rmc"])


def _parent_name() -> str:
    try:
        with open(f"/proc/{os.getppid()}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return ""


_CHECKERS = ("compute-sanitizer", "cuda-memcheck")


def cuda_memcheck(**target_kwargs: Any) -> Callable[[Callable], Callable]:
    """Decorates a pytest test: when its parameters include ``target_kwargs``, it runs again
    in a child ``pytest`` under compute-sanitizer (cuda-memcheck on old toolkits), which must
    report 0 errors. The test needs a ``request`` fixture argument (as Triton's)."""
    def decorator(test_fn: Callable) -> Callable:
        @functools.wraps(test_fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            selected = target_kwargs.items() <= kwargs.items()
            if not selected or _parent_name() in _CHECKERS:
                return test_fn(*args, **kwargs)
            checker = next((shutil.which(c) for c in _CHECKERS if shutil.which(c)), None)
            if checker is None:
                raise RuntimeError("cuda_memcheck needs compute-sanitizer (or cuda-memcheck), "
                                   "which is not on PATH (it comes with the CUDA toolkit)")
            if "request" not in kwargs:
                raise TypeError(f"{test_fn.__name__}: a cuda_memcheck test needs a (possibly "
                                "unused) `request` fixture argument")
            path = os.path.realpath(test_fn.__globals__["__file__"])
            test_id = kwargs["request"].node.callspec.id
            env = {"PATH": os.environ["PATH"], "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
            out = subprocess.run([checker, sys.executable, "-m", "pytest", "-vs",
                                  f"{path}::{test_fn.__name__}[{test_id}]"],
                                 capture_output=True, env=env)
            if out.returncode != 0 or "ERROR SUMMARY: 0 errors" not in out.stdout.decode():
                raise AssertionError(f"{os.path.basename(checker)} found memory errors in "
                                     f"{test_fn.__name__}[{test_id}]:\n"
                                     f"{out.stdout.decode()[-4000:]}")
            return None
        return wrapper
    return decorator
