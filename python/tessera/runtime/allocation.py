"""``tessera.set_allocator``: Triton's hook for a kernel's global scratch memory.

A kernel that needs global workspace calls the allocator at each launch, as Triton does:
``fn(size, alignment, stream)`` returns a buffer with ``data_ptr()`` of ``size`` bytes, the
kernel's ``global_scratch_size`` per program times the grid's size. In Tessera those are the
kernels whose device-side tensor descriptors (``tl.make_tensor_descriptor``) encode TMA maps
(TESSERA_TMA on sm_90a: 128 bytes per descriptor and program); other kernels never call it.
The buffer is released after the launch is queued (a stream-ordered allocator, such as
torch's, reuses it only for later work on that stream). Example::

    tessera.set_allocator(lambda size, alignment, stream:
                          torch.empty(size, device="cuda", dtype=torch.int8))
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Dict, Iterator, Optional, Sequence


class NullAllocator:
    """The default: a kernel that needs scratch fails with this message (Triton's)."""

    def __call__(self, size: int, alignment: int, stream: Optional[int]) -> Any:
        raise RuntimeError("Kernel requires a runtime memory allocation, but no allocator was "
                           "set. Use triton.set_allocator (tessera.set_allocator) to specify "
                           "an allocator.")


_allocator: ContextVar[Callable[[int, int, Optional[int]], Any]] = ContextVar(
    "tessera_allocator", default=NullAllocator())


def set_allocator(allocator: Callable[[int, int, Optional[int]], Any]) -> None:
    """Sets the allocator of global scratch memory (as ``triton.set_allocator``): called as
    ``allocator(size, alignment, stream)`` at the launch of a kernel that needs scratch,
    returning an object with ``data_ptr()``."""
    if not callable(allocator):
        raise TypeError(f"set_allocator needs a callable, got {allocator!r}")
    _allocator.set(allocator)


@contextmanager
def default_allocator(allocator: Optional[Callable[[int, int, Optional[int]], Any]]
                      ) -> Iterator[None]:
    """Within the block, `allocator` serves launches if no allocator was set (a library's
    kernels that need scratch run without asking their caller for one, and the caller's
    allocator still wins); None: nothing changes."""
    if allocator is None or not isinstance(_allocator.get(), NullAllocator):
        yield
        return
    token = _allocator.set(allocator)
    try:
        yield
    finally:
        _allocator.reset(token)


def torch_allocator(like) -> Callable[[int, int, Optional[int]], Any]:
    """An allocator of int8 torch tensors on `like`'s device (torch's stream-ordered cache),
    `alignment`-aligned (torch's CUDA blocks are 512-byte aligned; a view skips to it else):
    what tessera.ops' TMA kernels use for their tensor maps' global scratch when the caller
    set no allocator (with :func:`default_allocator`)."""
    import torch  # only tensors of torch reach here: no import for programs without it

    def allocate(size: int, alignment: int, stream):
        raw = torch.empty(size + alignment, device=like.device, dtype=torch.int8)
        start = -raw.data_ptr() % alignment
        return raw[start:start + size]
    return allocate


def get_allocator() -> Callable[[int, int, Optional[int]], Any]:
    """The allocator set by :func:`set_allocator` (in this context)."""
    return _allocator.get()


def global_scratch(kernel: str, metadata: Dict[str, Any], grid: Sequence[int],
                   stream: Optional[int]) -> Any:
    """The scratch buffer of one launch of ``kernel`` over ``grid``, from the allocator:
    ``global_scratch_size`` bytes for each program, aligned to ``global_scratch_align``."""
    size, alignment = metadata["global_scratch_size"], metadata["global_scratch_align"]
    programs = 1
    for extent in grid:
        programs *= int(extent)
    allocator = get_allocator()
    if isinstance(allocator, NullAllocator):
        raise RuntimeError(f"{kernel}: Kernel requires a runtime memory allocation, but no "
                           f"allocator was set: its device-side tensor descriptors "
                           f"(tl.make_tensor_descriptor under TESSERA_TMA) encode their TMA "
                           f"maps in {size} bytes of global scratch per program. Use "
                           "tessera.set_allocator (triton.set_allocator) to specify an "
                           "allocator.")
    buffer = allocator(size * programs, alignment, stream)
    address = buffer.data_ptr()
    if address % alignment:
        raise RuntimeError(f"{kernel}: the allocator returned global scratch at {address:#x}, "
                           f"not aligned to the {alignment} bytes asked for")
    return buffer
