"""``triton.runtime._allocation``'s path (Triton code imports NullAllocator from there)."""
from .allocation import NullAllocator, get_allocator, set_allocator

__all__ = ["NullAllocator", "get_allocator", "set_allocator"]
