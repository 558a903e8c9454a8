"""``tl.extra.cuda.libdevice``: the libdevice functions (see ..libdevice, the one module that
defines them; this path is Triton's CUDA-specific spelling of the same functions).
Example: ``from tessera.language.extra.cuda import libdevice; y = libdevice.erfinv(x)``."""
import sys

from .. import libdevice as _libdevice

# The very same module object, so both import paths give identical functions.
sys.modules[__name__] = _libdevice
