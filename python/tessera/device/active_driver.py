"""``tessera.runtime.driver.active``: Triton's driver object, over Tessera's libcuda runtime.

Triton host code asks it for the current device, stream and target and for device properties::

    props = triton.runtime.driver.active.utils.get_device_properties(device)
    grid = (props["multiprocessor_count"],)
    target = triton.runtime.driver.active.get_current_target()   # GPUTarget("cuda", 90, 32)

The current device and stream are PyTorch's when PyTorch is loaded (as Triton, whose driver is
PyTorch's), else device 0 and the legacy default stream. Without a GPU, in interpret mode
(TESSERA_INTERPRET=1) the driver describes the device Tessera compiles for when there is
none (sm_90, an H100 SXM's properties), so host wrappers that size grids by SM count run on
the CPU; outside interpret mode it raises an error that says there is no GPU. (Triton's
interpreter has no driver at all without a GPU.)
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Union

# The device the interpreter stands for without a GPU: an H100 SXM5 (sm_90), the arch
# launcher.default_arch() compiles for when no driver is found.
_MODELED_PROPERTIES = {"max_shared_mem": 232448, "max_num_regs": 65536,
                       "multiprocessor_count": 132, "warpSize": 32, "sm_clock_rate": 1980000,
                       "mem_clock_rate": 2619000, "mem_bus_width": 5120}
_MODELED_CAPABILITY = 90


@dataclass(frozen=True)
class GPUTarget:
    """As ``triton.backends.compiler.GPUTarget``: backend "cuda", arch = compute capability as
    an int (90 for sm_90), warp_size 32."""
    backend: str
    arch: Union[int, str]
    warp_size: int


def _no_gpu_reason() -> Optional[str]:
    from . import driver
    ok, why = driver.driver_available()
    if ok and driver.device_count() > 0:
        return None
    return why or "no CUDA device"


def _interpreting() -> bool:
    from ..config import knobs
    return bool(knobs.interpret)


def _torch():
    return sys.modules.get("torch")


# Triton's driver.active.get_benchmarker() gives triton.testing.do_bench. tessera.testing stands
# a floor above the driver (its device queries use it), so it installs its do_bench here when
# imported, which `import tessera` does.
_benchmarker: Optional[Callable] = None


def set_benchmarker(benchmarker: Callable) -> None:
    """What ``get_benchmarker`` returns (tessera.testing sets its ``do_bench``)."""
    global _benchmarker
    _benchmarker = benchmarker


class DeviceUtils:
    """``driver.active.utils``: device properties as Triton's dict."""

    def get_device_properties(self, device: int) -> Dict[str, int]:
        """{"max_shared_mem" (per block, opt-in), "max_num_regs" (per block),
        "multiprocessor_count", "warpSize", "sm_clock_rate", "mem_clock_rate" (kHz),
        "mem_bus_width" (bits)} of ``device``, as Triton's."""
        reason = _no_gpu_reason()
        if reason is not None:
            if _interpreting():
                return dict(_MODELED_PROPERTIES)
            raise RuntimeError(f"driver.active.utils.get_device_properties({device}): no GPU "
                               f"({reason}); run on a GPU machine, or set TESSERA_INTERPRET=1 "
                               f"for the interpreter's modeled device")
        from . import driver
        props = driver.get_device_properties(int(device))
        return {"max_shared_mem": props.max_shared_memory_per_block_optin,
                "max_num_regs": props.max_registers_per_block,
                "multiprocessor_count": props.multiprocessor_count,
                "warpSize": props.warp_size, "sm_clock_rate": props.clock_rate_khz,
                "mem_clock_rate": props.memory_clock_rate_khz,
                "mem_bus_width": props.memory_bus_width_bits}


class CudaDriver:
    """Triton's ``CudaDriver`` API (see the module docstring)."""

    def __init__(self) -> None:
        self.utils = DeviceUtils()

    @staticmethod
    def is_active() -> bool:
        return _no_gpu_reason() is None

    def get_current_device(self) -> int:
        torch = _torch()
        if torch is not None and torch.cuda.is_available():
            return torch.cuda.current_device()
        return 0

    def set_current_device(self, device: int) -> None:
        torch = _torch()
        if torch is None or not torch.cuda.is_available():
            if int(device) != 0:
                raise RuntimeError(f"set_current_device({device}): without PyTorch's CUDA, "
                                   "Tessera uses device 0")
            return
        torch.cuda.set_device(device)

    def get_current_stream(self, device: Optional[int] = None) -> int:
        """The raw CUstream kernels launch on (PyTorch's current stream, else 0)."""
        from . import driver
        device = self.get_current_device() if device is None else device
        torch = _torch()
        if torch is not None and torch.cuda.is_available():
            return driver.current_stream(device, "torch")
        return 0

    def get_current_target(self) -> GPUTarget:
        reason = _no_gpu_reason()
        if reason is not None:
            if _interpreting():
                return GPUTarget("cuda", _MODELED_CAPABILITY, 32)
            raise RuntimeError(f"driver.active.get_current_target(): no GPU ({reason}); run on "
                               f"a GPU machine, or set TESSERA_INTERPRET=1 (the interpreter "
                               f"stands for an sm_{_MODELED_CAPABILITY} device)")
        from . import driver
        props = driver.get_device_properties(self.get_current_device())
        major, minor = props.compute_capability
        return GPUTarget("cuda", major * 10 + minor, props.warp_size)

    def get_active_torch_device(self) -> Any:
        import torch
        if not torch.cuda.is_available():
            return torch.device("cpu")  # the interpreter's tensors live on the CPU
        return torch.device("cuda", self.get_current_device())

    def get_device_interface(self) -> Any:
        import torch
        return torch.cuda

    def get_benchmarker(self) -> Optional[Callable]:
        """``triton.testing.do_bench``: tessera.testing's, installed by it (set_benchmarker)."""
        return _benchmarker

    def get_empty_cache_for_benchmark(self) -> Any:
        """A 256 MiB buffer whose zeroing flushes L2 between timed runs (as Triton)."""
        import torch
        return torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int, device="cuda")

    def clear_cache(self, cache: Any) -> None:
        cache.zero_()

    def map_python_to_cpp_type(self, ty: str) -> str:
        if ty.startswith("*"):
            return "CUdeviceptr"
        return {"i1": "int8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t",
                "i64": "int64_t", "u1": "uint8_t", "u8": "uint8_t", "u16": "uint16_t",
                "u32": "uint32_t", "u64": "uint64_t", "fp16": "double", "bf16": "double",
                "fp32": "double", "fp64": "double"}[ty]
