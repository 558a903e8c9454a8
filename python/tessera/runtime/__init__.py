"""Running compiled kernels: the CUDA driver (driver.py), the on-disk cache (kernel_cache.py).

``driver`` loads libcuda at run time, so importing it needs no GPU; ``kernel_cache`` needs
no binding.
As ``triton.runtime``, this package also gives ``driver.active`` (active_driver.py), the
autotuning decorators, JITFunction, MockTensor and the error classes (errors.py).
"""
import importlib

_FROM_PACKAGE = {"autotune": "autotuner", "Autotuner": "autotuner", "Config": "autotuner",
                 "heuristics": "autotuner", "Heuristics": "autotuner", "JITFunction": "jit",
                 "KernelInterface": "jit", "MockTensor": "runtime.stand_ins",
                 "OutOfResources": "errors", "InterpreterError": "errors",
                 "TritonError": "errors", "TensorWrapper": "reinterpret",
                 "reinterpret": "reinterpret", "RemoteCacheBackend": "store.remote_cache",
                 "RedisRemoteCacheBackend": "store.remote_cache"}
# ``jit``, ``autotuner`` and ``cache`` are modules, as in Triton
# (``triton.runtime.jit.JITFunction``, ``from triton.runtime.autotuner import Autotuner``,
# ``triton.runtime.cache``).
_SUBMODULES = ("driver", "kernel_cache", "launcher", "errors", "active_driver", "jit",
               "autotuner", "cache")


def __getattr__(name: str):
    # Lazy: importing tessera.runtime must not import the compiler (and the binding's driver
    # module loads only when used).
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _FROM_PACKAGE:
        module = importlib.import_module(f"tessera.{_FROM_PACKAGE[name]}")
        return getattr(module, "JITFunction" if name == "KernelInterface" else name)
    from .._triton_names import missing_name_error
    raise missing_name_error("triton.runtime", name, __name__)
