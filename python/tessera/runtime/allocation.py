"""``tessera.set_allocator``: Triton's hook for a kernel's global scratch memory.

Triton calls the allocator at launch for kernels that need global workspace (device-side
tensor descriptors on TMA hardware: ``fn(size, alignment, stream)`` returns a buffer with
``data_ptr()``). Tessera's lowering of tensor descriptors (masked loads and stores) needs no
scratch, so the allocator is accepted and kept, never called. Example::

    tessera.set_allocator(lambda size, alignment, stream:
                          torch.empty(size, device="cuda", dtype=torch.int8))
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Callable, Optional


class NullAllocator:
    """The default: a kernel that needed scratch would fail with this message."""

    def __call__(self, size: int, alignment: int, stream: Optional[int]) -> Any:
        raise RuntimeError("this kernel needs a global memory allocation but no allocator "
                           "was set; call tessera.set_allocator(fn)")


_allocator: ContextVar[Callable[[int, int, Optional[int]], Any]] = ContextVar(
    "tessera_allocator", default=NullAllocator())


def set_allocator(allocator: Callable[[int, int, Optional[int]], Any]) -> None:
    """Sets the allocator of global scratch memory (as ``triton.set_allocator``): called as
    ``allocator(size, alignment, stream)``, returning an object with ``data_ptr()``. No
    Tessera kernel needs one today; the call is accepted for Triton code that makes it."""
    if not callable(allocator):
        raise TypeError(f"set_allocator needs a callable, got {allocator!r}")
    _allocator.set(allocator)


def get_allocator() -> Callable[[int, int, Optional[int]], Any]:
    """The allocator set by :func:`set_allocator` (in this context)."""
    return _allocator.get()
