"""The CUDA driver as Tessera's launcher sees it: devices, modules, streams, launches.

A thin layer over the C++ binding ``tessera._tessera.runtime`` (cpp/bindings/runtime.cpp), which
loads ``libcuda.so.1`` at run time: importing this module never needs a GPU, and every call that
needs one raises :class:`CudaError` with the reason when there is none. What lives here is what
is simpler in Python: which stream and device a launch uses, found from the framework of the
kernel's arguments, and device properties cached per device.

Example::

    from tessera.runtime import driver

    ok, why = driver.driver_available()
    module = driver.load_module(cubin, device=0)
    launcher = driver.KernelLauncher(["ptr", "ptr", "i32"], module.function("add"), num_warps=4)
    device, stream = driver.device_and_stream([x, y, n])
    launcher.launch((blocks,), stream, [x, y, n])
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, Sequence, Tuple

from .._tessera import runtime as _rt

CudaError = _rt.CudaError
ArgumentError = _rt.ArgumentError
KernelLauncher = _rt.KernelLauncher
Module = _rt.Module
Function = _rt.Function
driver_available = _rt.driver_available
driver_version = _rt.driver_version
device_count = _rt.device_count
device_info = _rt.device_info
load_module = _rt.load_module
jit_ptx_to_cubin = _rt.jit_ptx_to_cubin
synchronize = _rt.synchronize
tensor_info = _rt.tensor_info
extraction_protocol = _rt.extraction_protocol
packed_launch = _rt.packed_launch  # the driver floor of benchmarks/launch_overhead.py

__all__ = [
    "ArgumentError", "CudaError", "DeviceProperties", "Function", "KernelLauncher", "Module",
    "current_stream", "device_and_stream", "device_count", "device_info", "device_of",
    "driver_available", "driver_version", "extraction_protocol", "framework_of",
    "get_device_properties", "jit_ptx_to_cubin", "load_module", "packed_launch", "synchronize",
    "tensor_info",
]


@dataclass(frozen=True)
class DeviceProperties:
    """What the compiler and launcher need to know about one GPU."""
    index: int
    name: str
    compute_capability: Tuple[int, int]
    multiprocessor_count: int
    max_threads_per_block: int
    warp_size: int
    max_shared_memory_per_block: int
    max_shared_memory_per_block_optin: int
    max_shared_memory_per_multiprocessor: int
    max_registers_per_multiprocessor: int
    l2_cache_bytes: int
    max_registers_per_block: int = 65536
    clock_rate_khz: int = 0
    memory_clock_rate_khz: int = 0
    memory_bus_width_bits: int = 0


@functools.lru_cache(maxsize=None)
def get_device_properties(device: int) -> DeviceProperties:
    """Properties of ``device``, read from the driver once per process."""
    info = _rt.device_info(device)
    info["compute_capability"] = tuple(info["compute_capability"])
    return DeviceProperties(index=device, **info)


# ---------------------------------------------------------------------------------- frameworks
# Which framework an argument comes from decides its device and the stream to launch on: the
# kernel must run on the stream that framework is using, so that it is ordered after the work
# that produced its inputs (and can be captured in that framework's CUDA graphs).

_SCALAR_TYPES = (int, float, bool, type(None), str)


@functools.lru_cache(maxsize=None)
def framework_of(cls: type) -> str:
    """"torch", "cupy", "jax", "numpy" or "other", from the module that defines ``cls``."""
    for klass in cls.__mro__:
        root = klass.__module__.split(".", 1)[0]
        if root in ("torch", "cupy", "numpy"):
            return root
        if root in ("jax", "jaxlib"):
            return "jax"
    return "other"


def _torch_stream(device: int) -> int:
    torch = sys.modules["torch"]
    get_raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if get_raw is not None:
        return get_raw(device)
    return torch.cuda.current_stream(device).cuda_stream


def _cupy_stream(device: int) -> int:
    cuda = sys.modules["cupy"].cuda
    with cuda.Device(device):
        return cuda.get_current_stream().ptr


def _legacy_default_stream(device: int) -> int:
    # JAX does not expose its streams; the legacy default stream waits for all blocking streams.
    return 0


_STREAM_GETTERS: Dict[str, Callable[[int], int]] = {
    "torch": _torch_stream, "cupy": _cupy_stream, "jax": _legacy_default_stream,
    "numpy": _legacy_default_stream, "other": _legacy_default_stream,
}


def current_stream(device: int, framework: str = "torch") -> int:
    """The CUstream handle ``framework`` is using on ``device`` (0: the legacy default stream)."""
    return _STREAM_GETTERS[framework](device)


def device_of(tensor: Any) -> int:
    """The CUDA device index holding ``tensor``, or -1 for memory on the host."""
    framework = framework_of(type(tensor))
    if framework == "torch":
        return tensor.get_device()
    if framework == "cupy":
        return tensor.device.id
    return tensor_info(tensor)[2]


def device_and_stream(args: Sequence[Any]) -> Tuple[int, int]:
    """(device, stream) for a launch: those of the first GPU tensor among ``args``.

    Tensors in host memory are skipped here; the launcher rejects them with an error that names
    the argument. With no GPU tensor at all (only scalars and raw addresses) the launch goes to
    PyTorch's current device and stream when PyTorch is loaded, else device 0, stream 0.
    """
    for arg in args:
        if isinstance(arg, _SCALAR_TYPES):
            continue
        arg = getattr(arg, "_tessera_reinterpreted", arg)  # tessera.reinterpret: its base
        device = device_of(arg)
        if device >= 0:
            return device, current_stream(device, framework_of(type(arg)))
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        device = torch.cuda.current_device()
        return device, _torch_stream(device)
    return 0, 0


# ------------------------------------------------------------------------- triton's driver.active
# Triton code reads the device through ``triton.runtime.driver.active`` (SM counts, shared
# memory, the target arch); the same object lives here (active_driver.py).

from .active_driver import CudaDriver  # noqa: E402
from .active_driver import GPUTarget as GPUTarget  # noqa: E402  (triton.runtime.driver's name)

default = CudaDriver()
active = default


def set_active(new_driver) -> None:
    """Makes ``new_driver`` what ``driver.active`` returns (as Triton's DriverConfig)."""
    global active
    active = new_driver


def reset_active() -> None:
    global active
    active = default
