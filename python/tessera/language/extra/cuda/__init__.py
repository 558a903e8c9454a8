"""CUDA extras (Triton's ``triton.language.extra.cuda``): ``libdevice``."""
from . import libdevice

__all__ = ["libdevice"]
