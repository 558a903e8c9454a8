"""``triton.runtime.jit`` as a module: code imports ``JITFunction`` (to test ``isinstance``, or
to subclass) and the decorator from here, e.g.
``from tessera.runtime.jit import JITFunction, jit``.

Example::

    from tessera.runtime.jit import JITFunction
    assert isinstance(my_kernel, JITFunction)
"""
import importlib

# ``tessera.jit`` is also the decorator's name on the package, so the module is looked up by
# its full name.
_jit = importlib.import_module("tessera.jit")
JITFunction = _jit.JITFunction
jit = _jit.jit
KernelInterface = JITFunction  # Triton's base class of JITFunction; launch by ``kernel[grid]``

from ..reinterpret import TensorWrapper, reinterpret  # noqa: E402
from .stand_ins import MockTensor  # noqa: E402

__all__ = ["JITFunction", "KernelInterface", "MockTensor", "TensorWrapper", "jit",
           "reinterpret"]
