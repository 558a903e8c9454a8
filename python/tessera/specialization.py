"""How a kernel call is specialized: argument kinds, dtypes, divisibility (as Triton).

Per non-constexpr argument the compiled code depends on: the type string ("*fp32", "i32",
"fp32", ...), whether the pointer or integer is divisible by 16 (16-byte-aligned pointers allow
vector accesses), and whether an integer equals 1. Everything here runs on every launch, so it is
kept to attribute reads and dictionary lookups.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

# Framework dtype names (torch.float32 -> "float32", numpy/cupy/jax dtype.name) -> type codes.
_DTYPE_CODES = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}

_dtype_cache: dict = {}


def dtype_code(dtype: Any) -> str:
    """Type code of a framework dtype object (torch, NumPy, CuPy, JAX, ml_dtypes)."""
    code = _dtype_cache.get(dtype)
    if code is None:
        name = getattr(dtype, "name", None) or str(dtype)
        name = name.rsplit(".", 1)[-1]
        code = _DTYPE_CODES.get(name)
        if code is None:
            raise TypeError(f"unsupported tensor dtype {dtype!r}")
        _dtype_cache[dtype] = code
    return code


def data_pointer(obj: Any) -> Optional[int]:
    """Address of a tensor's first element, for any framework (None if not a tensor)."""
    ptr = getattr(obj, "data_ptr", None)
    if ptr is not None and callable(ptr):              # torch
        return ptr()
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:                                # CuPy, JAX (single device), numba
        return cai["data"][0]
    ctypes_ = getattr(obj, "ctypes", None)
    if ctypes_ is not None and hasattr(obj, "__array_interface__"):  # NumPy
        return obj.__array_interface__["data"][0]
    if hasattr(obj, "unsafe_buffer_pointer"):          # JAX without CAI
        return obj.unsafe_buffer_pointer()
    return None


def is_tensor(obj: Any) -> bool:
    return hasattr(obj, "dtype") and (hasattr(obj, "__dlpack__") or hasattr(obj, "data_ptr")
                                      or hasattr(obj, "__cuda_array_interface__"))


def integer_code(value: int) -> str:
    if -(2 ** 31) <= value < 2 ** 31:
        return "i32"
    if -(2 ** 63) <= value < 2 ** 63:
        return "i64"
    if 0 <= value < 2 ** 64:
        return "u64"
    raise OverflowError(f"integer {value} does not fit in 64 bits")


def specialize(value: Any) -> Tuple[str, bool, bool]:
    """(type code, divisible by 16, equal to 1) of one runtime argument."""
    if isinstance(value, bool):
        return "i1", False, False
    if isinstance(value, int):
        return integer_code(value), value % 16 == 0, value == 1
    if isinstance(value, float):
        return "fp32", False, False
    if is_tensor(value):
        ptr = data_pointer(value)
        return "*" + dtype_code(value.dtype), ptr is not None and ptr % 16 == 0, False
    # NumPy scalars
    dtype = getattr(value, "dtype", None)
    if dtype is not None and getattr(value, "shape", None) == ():
        return dtype_code(dtype), False, False
    raise TypeError(f"unsupported argument of type {type(value).__name__}")
