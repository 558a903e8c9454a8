"""``triton.backends.compiler``: ``GPUTarget``, the class ``driver.active.get_current_target()``
returns and ``triton.compile(src, target=...)`` takes (the same class as
``tessera.runtime.driver.GPUTarget``).

Example::

    from tessera.backends.compiler import GPUTarget
    compiled = tessera.compile(src, target=GPUTarget("cuda", 90, 32))
"""
from ..device.active_driver import GPUTarget

__all__ = ["GPUTarget"]


def __getattr__(name: str):
    # Triton's other names here (BaseBackend, Language) say they are not supported yet.
    from .._triton_names import missing_name_error
    raise missing_name_error("triton.backends.compiler", name, __name__)
