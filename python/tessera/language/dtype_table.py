"""Triton's per-dtype predicates and attributes, generated from one table.

``tl.int64.is_int64()``, ``tl.float16.itemsize``, ``tl.bfloat16.exponent_bias``,
``x.dtype.codegen_name()``, ``x.type.get_block_shapes()``, ...: core.py calls ``install()``
once its classes exist. Every dtype name Triton has gets an ``is_<name>`` predicate, so
Triton code that asks never fails.
"""
from __future__ import annotations

from .core import _PUBLIC_NAMES, block_type, dtype, pointer_type


# Every dtype name Triton has, with its exponent bias for floats (None: an integer). Each name
# gives a predicate ``is_<name>()``.
DTYPE_NAMES = {
    "int1": None, "int8": None, "int16": None, "int32": None, "int64": None,
    "uint8": None, "uint16": None, "uint32": None, "uint64": None,
    "fp8e4nv": 7, "fp8e4b8": 8, "fp8e4b15": 15, "fp8e5": 15, "fp8e5b16": 16,
    "fp16": 15, "bf16": 127, "fp32": 127, "fp64": 1023,
}


def _name_predicate(name: str):
    def predicate(self: dtype) -> bool:
        return self.name == name

    predicate.__name__ = predicate.__qualname__ = f"is_{name}"
    predicate.__doc__ = f"Whether this is {name} (Triton's dtype.is_{name})."
    return predicate


def _exponent_bias(self: dtype) -> int:
    """The exponent bias of a float dtype (15 for fp16, 127 for fp32, ...)."""
    bias = DTYPE_NAMES.get(self.name)
    if bias is None:
        raise AttributeError(f"{self.name} has no exponent_bias: it is not a float type")
    return bias


def _codegen_name(self: dtype) -> str:
    """Triton's spelling in code: ``float16``, ``bfloat16``, ``int32``, ..."""
    return _PUBLIC_NAMES.get(self.name, self.name)


def _mangle(self: dtype) -> str:
    """Triton's short name in mangled function names: ``i32``, ``u8``, ``fp16``, ..."""
    if self.is_int():
        return ("i" if self.is_int_signed() else "u") + str(self.int_bitwidth)
    if self.is_ptr():
        return "P" + self.element_ty.mangle()  # type: ignore[attr-defined]
    return self.name


_DTYPE_MEMBERS = {
    **{f"is_{name}": _name_predicate(name) for name in DTYPE_NAMES},
    "itemsize": property(lambda self: self.primitive_bitwidth // 8,
                         doc="Bytes per element (primitive_bitwidth // 8; 0 for int1)."),
    "exponent_bias": property(_exponent_bias),
    "cache_key_part": property(lambda self: self.name, doc="The name (Triton's cache key)."),
    "codegen_name": _codegen_name,
    "mangle": _mangle,
    "is_dtype": staticmethod(lambda type_str: type_str in dtype._IR_NAMES),
    "is_void": lambda self: False,  # a method: kernels call x.dtype.is_void()
    "is_block": staticmethod(lambda: False),
    "is_const": lambda self: False,
    "with_element_ty": lambda self, element_ty: element_ty,
}
# A block type's Triton attributes beyond its shape and element type.
_BLOCK_MEMBERS = {
    "get_block_shapes": lambda self: tuple(self.shape),
    "nbytes": property(lambda self: self.numel * (self.element_ty.primitive_bitwidth // 8)),
    "with_element_ty": lambda self, element_ty: block_type(element_ty, self.shape),
    "is_ptr": lambda self: False,
    "mangle": lambda self: f"{self.element_ty.mangle()}S{'_'.join(map(str, self.shape))}S",
    "primitive_bitwidth": property(lambda self: self.element_ty.primitive_bitwidth),
}


def install() -> None:
    """Sets the tables' members on dtype, pointer_type and block_type."""
    for name, member in _DTYPE_MEMBERS.items():
        setattr(dtype, name, member)
    pointer_type.is_const = lambda self: self.const  # type: ignore[method-assign]
    for name, member in _BLOCK_MEMBERS.items():
        setattr(block_type, name, member)
