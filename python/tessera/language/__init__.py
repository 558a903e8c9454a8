"""tessera.language: the kernel language, with triton.language's names and semantics.

Import it as ``import tessera.language as tl``; a Triton elementwise kernel ports by changing
its imports. Everything public is re-exported here explicitly; semantic.py (the type rules)
is private. Math functions (exp, log, sqrt, ...) will live in math.py (issue 4).
"""
from .core import (
    PropagateNan,
    arange,
    bfloat16,
    block_type,
    broadcast_to,
    cast,
    cdiv,
    constexpr,
    dtype,
    expand_dims,
    float8e4nv,
    float8e5,
    float16,
    float32,
    float64,
    full,
    int1,
    int8,
    int16,
    int32,
    int64,
    load,
    maximum,
    minimum,
    num_programs,
    pointer_type,
    program_id,
    range,
    reshape,
    static_assert,
    static_print,
    static_range,
    store,
    str_to_ty,
    tensor,
    uint8,
    uint16,
    uint32,
    uint64,
    where,
    zeros,
    zeros_like,
)

__all__ = [
    "PropagateNan", "arange", "bfloat16", "block_type", "broadcast_to", "cast", "cdiv",
    "constexpr", "dtype", "expand_dims", "float8e4nv", "float8e5", "float16", "float32",
    "float64", "full", "int1", "int8", "int16", "int32", "int64", "load", "maximum", "minimum",
    "num_programs", "pointer_type", "program_id", "range", "reshape", "static_assert",
    "static_print", "static_range", "store", "str_to_ty", "tensor", "uint8", "uint16",
    "uint32", "uint64", "where", "zeros", "zeros_like",
]
