"""``tl.target_info``: what a kernel may ask about the GPU it is compiled for (Triton 3.6's
``triton.language.target_info``). Each function runs at compile time (a constexpr function),
so ``if cuda_capability_geq(9, 0):`` keeps only one branch, e.g. to guard inline PTX.

The target is the arch being compiled for (``kernel.asm(..., arch="sm_80")`` asks for 80;
a launch compiles for the current device), else ``driver.active``'s current target (the
interpreter stands for an sm_90 device without a GPU); None when there is neither.

Example::

    from tessera.language.target_info import cuda_capability_geq

    @tessera.jit
    def kernel(x_ptr):
        if cuda_capability_geq(9, 0):
            ...  # Hopper and newer
"""
from __future__ import annotations

import contextlib
import contextvars
import re
from typing import Iterator, Optional

from ..constexpr_functions import constexpr_function

__all__ = ["current_target", "is_cuda", "cuda_capability_geq", "is_hip", "is_hip_cdna3",
           "is_hip_cdna4"]

_COMPILE_ARCH: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar(
    "tessera_compile_arch", default=None)


@contextlib.contextmanager
def compiling_for(arch: Optional[str]) -> Iterator[None]:
    """While the front end compiles for ``arch`` ("sm_80", "sm_90a"), the target is it."""
    token = _COMPILE_ARCH.set(arch)
    try:
        yield
    finally:
        _COMPILE_ARCH.reset(token)


_INTERPRETING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "tessera_interpreting", default=False)


@contextlib.contextmanager
def interpreting() -> Iterator[None]:
    """While a kernel is built for the interpreter (also @jit(interpret=True)): without a
    GPU the target is the device the interpreter stands for."""
    token = _INTERPRETING.set(True)
    try:
        yield
    finally:
        _INTERPRETING.reset(token)


@constexpr_function
def current_target():
    """The GPUTarget (backend, arch as an int such as 90, warp_size) compiled for, or None.

    Example::

        >>> current_target() is None or current_target().backend == "cuda"
        True
    """
    from ..device import driver
    arch = _COMPILE_ARCH.get()
    if arch is not None:
        return driver.GPUTarget("cuda", int(re.sub(r"\D", "", arch)), 32)
    try:
        return driver.active.get_current_target()
    except RuntimeError:
        if _INTERPRETING.get():
            from ..device.active_driver import _MODELED_CAPABILITY
            return driver.GPUTarget("cuda", _MODELED_CAPABILITY, 32)
        # no GPU and not interpreting: no target, as Triton's None
        return None


@constexpr_function
def is_cuda() -> bool:
    """True when compiling for an NVIDIA GPU (always, on Tessera, where there is a target)."""
    target = current_target()
    return target is not None and target.backend == "cuda"


@constexpr_function
def cuda_capability_geq(major: int, minor: int = 0) -> bool:
    """Whether the target's compute capability is at least ``major.minor``.

    Example::

        if cuda_capability_geq(8, 0): ...   # sm_80 and newer
    """
    target = current_target()
    if target is None or target.backend != "cuda":
        return False
    return target.arch >= major * 10 + minor


@constexpr_function
def is_hip() -> bool:
    """False: Tessera compiles for NVIDIA GPUs only."""
    target = current_target()
    return target is not None and target.backend == "hip"


@constexpr_function
def is_hip_cdna3() -> bool:
    """False on Tessera (an AMD gfx942 target)."""
    target = current_target()
    return target is not None and target.arch == "gfx942"


@constexpr_function
def is_hip_cdna4() -> bool:
    """False on Tessera (an AMD gfx950 target)."""
    target = current_target()
    return target is not None and target.arch == "gfx950"
