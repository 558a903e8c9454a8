"""Atomic read-modify-write of global memory: ``tl.atomic_add``, ``tl.atomic_cas``, ...

Each returns the values memory held before the update (0 where ``mask`` is false). ``sem``
orders the atomic with the program's other memory accesses ("acq_rel" by default, "relaxed",
"acquire", "release") and ``scope`` says who must observe it atomically ("gpu" by default,
"cta", "sys"), as Triton. A tile updates each element once, even where the layout gives
several threads a copy; a scalar pointer is updated once per program. Where one tile's
addresses repeat, every element is applied (the interpreter applies them in row-major order).
Type rules: atomic_semantic.py.
"""
from __future__ import annotations

from typing import Any, Optional

from .core import builtin, tensor, _unwrap


def _rmw(op: str, pointer: Any, val: Any, mask: Any, sem: Any, scope: Any,
         _semantic: Any) -> tensor:
    return _semantic.atomic(op, _unwrap(pointer), _unwrap(val), _unwrap(mask), _unwrap(sem),
                            _unwrap(scope))


@builtin
def atomic_add(pointer: tensor, val: Any, mask: Any = None, sem: Optional[str] = None,
               scope: Optional[str] = None, _semantic=None) -> tensor:
    """``*pointer += val``: fp16, bf16, fp32, fp64 and 32/64-bit integers. Example:
    ``tl.atomic_add(counts_ptr + bucket, 1, mask=valid, sem="relaxed")``."""
    return _rmw("add", pointer, val, mask, sem, scope, _semantic)


@builtin
def atomic_max(pointer: tensor, val: Any, mask: Any = None, sem: Optional[str] = None,
               scope: Optional[str] = None, _semantic=None) -> tensor:
    """``*pointer = max(*pointer, val)``: 32/64-bit integers (signed or unsigned by dtype),
    fp32 and fp64 (through integer max/min on the bits, as Triton). Example:
    ``tl.atomic_max(amax_ptr, tl.max(tl.abs(x), 0))``."""
    return _rmw("max", pointer, val, mask, sem, scope, _semantic)


@builtin
def atomic_min(pointer: tensor, val: Any, mask: Any = None, sem: Optional[str] = None,
               scope: Optional[str] = None, _semantic=None) -> tensor:
    """``*pointer = min(*pointer, val)``; types as ``atomic_max``. Example:
    ``tl.atomic_min(first_ptr + key, index)``."""
    return _rmw("min", pointer, val, mask, sem, scope, _semantic)


@builtin
def atomic_and(pointer: tensor, val: Any, mask: Any = None, sem: Optional[str] = None,
               scope: Optional[str] = None, _semantic=None) -> tensor:
    """``*pointer &= val`` (32/64-bit integers). Example: ``tl.atomic_and(flags, ~bit)``."""
    return _rmw("and", pointer, val, mask, sem, scope, _semantic)


@builtin
def atomic_or(pointer: tensor, val: Any, mask: Any = None, sem: Optional[str] = None,
              scope: Optional[str] = None, _semantic=None) -> tensor:
    """``*pointer |= val`` (32/64-bit integers). Example: ``tl.atomic_or(flags, bit)``."""
    return _rmw("or", pointer, val, mask, sem, scope, _semantic)


@builtin
def atomic_xor(pointer: tensor, val: Any, mask: Any = None, sem: Optional[str] = None,
               scope: Optional[str] = None, _semantic=None) -> tensor:
    """``*pointer ^= val`` (32/64-bit integers). Example: ``tl.atomic_xor(parity, bits)``."""
    return _rmw("xor", pointer, val, mask, sem, scope, _semantic)


@builtin
def atomic_xchg(pointer: tensor, val: Any, mask: Any = None, sem: Optional[str] = None,
                scope: Optional[str] = None, _semantic=None) -> tensor:
    """``*pointer = val``, returning the old value (fp32, fp64, 32/64-bit integers). Example:
    a lock release, ``tl.atomic_xchg(lock, 0, sem="release")``."""
    return _rmw("xchg", pointer, val, mask, sem, scope, _semantic)


@builtin
def atomic_cas(pointer: tensor, cmp: Any, val: Any, sem: Optional[str] = None,
               scope: Optional[str] = None, _semantic=None) -> tensor:
    """Compare and swap: where ``*pointer`` equals ``cmp`` (bitwise) store ``val``; returns the
    old value (16, 32 and 64-bit types). Example: a spin lock,
    ``while tl.atomic_cas(lock, 0, 1, sem="acquire") == 1: pass``."""
    return _semantic.atomic_cas(_unwrap(pointer), _unwrap(cmp), _unwrap(val), _unwrap(sem),
                                _unwrap(scope))
