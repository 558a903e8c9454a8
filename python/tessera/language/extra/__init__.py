"""Backend-specific language extras (Triton's ``triton.language.extra``): ``libdevice``
(``tl.extra.libdevice``, the same module as ``tl.extra.cuda.libdevice``)."""
from . import cuda
from . import libdevice

__all__ = ["cuda", "libdevice"]
