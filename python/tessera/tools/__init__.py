"""Host-side helpers with Triton's ``triton.tools`` names (``tensor_descriptor``, ``mxfp``)."""
from . import tensor_descriptor

__all__ = ["tensor_descriptor"]

# mxfp needs torch: loaded on first use (`from tessera.tools.mxfp import ...` or tools.mxfp).
__all__ += ["mxfp"]


def __getattr__(name: str):
    if name == "mxfp":
        import importlib
        return importlib.import_module(f"{__name__}.mxfp")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
