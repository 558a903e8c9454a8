"""How a kernel call is specialized: argument kinds, dtypes, divisibility (as Triton).

Per non-constexpr argument the compiled code depends on: the type ("*fp32", "i32", "fp32", ...),
whether the pointer or integer is divisible by 16 (16-byte-aligned pointers allow vector
accesses), whether an integer equals 1, and whether a tensor addresses 2**31 elements or more
(``spans_2_31``: its offsets need int64 arithmetic, which the widen_offsets pass gives only
the kernels specialized for such tensors). ``specialization_key`` runs on every launch, so it
dispatches on the argument's Python type to a small function chosen once per type; the
readable type strings are made from the key only when a kernel is compiled (``describe``).

The C++ fast launch path computes the same specialization itself
(cpp/bindings/python_specialize.h): it cannot be the only one, since it declines what it does
not know (NumPy arrays, TensorDescriptors, warmup stand-ins, ints beyond 64 bits) and leaves
those calls here; and this one cannot be the only one, since the fast path runs no Python. Its
keys may be finer than these (two calls with equal C++ words must have equal keys here), never
coarser, and each word must describe what ``describe`` says of the key:
tests/python/runtime/test_specialization_pin.py checks both on random argument lists through
``tessera._tessera.runtime.specialization_words``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple

from ..type_codes import dtype_code


def integer_code(value: int) -> str:
    if -(2 ** 31) <= value < 2 ** 31:
        return "i32"
    if -(2 ** 63) <= value < 2 ** 63:
        return "i64"
    if 0 <= value < 2 ** 64:
        return "u64"
    raise OverflowError(f"integer {value} does not fit in 64 bits")


LARGE_SPAN = 2 ** 31  # elements from a tensor's first one that an int32 offset cannot reach


def spans_2_31(shape, strides) -> bool:
    """Whether a tensor of this shape and these strides (in elements) addresses 2**31 elements
    or more from its first one: its span 1 + sum((size - 1) * |stride|) (0 when it is empty),
    so that a strided view counts the memory it reaches, and a broadcast (stride 0) only what
    it reads. The C++ fast path computes the same (python_specialize.h, spansLargeTensor)."""
    span = 1
    for size, stride in zip(shape, strides):
        if size == 0:
            return False
        span += (size - 1) * abs(stride)
    return span >= LARGE_SPAN


def _large_in_bytes(shape, strides, itemsize: int) -> bool:
    """spans_2_31 of an array whose strides are in bytes (None: row-major), as NumPy's and the
    array interfaces give them."""
    if strides is None:
        return spans_2_31(shape, _row_major(shape))
    return spans_2_31(shape, [abs(s) // itemsize for s in strides])


def _row_major(shape) -> list:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return strides[::-1]


# ----------------------------------------------------------------------------- per-type keys
# Each returns a small hashable tuple: ("int", code, div16, eq1), ("float",), ("bool",) or
# ("tensor", dtype, aligned16, large) (large: spans_2_31). Framework dtype objects are hashable
# and cheap to compare.

def _key_bool(v: bool) -> tuple:
    return ("bool",)


def _key_int(v: int) -> tuple:
    return ("int", integer_code(v), v % 16 == 0, v == 1)


def _key_float(v: float) -> tuple:
    return ("float",)


def _key_torch(v) -> tuple:
    return ("tensor", v.dtype, v.data_ptr() % 16 == 0, spans_2_31(v.shape, v.stride()))


def _key_cuda_array_interface(v) -> tuple:
    try:
        interface = v.__cuda_array_interface__
        pointer = interface["data"][0]
        large = _large_in_bytes(interface["shape"], interface.get("strides"),
                                int(interface["typestr"][2:]))
    except Exception:  # noqa: BLE001 - a class whose host buffers refuse the CUDA interface
        pointer = _host_or_device_pointer(v)
        large = _large_in_bytes(v.shape, getattr(v, "strides", None), v.dtype.itemsize)
    return ("tensor", v.dtype, pointer % 16 == 0, large)


def _key_numpy(v) -> tuple:
    if v.shape == ():                       # a NumPy scalar array
        return ("scalar", v.dtype)
    return ("tensor", v.dtype, v.__array_interface__["data"][0] % 16 == 0,
            _large_in_bytes(v.shape, v.strides, v.itemsize))


def _key_numpy_scalar(v) -> tuple:
    return ("scalar", v.dtype)


def _key_none(v) -> tuple:
    # As Triton: None for a runtime parameter specializes it as a constexpr None, so that
    # `if ptr is not None:` folds in the kernel.
    return ("none",)


def _host_or_device_pointer(v) -> int:
    """The address of an array whose class offers __cuda_array_interface__ but whose object may
    live on the host (a JAX CPU array raises for it): the CUDA interface, else DLPack, else
    the NumPy array interface."""
    try:
        return v.__cuda_array_interface__["data"][0]
    except Exception:  # noqa: BLE001 - any framework's "not a CUDA buffer" error
        pass
    pointer = getattr(v, "unsafe_buffer_pointer", None)  # JAX
    if pointer is not None:
        try:
            return int(pointer())
        except Exception:  # noqa: BLE001
            pass
    if hasattr(v, "__dlpack__"):
        from ..device import driver
        try:
            return driver.tensor_info(v)[0]
        except Exception:  # noqa: BLE001
            pass
    interface = getattr(v, "__array_interface__", None)
    if interface is not None:
        return interface["data"][0]
    raise TypeError(f"cannot find the memory of this {type(v).__name__}: it has neither a "
                    "usable __cuda_array_interface__, DLPack nor __array_interface__")


def _key_array_any_device(v) -> tuple:  # JAX: dense arrays, row-major
    return ("tensor", v.dtype, _host_or_device_pointer(v) % 16 == 0,
            _large_in_bytes(v.shape, None, 1))


def _key_dlpack(v) -> tuple:
    from ..device import driver         # only for exotic tensor types
    ptr, _, _, _, shape, strides = driver.tensor_info(v)
    return ("tensor", v.dtype, ptr % 16 == 0, spans_2_31(shape, strides))


def _key_wrapper(v) -> tuple:
    # A reinterpreted tensor (the same element width): its base's extent.
    return ("tensor", v.dtype, v.data_ptr() % 16 == 0, argument_key(v.base)[3])


def _key_jit_function(v) -> tuple:
    # As Triton: a @jit function passed for a runtime parameter (alone or in a tuple, e.g. a
    # namedtuple holding a function and its captured arguments) is a compile-time value; the
    # kernel calls it like a function it names.
    return ("constexpr", v)


def _key_unsupported(v) -> tuple:
    raise TypeError(f"unsupported argument of type {type(v).__name__}")


def _key_function_for(cls: type) -> Callable[[Any], tuple]:
    from ..tools.tensor_descriptor import TensorDescriptor
    if issubclass(cls, TensorDescriptor):  # ("tensordesc", dtype, block, padding, 16-dims)
        from . import descriptor_arguments
        return descriptor_arguments.key
    if cls is bool:
        return _key_bool
    if cls is type(None):
        return _key_none
    if issubclass(cls, tuple):  # a tuple argument: each element specialized on its own
        from . import tuple_arguments
        return lambda value: tuple_arguments.key(value, argument_key)
    if getattr(cls, "__tessera_jit__", False) is True:  # a JITFunction (language.core.is_jit)
        return _key_jit_function
    if getattr(cls, "__tessera_stand_in__", False):  # kernel.warmup's stand-ins (stand_ins.py)
        return cls.specialization_key
    if issubclass(cls, int):
        return _key_int
    if issubclass(cls, float):
        return _key_float
    from ..reinterpret import TensorWrapper
    if issubclass(cls, TensorWrapper):
        return _key_wrapper
    module = cls.__module__.split(".", 1)[0]
    if module == "torch" and hasattr(cls, "data_ptr"):
        return _key_torch
    if module == "numpy":
        return _key_numpy if hasattr(cls, "__array_interface__") and cls.__name__ == "ndarray" \
            else _key_numpy_scalar
    if module in ("jax", "jaxlib"):
        return _key_array_any_device  # one class for CPU and GPU buffers
    if hasattr(cls, "__cuda_array_interface__"):
        return _key_cuda_array_interface
    if hasattr(cls, "__dlpack__") and hasattr(cls, "dtype"):
        return _key_dlpack
    return _key_unsupported


_KEY_FUNCTIONS: Dict[type, Callable[[Any], tuple]] = {}


def argument_key(value: Any) -> tuple:
    """The specialization of one runtime argument (see the key forms above)."""
    fn = _KEY_FUNCTIONS.get(type(value))
    if fn is None:
        fn = _KEY_FUNCTIONS[type(value)] = _key_function_for(type(value))
    return fn(value)


def masked_key(key: tuple, flags: int) -> tuple:
    """``key`` without what @jit(do_not_specialize...) leaves out (launch_options.
    specialize_flags: 1 = divisibility / alignment, 2 = equality to 1). A tensor's extent
    (spans_2_31) is never left out: a kernel compiled for int32 offsets is wrong for it."""
    kind = key[0]
    if kind == "int":
        return ("int", key[1], key[2] and not flags & 1, key[3] and not flags & 2)
    if kind == "tuple":
        from . import tuple_arguments
        return tuple_arguments.masked(key, flags, masked_key)
    if kind in ("tensor", "typed"):
        return (kind, key[1], key[2] and not flags & 1, key[3])
    return key


class Described(NamedTuple):
    """What the compiler is told of one argument key (see :func:`describe`)."""
    type: str          # "*fp16", "i32", ...
    divisible: bool    # by 16 (pointers: 16-byte aligned)
    one: bool          # an int equal to 1
    large: bool = False  # a tensor addressing 2**31 elements or more (spans_2_31)


def describe(key: tuple) -> Described:
    """(type string such as "*fp16" or "i32", divisible by 16, equal to 1, large tensor) of an
    argument key."""
    kind = key[0]
    if kind == "int":
        return Described(key[1], key[2], key[3])
    if kind == "typed":  # a warmup stand-in: (type string, 16-byte aligned, large)
        return Described(key[1], key[2], False, key[3])
    if kind == "bool":
        return Described("i1", False, False)
    if kind == "float":
        return Described("fp32", False, False)
    if kind == "scalar":
        return Described(dtype_code(key[1]), False, False)
    if kind == "tensordesc":  # its offsets are int64 already (its strides are)
        from . import descriptor_arguments
        return Described(descriptor_arguments.type_text(key, dtype_code(key[1])), False, False)
    return Described("*" + dtype_code(key[1]), key[2], False, key[3])
