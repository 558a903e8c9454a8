"""Running compiled kernels: the specialization of a call (specialization.py, with
stand_ins.py, tuple_arguments.py, descriptor_arguments.py), host tensor maps (tensor_map.py),
the launcher (launcher.py: build or load a cubin, ``Launchable``) and global scratch
(allocation.py). It stands above the compiler and below jit.py (docs/architecture.md, "Floors").

As ``triton.runtime``, this package also gives ``driver`` and ``active_driver`` (the CUDA driver
and ``driver.active``, which live a floor below the language in device/: these paths are those
very modules), ``kernel_cache`` and ``remote_cache`` (the on-disk store, store/), the autotuning
decorators, JITFunction, MockTensor and the error classes (errors.py); ``jit`` and
``autotuner`` are Triton's module paths of classes from the floors above.
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
