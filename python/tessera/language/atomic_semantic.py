"""The type rules of the atomics (language/atomic.py) and the atomic_rmw / atomic_cas IR.

Mixed into semantic.Semantic (kept in its own file beside it). As Triton's semantic.py:
``val`` and ``mask`` broadcast to the pointer's shape and ``val`` is cast to the pointee type;
fp16/bf16 support only ``add``, 8/16-bit integers and booleans nothing; float atomic_max /
atomic_min work on the bits (signed max of the non-negative values, unsigned min of the
negative ones, and the converse for min); atomic_cas compares bits.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

from . import core as tl
from .core import tensor

SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("gpu", "cta", "sys")


def memory_attrs(sem: Optional[str], scope: Optional[str]) -> dict:
    """The sem and scope attributes (Triton's defaults: acq_rel, gpu)."""
    sem = "acq_rel" if sem is None else sem
    scope = "gpu" if scope is None else scope
    if sem not in SEMANTICS:
        raise ValueError(f"sem must be one of {', '.join(SEMANTICS)}, got {sem!r}")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    return {"sem": sem, "scope": scope}


class AtomicSemantic:
    """atomic_add, atomic_max, atomic_min, atomic_and/or/xor, atomic_xchg, atomic_cas."""

    # Provided by Semantic (semantic.py).
    builder: Any
    create: Any
    cast: Any
    to_tensor: Any
    to_shape: Any
    bitcast: Any
    compare: Any
    logical: Any
    where: Any
    scalar_constant: Any
    _memory_operand: Any

    def atomic_operands(self, op: str, pointer: Any, value: Any,
                        mask: Any) -> Tuple[tensor, tensor, Optional[tensor]]:
        """Triton's atom_red_typechecking_impl: checks the pointee type, broadcasts value and
        mask to the pointer's shape, casts value to the pointee type."""
        if not isinstance(pointer, tensor) or not pointer.dtype.is_ptr():
            raise TypeError(f"atomic_{op} needs a pointer or a tensor of pointers, got {pointer}")
        if pointer.dtype.is_const():  # a `tl.const` parameter (as Triton)
            raise ValueError("Cannot store to a constant pointer")
        element = pointer.dtype.element_ty
        if element in (tl.float16, tl.bfloat16) and op != "add":
            raise ValueError(f"atomic_{op} does not support {element}")
        if element.is_fp8() or element.is_ptr() or (
                element.is_int() and element.int_bitwidth < 32):
            raise ValueError(f"atomic_{op} does not support {element}")
        value = self.to_shape(self._memory_operand(value, element), pointer.shape)
        if mask is not None:
            mask = self.to_tensor(mask)
            if mask.dtype != tl.int1:
                raise TypeError(f"mask must be a boolean (int1) value, got {mask.dtype}")
            if not pointer.shape and mask.shape:
                raise ValueError("a mask cannot be a tile when the pointer is a scalar")
            mask = self.to_shape(mask, pointer.shape)
        return pointer, value, mask

    def atomic_rmw(self, kind: str, pointer: tensor, value: tensor, mask: Optional[tensor],
                   attrs: dict) -> tensor:
        operands = [pointer, value] + ([mask] if mask is not None else [])
        return self.create("atomic_rmw", operands, value.dtype, pointer.shape, kind=kind, **attrs)

    def atomic(self, op: str, pointer: Any, value: Any, mask: Any, sem: Optional[str],
               scope: Optional[str]) -> tensor:
        """``op`` in add, max, min, and, or, xor, xchg; returns the old values."""
        attrs = memory_attrs(sem, scope)
        pointer, value, mask = self.atomic_operands(op, pointer, value, mask)
        element = value.dtype
        if op == "add":
            kind = "fadd" if element.is_floating() else "add"
        elif op in ("max", "min"):
            if element.is_floating():
                return self._float_extremum(op, pointer, value, mask, attrs)
            kind = op if element.is_int_signed() else "u" + op
        elif op in ("and", "or", "xor"):
            if not element.is_int():
                raise ValueError(f"atomic_{op} needs integers, got {element}")
            kind = op
        elif op == "xchg":
            kind = "xchg"
        else:
            raise ValueError(f"unknown atomic operation {op!r}")
        return self.atomic_rmw(kind, pointer, value, mask, attrs)

    def _float_extremum(self, op: str, pointer: tensor, value: tensor, mask: Optional[tensor],
                        attrs: dict) -> tensor:
        """Float max / min on the bits, as Triton. Non-negative floats order like their bits
        as signed integers; negative ones (sign bit set) order in reverse of their bits as
        unsigned integers. So max is a signed max where value >= 0 and an unsigned min where
        value < 0; min is a signed min and an unsigned max."""
        element = value.dtype
        if element not in (tl.float32, tl.float64):
            raise ValueError(f"atomic_{op} does not support {element}")
        bits = tl.int32 if element == tl.float32 else tl.int64
        int_value = self.bitcast(value, bits)
        int_pointer = self.bitcast(pointer, tl.pointer_type(bits))
        zero = self.scalar_constant(0.0, element)
        non_negative, negative = self.compare("ge", value, zero), self.compare("lt", value, zero)
        kinds = ("max", "umin") if op == "max" else ("min", "umax")
        results = []
        for kind, condition in zip(kinds, (non_negative, negative)):
            lane_mask = condition if mask is None else self.logical("andi", mask, condition)
            results.append(self.atomic_rmw(kind, int_pointer, int_value, lane_mask, attrs))
        return self.bitcast(self.where(non_negative, results[0], results[1]), element)

    def atomic_cas(self, pointer: Any, cmp: Any, value: Any, sem: Optional[str],
                   scope: Optional[str]) -> tensor:
        """Where memory equals ``cmp`` (bitwise) store ``value``; returns the old values."""
        attrs = memory_attrs(sem, scope)
        if not isinstance(pointer, tensor) or not pointer.dtype.is_ptr():
            raise TypeError(f"atomic_cas needs a pointer or a tensor of pointers, got {pointer}")
        element = pointer.dtype.element_ty
        if element.is_ptr() or element.is_fp8() or element.primitive_bitwidth not in (16, 32, 64):
            raise ValueError(f"atomic_cas supports 16, 32 and 64-bit elements, got {element}")
        cmp = self.to_shape(self._memory_operand(cmp, element), pointer.shape)
        value = self.to_shape(self._memory_operand(value, element), pointer.shape)
        return self.create("atomic_cas", [pointer, cmp, value], element, pointer.shape, **attrs)
