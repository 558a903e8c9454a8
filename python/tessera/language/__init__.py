"""tessera.language: the kernel language, with triton.language's names and semantics.

Import it as ``import tessera.language as tl``; a Triton elementwise kernel ports by changing
its imports. Everything public is re-exported here explicitly; semantic.py (the type rules)
is private. Math functions are also reachable as ``tl.math.exp`` (math.py), as Triton's.
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
    device_assert,
    device_print,
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
from .matrix import dot, permute, trans
from . import math
from .atomic import (
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_xchg,
    atomic_xor,
)
from .math import (
    abs,
    ceil,
    clamp,
    cos,
    div_rn,
    erf,
    exp,
    exp2,
    fdiv,
    floor,
    fma,
    log,
    log2,
    rsqrt,
    sigmoid,
    sin,
    softmax,
    sqrt,
    sqrt_rn,
    umulhi,
)
from .reduction import (
    argmax,
    argmin,
    associative_scan,
    cumprod,
    cumsum,
    max,
    min,
    reduce,
    sum,
    xor_sum,
)

__all__ = [
    "PropagateNan", "arange", "bfloat16", "block_type", "broadcast_to", "cast", "cdiv",
    "constexpr", "device_assert", "device_print", "dtype", "expand_dims", "float8e4nv",
    "float8e5", "float16", "float32", "float64", "full", "int1", "int8", "int16", "int32", "int64", "load", "maximum", "minimum",
    "num_programs", "pointer_type", "program_id", "range", "reshape", "static_assert",
    "static_print", "static_range", "store", "str_to_ty", "tensor", "uint8", "uint16",
    "uint32", "uint64", "where", "zeros", "zeros_like",
    "dot", "permute", "trans",
    "argmax", "argmin", "associative_scan", "cumprod", "cumsum", "max", "min", "reduce", "sum",
    "xor_sum",
    "math", "abs", "ceil", "clamp", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma",
    "log", "log2", "rsqrt", "sigmoid", "sin", "softmax", "sqrt", "sqrt_rn", "umulhi",
    "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or",
    "atomic_xchg", "atomic_xor",
]

# fp8 formats beyond float8e4nv / float8e5, and inline PTX.
from .core import float8e4b8, float8e4b15, float8e5b16  # noqa: E402

__all__ += ["float8e4b8", "float8e4b15", "float8e5b16"]
from .inline_asm import inline_asm_elementwise  # noqa: E402

__all__ += ["inline_asm_elementwise"]
