"""Tessera: a Triton-style GPU kernel language with its own tile IR and compiler.

The public API, re-exported here; everything else is private implementation::

    import tessera
    import tessera.language as tl

    @tessera.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr): ...

    kernel[(tessera.cdiv(n, 1024),)](x, n, BLOCK=1024)
"""
from . import config
from . import language
from . import testing
from .errors import CompilationError
from .jit import JITFunction, cdiv, jit
from .autotuner import Autotuner, Config, Heuristics, autotune, heuristics

from .reinterpret import TensorWrapper, reinterpret

__version__ = "0.1.0"

__all__ = ["jit", "JITFunction", "cdiv", "language", "config", "testing", "CompilationError",
           "autotune", "Autotuner", "Config", "heuristics", "Heuristics", "__version__"]
__all__ += ["TensorWrapper", "reinterpret"]
