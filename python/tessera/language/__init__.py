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
from .block_pointer import (
    advance,
    block_pointer,
    load_tensor_descriptor,
    make_block_ptr,
    make_tensor_descriptor,
    store_tensor_descriptor,
    tensor_descriptor,
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
    "float8e5", "float16", "float32", "float64", "full", "int1", "int8", "int16", "int32",
    "int64", "load", "maximum", "minimum",
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

# Random numbers (Philox), written in the language as @jit helpers.
from . import random as random
from .random import (
    pair_uniform_to_normal,
    philox,
    philox_impl,
    rand,
    rand4x,
    randint,
    randint4x,
    randn,
    randn4x,
    uint_to_uniform_float,
)

__all__ += ["pair_uniform_to_normal", "philox", "philox_impl", "rand", "rand4x",
            "randint", "randint4x", "randn", "randn4x", "uint_to_uniform_float"]

# Compiler hints and the debug barrier.
from .hints import assume, debug_barrier, max_constancy, max_contiguous, multiple_of

__all__ += ["assume", "debug_barrier", "max_constancy", "max_contiguous", "multiple_of"]
__all__ += ["advance", "block_pointer", "load_tensor_descriptor", "make_block_ptr",
            "make_tensor_descriptor", "store_tensor_descriptor", "tensor_descriptor"]
# External device functions: libdevice (tl.extra.cuda.libdevice, tl.extra.libdevice) and
# Triton's generic extern call.
from . import extra
from .extern import extern, extern_elementwise

__all__ += ["extra", "extern", "extern_elementwise"]

# fp8 formats beyond float8e4nv / float8e5, and inline PTX.
from .core import float8e4b8, float8e4b15, float8e5b16  # noqa: E402

__all__ += ["float8e4b8", "float8e4b15", "float8e5b16"]
from .inline_asm import inline_asm_elementwise  # noqa: E402

__all__ += ["inline_asm_elementwise"]

# Shapes, sorting and the rest of Triton's standard library (shape.py, standard.py), then the
# tensor methods, bound from one table (tensor_methods.py) once every function exists.
# (`item` is only a method in Triton: not in __all__.)
from .shape import broadcast, cat, gather, histogram, interleave, join, ravel, split, view
from .shape import item as item
from .standard import (
    TRITON_MAX_TENSOR_NUMEL,
    add,
    bitonic_merge,
    flip,
    mul,
    reduce_or,
    sort,
    sub,
    swizzle2d,
    topk,
)
from . import tensor_methods as _tensor_methods

_tensor_methods.install()

__all__ += [
    "broadcast", "cat", "gather", "histogram", "interleave", "join", "ravel", "split",
    "view", "TRITON_MAX_TENSOR_NUMEL", "add", "bitonic_merge", "flip", "mul", "reduce_or", "sort",
    "sub", "swizzle2d", "topk",
]

# Triton's small language types (tuple, slice, const, constexpr_type, void, pi32_t, condition).
from .compat_types import (  # noqa: E402
    condition,
    const,
    constexpr_type,
    pi32_t,
    slice,
    tuple,
    tuple_type,
    void,
)

__all__ += ["condition", "const", "constexpr_type", "pi32_t", "slice", "tuple", "tuple_type",
            "void"]

# tl.map_elementwise: a scalar @jit function over tensors (elementwise_map.py).
from .elementwise_map import map_elementwise  # noqa: E402

__all__ += ["map_elementwise"]

# tl.dot_scaled: microscaling (MX) matrix products (scaled_dot.py).
from .scaled_dot import dot_scaled  # noqa: E402

__all__ += ["dot_scaled"]


def __getattr__(name: str):
    """Submodules not imported yet (``tl.extra``), else a Triton name Tessera lacks:
    TritonAPINotSupported (an AttributeError) that names it as a Triton API not supported
    yet; the front end reports it at the kernel's line."""
    import importlib
    import importlib.util
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    from .._triton_names import missing_name_error
    raise missing_name_error("triton.language", name, __name__)


# dir(tl) lists the language (__all__), not the modules that implement it (core, *_semantic):
# what a notebook's tab completion and a reader of dir() look for.
def __dir__() -> list:
    return sorted(set(__all__))
