"""Type codes of framework dtypes: torch.float32, a NumPy / CuPy / JAX dtype -> "fp32".

Tessera's type codes (Triton's: "i1", "i32", "u8", "fp16", "bf16", "fp8e4nv", ...) name an
argument's element type in a kernel's signature ("*fp16": a pointer to fp16). Read wherever a
host object's dtype meets a kernel: the specialization of an argument (runtime/
specialization.py), a TensorDescriptor's checks and tensor map (tools/, runtime/), warmup
stand-ins, the benchmark helpers' peak FLOPs (testing/gpu_info.py).

Example::

    >>> import numpy as np
    >>> dtype_code(np.dtype("float16"))
    'fp16'
"""
from __future__ import annotations

from typing import Any, Dict

# Framework dtype names (torch.float32 -> "float32", numpy/cupy/jax dtype.name) -> type codes.
_DTYPE_CODES = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
    "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16",
    # tl dtypes (tessera.reinterpret's TensorWrapper.dtype): their names, where not above
    "int1": "i1", **{name: name for name in ("fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5",
                                            "fp8e5b16", "fp16", "bf16", "fp32", "fp64")},
}

_dtype_cache: Dict[Any, str] = {}


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
