"""The user-facing kernel language: dtypes, constexpr, tensor and the builtin functions.

As Triton's core.py: this file says *what* each builtin takes and documents it; the type rules
and the IR each builtin builds live in semantic.py. Builtins run only while the front end
(tessera.frontend) compiles a @tessera.jit function: it passes ``_semantic``, the object that
owns the IR builder. Calling one from ordinary Python raises a clear error.
"""
from __future__ import annotations

import builtins as _py
import enum
import functools
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, TypeVar, Union

from ..errors import StaticAssertionError

T = TypeVar("T")

TESSERA_BUILTIN = "__tessera_builtin__"


def builtin(fn: T) -> T:
    """Marks a function as a language builtin: the front end calls it with ``_semantic``."""

    @functools.wraps(fn)  # type: ignore[arg-type]
    def wrapper(*args, **kwargs):
        if kwargs.get("_semantic") is None:
            name = getattr(fn, "__name__", "builtin")
            raise RuntimeError(f"tessera.language.{name} can only be called inside a "
                               "@tessera.jit function")
        return fn(*args, **kwargs)  # type: ignore[operator]

    setattr(wrapper, TESSERA_BUILTIN, True)
    return wrapper  # type: ignore[return-value]


def is_builtin(obj: Any) -> bool:
    return bool(getattr(obj, TESSERA_BUILTIN, False))


def is_jit(obj: Any) -> bool:
    """A @jit function (a JITFunction, python/tessera/jit.py) or any object marked
    ``__tessera_jit__ = True`` with a callable ``fn``: what the front end inlines when a kernel
    calls it (the language's builtins that take functions, reduce and map_elementwise, check
    their arguments with it)."""
    return getattr(obj, "__tessera_jit__", False) is True and callable(getattr(obj, "fn", None))


class HelperFunction:
    """A function written in the language that kernels call (a @jit helper, :func:`is_jit`),
    inlined by the front end: the language's own, such as tl.rand (random.py), which are made
    here because tessera.jit's JITFunction, the launchable kernel, stands floors above the
    language. Calling one outside a kernel raises, as calling a JITFunction does."""

    __tessera_jit__ = True

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self.fn.__name__}: a @jit function is called inside a kernel, "
                           "where it is inlined")

    def __repr__(self) -> str:
        return f"<tessera @jit helper {self.fn.__module__}.{self.fn.__qualname__}>"


def helper(fn: T) -> T:
    """Marks a function of the language written in the language itself (see HelperFunction)."""
    return HelperFunction(fn)  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------
# dtypes
# --------------------------------------------------------------------------------------------


class dtype:
    """A scalar element type, named as Triton's (``tl.float32.name == "fp32"``).

    Unsigned integers map to the IR integer of the same width; the signedness stays here, in
    the front end, and picks the IR op (divui, cmpi ult, shrui, extui, uitofp, ...).
    """

    SINT_TYPES = ("int8", "int16", "int32", "int64")
    UINT_TYPES = ("int1", "uint8", "uint16", "uint32", "uint64")  # int1 is unsigned, as Triton
    FP_TYPES = ("fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32",
                "fp64")
    STANDARD_FP_TYPES = ("fp16", "bf16", "fp32", "fp64")
    if TYPE_CHECKING:  # is_fp16(), itemsize, ...: installed from one table (dtype_table.py)
        def __getattr__(self, name: str) -> Any: ...
    _IR_NAMES = {"int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
                 "uint8": "i8", "uint16": "i16", "uint32": "i32", "uint64": "i64",
                 "fp8e4nv": "f8e4m3", "fp8e5": "f8e5m2", "fp16": "f16", "bf16": "bf16",
                 "fp32": "f32", "fp64": "f64", "fp8e4b15": "f8e4m3b15", "fp8e4b8": "f8e4m3fnuz",
                 "fp8e5b16": "f8e5m2fnuz"}
    # Explicit mantissa bits of each float format, as Triton's dtype (the exponent bias:
    # dtype_table.py). The fp8
    # formats: e4nv = OCP e4m3fn (NaN, no inf), e5 = e5m2 (IEEE-like), e4b15 = Triton's e4m3
    # with bias 15 and no NaN/inf, e4b8/e5b16 = the "fnuz" formats (one NaN, no -0, no inf).
    _MANTISSA = {"fp8e4b15": 3, "fp8e4nv": 3, "fp8e4b8": 3, "fp8e5": 2, "fp8e5b16": 2,
                 "fp16": 10, "bf16": 7, "fp32": 23, "fp64": 52}

    class KIND(enum.IntEnum):
        """Kinds for the promotion of Python scalars: bool < integral < floating."""
        BOOL = 0
        BOOLEAN = 0  # Triton's name for it
        INTEGRAL = 1
        FLOATING = 2

    class SIGNEDNESS(enum.Enum):
        """``int_signedness`` of integer dtypes, as Triton's."""
        SIGNED = 0
        UNSIGNED = 1

    def __init__(self, name: str) -> None:
        if name not in self._IR_NAMES:
            raise ValueError(f"unknown dtype '{name}'")
        self.name = name
        if name in self.FP_TYPES:
            self.primitive_bitwidth = 8 if name.startswith("fp8") else int(name[2:])
            self.fp_mantissa_width = self._MANTISSA[name]
        else:
            self.int_bitwidth = int(name.split("int")[-1])
            self.primitive_bitwidth = self.int_bitwidth
            self.int_signedness = (dtype.SIGNEDNESS.SIGNED if name in self.SINT_TYPES
                                   else dtype.SIGNEDNESS.UNSIGNED)

    # Predicates, as Triton's dtype.
    def is_ptr(self) -> bool:
        return False

    def is_int(self) -> bool:
        return self.name in self.SINT_TYPES or self.name in self.UINT_TYPES

    def is_int_signed(self) -> bool:
        return self.name in self.SINT_TYPES

    def is_int_unsigned(self) -> bool:
        return self.name in self.UINT_TYPES

    def is_bool(self) -> bool:
        return self.name == "int1"

    def is_floating(self) -> bool:
        return self.name in self.FP_TYPES

    def is_standard_floating(self) -> bool:
        return self.name in self.STANDARD_FP_TYPES

    def is_fp8(self) -> bool:
        return self.name.startswith("fp8")

    # is_fp16(), is_int64(), is_uint8(), ...: generated below from DTYPE_NAMES.

    def kind(self) -> "dtype.KIND":
        if self.is_bool():
            return dtype.KIND.BOOL
        return dtype.KIND.INTEGRAL if self.is_int() else dtype.KIND.FLOATING

    @property
    def scalar(self) -> "dtype":
        return self

    def get_int_max_value(self) -> int:
        if self.is_int_signed():
            return 2 ** (self.int_bitwidth - 1) - 1
        return 2 ** self.int_bitwidth - 1

    def get_int_min_value(self) -> int:
        return -(2 ** (self.int_bitwidth - 1)) if self.is_int_signed() else 0

    def to_ir(self, builder: Any = None):
        """The IR type (``ir.scalar("f32")``, ...); ``builder`` (Triton's) is not needed."""
        from .._tessera import ir
        return ir.scalar(self._IR_NAMES[self.name])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, dtype) and self.name == other.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"tl.{_PUBLIC_NAMES.get(self.name, self.name)}"


class pointer_type(dtype):
    """A pointer to ``element_ty`` in global memory: the dtype of ``*fp32`` arguments."""

    def __init__(self, element_ty: Any, address_space: int = 1, const: bool = False) -> None:
        # A block pointer's type points to a block_type, as Triton's (block_ptr.dtype).
        if not isinstance(element_ty, (dtype, block_type)):
            raise TypeError(f"pointer_type needs a dtype, got {element_ty!r}")
        self.element_ty: Any = element_ty
        self.address_space = address_space
        self.const = bool(const)  # Triton's read-only pointers: stores through them fail
        self.name = f"pointer<{element_ty}>"
        self.primitive_bitwidth = 64

    def is_ptr(self) -> bool:
        return True

    def is_int(self) -> bool:
        return False

    def is_int_signed(self) -> bool:
        return False

    def is_int_unsigned(self) -> bool:
        return False

    def is_floating(self) -> bool:
        return False

    def is_standard_floating(self) -> bool:
        return False

    def to_ir(self, builder: Any = None):
        from .._tessera import ir
        return ir.pointer(self.element_ty.to_ir(), self.address_space)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, pointer_type) and self.element_ty == other.element_ty
                and self.address_space == other.address_space)

    def __hash__(self) -> int:
        return hash((self.name, self.address_space))

    def __repr__(self) -> str:
        return self.name


class block_type:
    """The type of a tensor value: element dtype plus shape (``tensor.type`` when shaped)."""

    def __init__(self, element_ty: dtype, shape: Sequence[int]) -> None:
        self.element_ty: Any = element_ty
        self.shape = list(shape)
        self.numel = 1
        for size in self.shape:
            self.numel *= size
        self.name = f"<{self.shape}, {element_ty}>"

    @property
    def scalar(self) -> dtype:
        return self.element_ty

    def is_block(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, block_type) and self.element_ty == other.element_ty
                and self.shape == other.shape)

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


int1 = dtype("int1")
int8 = dtype("int8")
int16 = dtype("int16")
int32 = dtype("int32")
int64 = dtype("int64")
uint8 = dtype("uint8")
uint16 = dtype("uint16")
uint32 = dtype("uint32")
uint64 = dtype("uint64")
float8e4nv = dtype("fp8e4nv")
float8e5 = dtype("fp8e5")
float8e4b15 = dtype("fp8e4b15")
float8e4b8 = dtype("fp8e4b8")
float8e5b16 = dtype("fp8e5b16")
float16 = dtype("fp16")
bfloat16 = dtype("bf16")
float32 = dtype("fp32")
float64 = dtype("fp64")

_PUBLIC_NAMES = {"fp8e4nv": "float8e4nv", "fp8e5": "float8e5", "fp8e4b15": "float8e4b15",
                 "fp8e4b8": "float8e4b8", "fp8e5b16": "float8e5b16", "fp16": "float16",
                 "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}

# Type strings of kernel signatures, as Triton's ("*fp32", "i32", "u64", ...).
_SIGNATURE_TYPES = {"i1": int1, "i8": int8, "i16": int16, "i32": int32, "i64": int64,
                    "u1": int1, "u8": uint8, "u16": uint16, "u32": uint32, "u64": uint64,
                    "fp8e4nv": float8e4nv, "fp8e5": float8e5, "fp8e4b15": float8e4b15,
                    "fp8e4b8": float8e4b8, "fp8e5b16": float8e5b16, "fp16": float16,
                    "bf16": bfloat16,
                    "fp32": float32, "fp64": float64, "B": int1}


def str_to_ty(text: str) -> dtype:
    """Parses a signature type string: ``"*fp16"`` -> pointer_type(float16), ``"i32"`` -> int32."""
    if text.startswith("*"):
        return pointer_type(str_to_ty(text[1:]))
    if text in _SIGNATURE_TYPES:
        return _SIGNATURE_TYPES[text]
    for candidate in (text, *(k for k, v in _PUBLIC_NAMES.items() if v == text)):
        if candidate in dtype._IR_NAMES:
            return dtype(candidate)
    raise ValueError(f"unknown type '{text}' in kernel signature")


# --------------------------------------------------------------------------------------------
# constexpr and tensor
# --------------------------------------------------------------------------------------------


class constexpr:
    """A compile-time value. Annotate a kernel parameter ``BLOCK: tl.constexpr`` to make it one,
    or a local ``n: tl.constexpr = BLOCK * 2`` to keep it one (a plain assignment of a number
    makes a runtime scalar, as in Triton). A global must be wrapped: ``SIZE = tl.constexpr(64)``.
    Arithmetic on constexprs runs in Python at compile time.
    """

    def __init__(self, value: Any) -> None:
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __bool__(self) -> bool:
        return bool(self.value)

    def __index__(self) -> int:
        return self.value

    def __eq__(self, other: object) -> bool:
        return self.value == _unwrap(other)

    def __hash__(self) -> int:
        return hash(self.value)


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, constexpr) else value


class PropagateNan(enum.Enum):
    """NaN handling of minimum/maximum: NONE (default) returns the other operand, ALL gives NaN."""
    NONE = 0
    ALL = 1


class shape_list(list):
    """``tensor.shape``: a list of ints that also concatenates with and compares equal to
    tuples, as Triton's tuple-valued shapes do (``x.shape[:-1] + (2,)``, ``x.shape == (4, 8)``)."""

    def __add__(self, other: Any) -> "shape_list":  # type: ignore[override]
        return shape_list(list(self) + list(other))

    def __radd__(self, other: Any) -> "shape_list":
        return shape_list(list(other) + list(self))

    def __getitem__(self, index: Any) -> Any:
        item = list.__getitem__(self, index)
        return shape_list(item) if isinstance(index, slice) else item

    def __eq__(self, other: object) -> bool:
        return list.__eq__(self, list(other) if isinstance(other, tuple) else other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]


class tensor:
    """A runtime value of a kernel: an IR scalar (``shape == []``) or a tile (a block of values).

    ``handle`` is the ``ir.Value``; ``dtype`` the element dtype (signedness included); ``shape``
    a list of ints. Operators (+ - * / // % & | ^ << >> ~, comparisons, ``x[:, None]``) are
    compiled by the front end with Triton's promotion and broadcasting rules.
    """

    if TYPE_CHECKING:  # the methods: installed from one table (tensor_methods.py)
        def __getattr__(self, name: str) -> Any: ...

    def __init__(self, handle: Any, dtype: dtype, shape: Sequence[int] = ()) -> None:
        self.handle = handle
        self.dtype = dtype
        self.shape = shape_list(int(s) for s in shape)

    @property
    def type(self) -> Union[dtype, block_type]:
        return block_type(self.dtype, self.shape) if self.shape else self.dtype

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(s) for s in self.shape)}]"

    __repr__ = __str__

    def __bool__(self) -> bool:
        raise TypeError("the truth value of a runtime tensor is not known at compile time")

    @builtin
    def to(self, dtype: dtype, fp_downcast_rounding: Optional[str] = None, bitcast: bool = False,
           _semantic=None) -> "tensor":
        """Converts to ``dtype`` (value-preserving where it can; ``bitcast=True`` reinterprets
        the bits). Example: ``y = x.to(tl.float16)``."""
        return cast(self, dtype, fp_downcast_rounding, bitcast, _semantic=_semantic)


# --------------------------------------------------------------------------------------------
# Builtins: program ids, creation, shape, memory, arithmetic helpers, compile-time checks
# --------------------------------------------------------------------------------------------


@builtin
def program_id(axis: int, _semantic=None) -> tensor:
    """The index of this program along ``axis`` (0, 1 or 2) of the launch grid, an int32.
    Example: ``pid = tl.program_id(axis=0)``."""
    return _semantic.program_id(_unwrap(axis))


@builtin
def num_programs(axis: int, _semantic=None) -> tensor:
    """The number of programs along ``axis`` of the launch grid, an int32."""
    return _semantic.num_programs(_unwrap(axis))


@builtin
def arange(start: int, end: int, _semantic=None) -> tensor:
    """The int32 tile ``[start, start+1, ..., end-1]``; the bounds are constexpr and
    ``end - start`` a power of two. Example: ``offs = tl.arange(0, BLOCK)``."""
    return _semantic.arange(_unwrap(start), _unwrap(end))


@builtin
def full(shape: Sequence[int], value: Any, dtype: dtype, _semantic=None) -> tensor:
    """A tile of ``shape`` filled with ``value``. Example: ``tl.full([64], 1.0, tl.float16)``."""
    return _semantic.full(_unwrap(shape), _unwrap(value), _unwrap(dtype))


@builtin
def zeros(shape: Sequence[int], dtype: dtype, _semantic=None) -> tensor:
    """A tile of zeros. Example: ``acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)``."""
    return _semantic.full(_unwrap(shape), 0, _unwrap(dtype))


@builtin
def zeros_like(input: tensor, _semantic=None) -> tensor:
    """A tile of zeros with the shape and dtype of ``input``."""
    return _semantic.full(input.shape, 0, input.dtype)


@builtin
def cast(input: Any, dtype: dtype, fp_downcast_rounding: Optional[str] = None,
         bitcast: bool = False, _semantic=None) -> tensor:
    """Converts ``input`` to ``dtype`` (see ``tensor.to``)."""
    input = _semantic.to_tensor(_unwrap(input))
    if _unwrap(bitcast):
        return _semantic.bitcast(input, _unwrap(dtype))
    return _semantic.cast(input, _unwrap(dtype), _unwrap(fp_downcast_rounding))


@builtin
def expand_dims(input: tensor, axis: Union[int, Sequence[int]], _semantic=None) -> tensor:
    """Inserts dimensions of size 1: at ``axis``, or at each axis of a sequence (indices of
    the result, as Triton's). Example: ``tl.expand_dims(x, 1)`` is ``x[:, None]``;
    ``tl.expand_dims(x, (0, 2))`` makes [N] into [1, N, 1]."""
    input = _semantic.to_tensor(_unwrap(input))
    axis = _unwrap(axis)
    axes = [_unwrap(a) for a in axis] if isinstance(axis, (list, tuple)) else [axis]
    rank = len(input.shape) + len(axes)
    for a in axes:
        if not isinstance(a, int) or isinstance(a, bool) or not -rank <= a < rank:
            # Triton's words (its tests match them), the result's rank said here
            raise ValueError(f"expand_dims: invalid axis {a}. Expected {-rank} <= axis < "
                             f"{rank} (the result has rank {rank})")
    axes = [a + rank if a < 0 else a for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"expand_dims got duplicate axes, normalized axes = {axes}")
    for a in sorted(axes):
        input = _semantic.expand_dims(input, a)
    return input


@builtin
def broadcast_to(input: tensor, *shape: int, _semantic=None) -> tensor:
    """Broadcasts ``input`` to ``shape`` (dimensions of size 1 grow; ranks must match)."""
    return _semantic.broadcast_to(_semantic.to_tensor(input), _shape_arg(shape))


@builtin
def reshape(input: tensor, *shape: int, can_reorder: bool = False, _semantic=None) -> tensor:
    """Gives ``input`` a new shape with the same number of elements, in row-major order
    (also with ``can_reorder=True``, which lets Triton reorder them; Tessera never does). An
    empty shape gives the scalar of a one-element tensor. Example: ``tl.reshape(x, 16, 16)``
    or ``x.reshape([BLOCK])``."""
    shape_list = _shape_arg(shape)
    if not shape_list:
        return _semantic.unsplat(_unwrap(input))
    return _semantic.reshape(_semantic.to_tensor(_unwrap(input)), shape_list)


def _shape_arg(shape: Sequence[Any]) -> List[int]:
    if len(shape) == 1 and isinstance(_unwrap(shape[0]), (list, tuple)):
        shape = _unwrap(shape[0])
    return [_unwrap(s) for s in shape]


@builtin
def load(pointer: tensor, mask: Any = None, other: Any = None, boundary_check: Sequence = (),
         padding_option: str = "", cache_modifier: str = "", eviction_policy: str = "",
         volatile: bool = False, _semantic=None) -> tensor:
    """Loads the values ``pointer`` points to. Lanes whose ``mask`` is false are not read and
    give ``other`` (undefined when ``other`` is None). ``mask``/``other`` broadcast to the
    pointer's shape. Example: ``x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)``.
    Through a block pointer (``tl.make_block_ptr``): no mask/other; the dims listed in
    ``boundary_check`` are not read outside the tensor, where the result is 0 or NaN
    (``padding_option="zero"``/``"nan"``) or undefined (``""``)."""
    if _is_block_pointer(pointer):
        from . import block_pointer_semantic
        return block_pointer_semantic.load(
            _semantic, pointer, _unwrap(mask), _unwrap(other), _unwrap(boundary_check),
            _unwrap(padding_option), _unwrap(cache_modifier), _unwrap(eviction_policy),
            bool(_unwrap(volatile)))
    if boundary_check or padding_option:
        raise ValueError("boundary_check and padding_option apply only to block pointers "
                         "(tl.make_block_ptr); mask the load of a tensor of pointers instead")
    return _semantic.load(pointer, _unwrap(mask), _unwrap(other), _unwrap(cache_modifier),
                          _unwrap(eviction_policy), bool(_unwrap(volatile)))


@builtin
def store(pointer: tensor, value: Any, mask: Any = None, boundary_check: Sequence = (),
          cache_modifier: str = "", eviction_policy: str = "", _semantic=None) -> None:
    """Stores ``value`` (cast to the pointee type) where ``mask`` is true.
    Example: ``tl.store(out_ptr + offs, x + y, mask=offs < n)``. Through a block pointer: no
    mask; elements outside the tensor along the dims in ``boundary_check`` are not written."""
    if _is_block_pointer(pointer):
        from . import block_pointer_semantic
        return block_pointer_semantic.store(
            _semantic, pointer, _unwrap(value), _unwrap(mask), _unwrap(boundary_check),
            _unwrap(cache_modifier), _unwrap(eviction_policy))
    if boundary_check:
        raise ValueError("boundary_check applies only to block pointers (tl.make_block_ptr); "
                         "mask the store of a tensor of pointers instead")
    _semantic.store(pointer, _unwrap(value), _unwrap(mask), _unwrap(cache_modifier),
                    _unwrap(eviction_policy))


def _is_block_pointer(value: Any) -> bool:
    from .block_pointer import block_pointer
    return isinstance(value, block_pointer)


@builtin
def where(condition: Any, x: Any, y: Any, _semantic=None) -> tensor:
    """``x`` where ``condition`` is true, else ``y``, elementwise; ``x`` and ``y`` are promoted
    to a common dtype and all three broadcast. Example: ``tl.where(x > 0, x, 0.0)``."""
    return _semantic.where(_unwrap(condition), _unwrap(x), _unwrap(y))


@builtin
def minimum(x: Any, y: Any, propagate_nan: PropagateNan = PropagateNan.NONE,
            _semantic=None) -> tensor:
    """Elementwise minimum. For floats a NaN operand loses unless ``propagate_nan=ALL``.
    Example: ``tl.minimum(x, 0.0)``."""
    return _semantic.minimum(_unwrap(x), _unwrap(y), _unwrap(propagate_nan))


@builtin
def maximum(x: Any, y: Any, propagate_nan: PropagateNan = PropagateNan.NONE,
            _semantic=None) -> tensor:
    """Elementwise maximum. For floats a NaN operand loses unless ``propagate_nan=ALL``.
    Example: ``tl.maximum(x, 0.0)`` (ReLU)."""
    return _semantic.maximum(_unwrap(x), _unwrap(y), _unwrap(propagate_nan))


def cdiv(x: Any, div: Any, _semantic=None) -> Any:
    """Ceiling division ``(x + div - 1) // div``. Works on the host (``tessera.cdiv(n, 128)``
    for a grid) and in kernels, where constexpr operands fold at compile time."""
    x, div = _unwrap(x), _unwrap(div)
    if _semantic is None or not (isinstance(x, tensor) or isinstance(div, tensor)):
        return (x + div - 1) // div
    return _semantic.cdiv(x, div)


setattr(cdiv, TESSERA_BUILTIN, True)


@builtin
def static_assert(cond: Any, msg: str = "", _semantic=None) -> None:
    """Fails the compilation (naming the kernel and line) when the constexpr ``cond`` is false.
    Example: ``tl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")``."""
    cond = _unwrap(cond)
    if isinstance(cond, tensor):
        raise TypeError("static_assert's condition could not be determined at compile-time: "
                        f"it is the runtime value {cond}. Make sure that it depends only on "
                        "constexpr values (a plain assignment of a number makes a runtime "
                        "value: annotate the local as `name: tl.constexpr = ...`)")
    if not isinstance(cond, bool) and type(cond).__name__ != "bool_":
        # As Triton: the condition is a comparison or a bool, not any truthy value.
        raise TypeError(f"static_assert's condition must be a compile-time bool, got {cond!r}")
    if not cond:
        raise StaticAssertionError(f"static_assert failed: {_unwrap(msg)}" if msg
                                   else "static_assert failed")


@builtin
def static_print(*values: Any, sep: str = " ", end: str = "\n", file: Any = None,
                 flush: bool = False, _semantic=None) -> None:
    """Prints at compile time, once per compilation, with Python's ``print`` arguments
    (constexpr values as themselves, runtime values as their dtype and shape).
    Example: ``tl.static_print(f"BLOCK={BLOCK}", x)`` prints ``BLOCK=64 fp32[64]``."""
    _py.print(*(_unwrap(v) for v in values), sep=_unwrap(sep), end=_unwrap(end), file=file,
              flush=bool(_unwrap(flush)))


@builtin
def device_print(prefix: str, *args: Any, hex: bool = False, _semantic=None) -> None:
    """Prints ``args`` at run time, one line per element, with the program id and the
    element's index: ``pid (0, 0, 0) idx ( 3) x: 1.500000``. ``prefix`` is a constexpr string;
    ``hex=True`` prints the bits in hexadecimal; pointers print their addresses (``0x...``,
    as C's ``%p``; the interpreter prints the host address a pointer stands for). Python's
    ``print(...)`` in a kernel is the same call. Example: ``tl.device_print("x", x)``."""
    prefix, hex = _unwrap(prefix), _unwrap(hex)
    if not isinstance(prefix, str):
        raise TypeError(f"device_print's prefix must be a constexpr string, got {prefix!r}")
    if not prefix.isascii() or not prefix.isprintable():
        raise ValueError(f"device_print's prefix must be printable ASCII, got {prefix!r}")
    _semantic.device_print(prefix, [_unwrap(a) for a in args], bool(hex))


@builtin
def device_assert(cond: Any, msg: str = "", mask: Any = None, _semantic=None) -> None:
    """Fails the kernel at run time where ``cond`` (a scalar or a tile; non-boolean values
    test ``!= 0``) is false: in interpret mode a KernelAssertionError names the kernel, the
    program id, the line, ``msg`` and the first failing index; on the GPU the CUDA runtime
    reports ``file:line: kernel: ... Assertion `msg` failed`` and the launch fails. Python's
    ``assert cond, msg`` in a kernel is the same call. Where ``mask`` is given, only its true
    lanes are checked. As in Triton, asserts build code only in debug mode
    (``@jit(debug=True)`` or ``TESSERA_DEBUG=1``); otherwise they are checked for types and
    compiled to nothing. Example: ``tl.device_assert(x >= 0, "negative input", mask=offs < n)``."""
    msg, cond, mask = _unwrap(msg), _unwrap(cond), _unwrap(mask)
    if not isinstance(msg, str):
        raise TypeError(f"device_assert's message must be a constexpr string, got {msg!r}")
    cond = _semantic.to_tensor(cond)
    if not _semantic.debug:
        return
    if mask is not None:  # as Triton: cond | ~mask
        cond = _semantic.logical("ori", cond, _semantic.logical_not(_semantic.to_tensor(mask)))
    _semantic.device_assert(cond, msg)


class static_range:
    """An iterator unrolled at compile time: ``for i in tl.static_range(4):`` compiles the body
    four times with ``i`` the constexpr 0, 1, 2, 3. Bounds must be constexpr."""

    def __init__(self, arg1: int, arg2: Optional[int] = None, step: Optional[int] = None,
                 _semantic=None) -> None:
        start, end = (0, arg1) if arg2 is None else (arg1, arg2)
        self.start, self.end = _unwrap(start), _unwrap(end)
        self.step = 1 if step is None else _unwrap(step)

    def values(self) -> _py.range:
        for name, bound in (("start", self.start), ("end", self.end), ("step", self.step)):
            if not isinstance(bound, int):
                raise TypeError(f"static_range's {name} must be a constexpr int, got {bound}")
        return _py.range(self.start, self.end, self.step)


class range:
    """A runtime loop, as Python's ``range`` inside a kernel: ``for i in tl.range(0, n, 2):``
    becomes an IR ``for``. ``num_stages`` is a hint for the software pipeliner (honoured);
    ``loop_unroll_factor`` is recorded on the loop. ``disallow_acc_multi_buffer`` is accepted
    and changes nothing (Tessera never multi-buffers a dot's accumulator). ``flatten`` lets a
    TMA-pipelined loop nested in this one copy across its iterations (a persistent kernel's
    tile loop: the next tile's first stages are copied during this tile's last steps and
    epilogue, as Triton's fused loop nest pipelines across tiles; the loops are not fused:
    docs/perf/matmul_sass.md). ``warp_specialize`` gives a TMA-pipelined loop (TESSERA_TMA,
    sm_90a) a producer warpgroup that issues its copies (docs/perf/warp_specialization.md);
    a loop that cannot be specialized keeps the plain pipeline. Example:
    ``for k in tl.range(0, K, BLOCK_K, num_stages=3):``."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None,
                 num_stages: Optional[int] = None, loop_unroll_factor: Optional[int] = None,
                 disallow_acc_multi_buffer: bool = False, flatten: bool = False,
                 warp_specialize: bool = False, _semantic=None) -> None:
        start, end = (0, arg1) if arg2 is None else (arg1, arg2)
        self.start, self.end = _unwrap(start), _unwrap(end)
        self.step = 1 if step is None else _unwrap(step)
        self.num_stages = _unwrap(num_stages)
        self.loop_unroll_factor = _unwrap(loop_unroll_factor)
        self.disallow_acc_multi_buffer = bool(_unwrap(disallow_acc_multi_buffer))
        self.flatten = bool(_unwrap(flatten))
        self.warp_specialize = bool(_unwrap(warp_specialize))


# Math functions (exp, log, sqrt, abs, ...) are in language/math.py, their type rules in
# language/math_semantic.py.


# Triton's per-dtype predicates and attributes (is_int64(), itemsize, ...), from one table.
from .dtype_table import install as _install_dtype_table  # noqa: E402 (needs the classes)

_install_dtype_table()

# Triton's core.extern / core.extern_elementwise, for user-written extern wrappers (extern.py;
# imported last: it builds on the names above).
from .extern import extern as extern, extern_elementwise as extern_elementwise  # noqa: E402

# Triton's ``tl.core.constexpr_function`` is the same decorator as ``tessera.constexpr_function``
# (one object, so either spelling marks a function the same way).
from ..constexpr_functions import constexpr_function as constexpr_function  # noqa: E402


def _unwrap_if_constexpr(o: Any) -> Any:
    """Triton's ``tl.core._unwrap_if_constexpr``: the value of a constexpr, element-wise inside
    lists and tuples (a list stays a list, a ``tl.tuple`` a ``tl.tuple``); anything else
    unchanged.

    Example: ``_unwrap_if_constexpr([constexpr(2), 3])`` is ``[2, 3]``.
    """
    if isinstance(o, list):
        return [_unwrap_if_constexpr(item) for item in o]
    if isinstance(o, _py.tuple):
        items = [_unwrap_if_constexpr(item) for item in o]
        # A tl.tuple (a tuple subclass taking one iterable) keeps its class, as in Triton.
        return type(o)(items) if type(o) is not _py.tuple else _py.tuple(items)
    return _unwrap(o)


# Triton's ``tl.core._aggregate`` class decorator (aggregate.py).
from .aggregate import _aggregate as _aggregate  # noqa: E402
