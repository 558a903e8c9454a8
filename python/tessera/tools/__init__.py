"""Host-side helpers with Triton's ``triton.tools`` names (``tensor_descriptor``)."""
from . import tensor_descriptor

__all__ = ["tensor_descriptor"]
