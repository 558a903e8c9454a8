"""Tessera: a Triton-style GPU kernel language with its own tile IR and compiler.

The public API, re-exported here; everything else is private implementation::

    import tessera
    import tessera.language as tl

    @tessera.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr): ...

    kernel[(tessera.cdiv(n, 1024),)](x, n, BLOCK=1024)

Triton code runs with ``import tessera as triton``: the names Triton's top-level package has
are here with Triton's meaning; one Tessera lacks raises an AttributeError that says it is a
Triton API not supported yet (the table: tessera/_triton_api.py, docs/triton-compat.md).
"""
from . import config
from . import language
from . import testing
from .errors import CompilationError
from .jit import JITFunction, cdiv, jit
from .autotuner import Autotuner, Config, Heuristics, autotune, heuristics
from .runtime.allocation import set_allocator
from . import tools

from .reinterpret import TensorWrapper, reinterpret

from ._version import __version__

__all__ = ["jit", "JITFunction", "cdiv", "language", "config", "testing", "CompilationError",
           "autotune", "Autotuner", "Config", "heuristics", "Heuristics", "ops", "__version__"]
__all__ += ["set_allocator", "tools", "TensorWrapper", "reinterpret"]
# tessera.ops, the kernel library, is written against this face (``import tessera``): it loads
# on first use (``tessera.ops``, ``from tessera.ops import ...``) through __getattr__ below.

# Triton's host API: next_power_of_2, the exception classes Triton code catches, knobs,
# runtime (driver.active), MockTensor.
from . import runtime
from .errors import InterpreterError, OutOfResources, TritonError
from .jit import ConstexprFunction, constexpr_function, next_power_of_2
from .triton_knobs import knobs
from .runtime.stand_ins import MockTensor

# Triton's host compile API (host_api.py).
from .host_api import AsyncCompileMode, FutureKernel, compile, must_use_result  # noqa: E402

__all__ += ["AsyncCompileMode", "FutureKernel", "compile", "must_use_result"]

KernelInterface = JITFunction

# The first compile's one-time set-up (imports, build id) on a thread, while the program
# goes on (runtime/prewarm.py; TESSERA_PREWARM=0: not started).
from .runtime import prewarm as _prewarm  # noqa: E402

_prewarm.start()

__all__ += ["ConstexprFunction", "constexpr_function", "InterpreterError", "KernelInterface",
            "MockTensor", "OutOfResources", "TritonError", "knobs", "next_power_of_2", "runtime"]


def __getattr__(name: str):
    """Subpackages not imported yet (``tessera.compiler.errors``, as ``triton.compiler``), else
    a Triton name Tessera does not provide yet: an error that says so (see _triton_names)."""
    import importlib
    import importlib.util
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    from ._triton_names import missing_name_error
    raise missing_name_error("triton", name, __name__)
