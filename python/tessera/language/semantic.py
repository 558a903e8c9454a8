"""The type rules of the kernel language and the tile IR each builtin builds.

As Triton's semantic.py: implicit promotion (computation_type), Python-scalar ("weak") typing,
broadcasting, casts, and one method per operator or builtin. The front end
(tessera.frontend.ast_to_ir) calls these with ``tensor`` objects or Python numbers; every
method returns a ``tensor`` whose handle is an ``ir.Value`` built through the shared
``ir.Builder`` (which carries the current source location). Type errors are TypeError or
ValueError; the front end turns them into CompilationError at the offending expression.
"""
from __future__ import annotations

import warnings
from typing import Any, List, Optional, Sequence, Tuple

from .._tessera import ir
from . import core as tl
from .core import dtype, tensor
from .reduction_semantic import ReductionSemantic
from .math_semantic import MathSemantic
from .atomic_semantic import AtomicSemantic
from .shape_semantic import ShapeSemantic


MAX_TENSOR_NUMEL = 1 << 20


def check_tile_size(op: str, shape: Sequence[int]) -> None:
    """Every tile an op makes (ranges, splats, broadcasts, loads, ...) holds at most
    MAX_TENSOR_NUMEL elements, as in Triton: larger tiles would take minutes of code generation
    and more registers than a program has, so they are refused while tracing, at their line."""
    numel = 1
    for size in shape:
        numel *= size
    if numel > MAX_TENSOR_NUMEL:
        raise ValueError(f"{op} would make a tile of {numel} elements (shape {list(shape)}); "
                         f"a tile holds at most {MAX_TENSOR_NUMEL} (2**20) elements")


class IncompatibleTypeError(TypeError):
    def __init__(self, type_a: dtype, type_b: dtype) -> None:
        super().__init__(f"invalid operands of type {type_a} and {type_b}")


def is_number(x: Any) -> bool:
    """A Python scalar (bool, int or float): the "weakly typed" operands of Triton's rules."""
    return isinstance(x, (bool, int, float)) and not isinstance(x, tensor)


def to_tensor_type(x: Any) -> dtype:
    """The dtype a Python scalar gets on its own: bool -> int1; int -> the first of int32,
    uint32, int64, uint64 that holds it; float -> fp32 unless only fp64 can hold it."""
    if isinstance(x, bool):
        return tl.int1
    if isinstance(x, int):
        for ty, low, high in ((tl.int32, -2**31, 2**31), (tl.uint32, 0, 2**32),
                              (tl.int64, -2**63, 2**63), (tl.uint64, 0, 2**64)):
            if low <= x < high:
                return ty
        raise ValueError(f"integer {x} does not fit in 64 bits")
    if isinstance(x, float):
        magnitude = abs(x)
        if (magnitude in (0.0, float("inf")) or x != x
                or 2.0**-126 <= magnitude <= (2 - 2**-23) * 2.0**127):
            return tl.float32
        return tl.float64
    raise TypeError(f"cannot convert {x!r} of type {type(x).__name__} to a tensor")


def integer_promote(a: dtype, b: dtype) -> dtype:
    """C's usual arithmetic conversions on integer dtypes (Triton's integer_promote_impl)."""
    if a.int_signedness == b.int_signedness:
        return a if a.int_bitwidth > b.int_bitwidth else b
    if a.is_int_unsigned():
        return a if a.int_bitwidth >= b.int_bitwidth else b
    return b if b.int_bitwidth >= a.int_bitwidth else a


def computation_type(a: dtype, a_is_scalar: bool, b: dtype, b_is_scalar: bool,
                     div_or_mod: bool) -> dtype:
    """The dtype both operands of an arithmetic operator are converted to (Triton's
    computation_type_impl); ``*_is_scalar`` marks Python scalars, which only lift the kind."""
    if a_is_scalar != b_is_scalar:
        scalar_ty, tensor_ty = (a, b) if a_is_scalar else (b, a)
        if scalar_ty.kind() <= tensor_ty.kind():
            # fp16/bf16 have no native division or remainder: compute them in fp32.
            if div_or_mod and tensor_ty in (tl.float16, tl.bfloat16):
                return tl.float32
            return tensor_ty
    if a.is_fp64() or b.is_fp64():
        return tl.float64
    if a.is_fp32() or b.is_fp32():
        return tl.float32
    if a.is_fp16() or b.is_fp16():
        return tl.float32 if div_or_mod else tl.float16
    if a.is_bf16() and b.is_bf16():
        return tl.float32 if div_or_mod else tl.bfloat16
    if a.is_bf16() or b.is_bf16():
        return tl.float32
    if a.is_fp8() and b.is_fp8():
        return a if a == b else tl.float16
    if not a.is_int() or not b.is_int():
        raise TypeError(f"unexpected types {a} and {b}")
    if div_or_mod and a.int_signedness != b.int_signedness:
        raise TypeError(f"Cannot use /, // or % with {a} and {b} because they have different "
                        "signedness; cast them to the same signedness")
    return integer_promote(a, b)


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> List[int]:
    """NumPy broadcasting: left-pad the shorter shape with 1s, then size-1 dims grow."""
    if not a or not b:
        return list(a or b)
    a = [1] * (len(b) - len(a)) + list(a)
    b = [1] * (len(a) - len(b)) + list(b)
    out = []
    for index, (left, right) in enumerate(zip(a, b, strict=True)):
        if left != right and 1 not in (left, right):
            raise ValueError(f"cannot broadcast shapes: incompatible dimensions at index {index}:"
                             f" {left} and {right}")
        out.append(right if left == 1 else left)
    return out


def _signed_bits(value: int, width: int) -> int:
    """``value`` modulo 2**width, as the signed number with those bits (the canonical form of
    integer constants in the IR; i1 keeps 0/1)."""
    if width == 1:
        return value & 1
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


class Semantic(ReductionSemantic, MathSemantic, AtomicSemantic, ShapeSemantic):
    """Builds typed tile IR for the language's operators and builtins through ``builder``
    (reductions and scans: reduction_semantic.py; join, sort, gather, ...: shape_semantic.py)."""

    def __init__(self, builder: Any, debug: bool = False) -> None:
        self.builder = builder
        self.debug = debug  # tl.device_assert and `assert` build code (debug mode)
        # The smallest tl.dot extents the target takes (Triton's min_dot_size): None for the GPU
        # rule (16, K 32 for 8-bit), (1, 1, 1) when building for the interpreter.
        self.min_dot_size: Optional[Tuple[int, int, int]] = None
        self.interpreter = False  # building for the interpreter (frontend.build_module sets it)

    # ---- IR plumbing ---------------------------------------------------------------------

    @staticmethod
    def ir_type(element: dtype, shape: Sequence[int]):
        return ir.tensor(list(shape), element.to_ir()) if shape else element.to_ir()

    # Float arithmetic the GPU has no fp8 form of: computed in fp32 and rounded back once
    # (exact: fp32 holds every fp8 product and sum of two fp8 values' rounding needs).
    _FP8_VIA_FP32 = frozenset(("addf", "subf", "mulf", "divf", "fast_divf", "remf", "negf",
                               "maxnumf", "minnumf", "maximumf", "minimumf", "cmpf"))

    def create(self, name: str, operands: Sequence[tensor], element: dtype,
               shape: Sequence[int], **attrs: Any) -> tensor:
        check_tile_size(name, shape)
        if name in self._FP8_VIA_FP32 and any(o.dtype.is_fp8() for o in operands):
            wide = [self.cast(o, tl.float32) if o.dtype.is_fp8() else o for o in operands]
            result = self.create(name, wide, tl.float32 if element.is_fp8() else element, shape,
                                 **attrs)
            return self.cast(result, element) if element.is_fp8() else result
        op = self.builder.create(name, [o.handle for o in operands],
                                 [self.ir_type(element, shape)], attrs)
        return tensor(op.result(0), element, shape)

    def scalar_constant(self, value: Any, element: dtype) -> tensor:
        if element.is_fp8():  # fp8 registers hold codes: make the fp32 constant, then round
            return self.cast(self.scalar_constant(value, tl.float32), element)
        if element.is_floating():
            attr: Any = float(value)
        elif element.is_int():
            attr = _signed_bits(int(value), element.int_bitwidth)
        else:
            raise TypeError(f"cannot make a constant of type {element}")
        return self.create("constant", [], element, [], value=attr)

    def to_tensor(self, x: Any) -> tensor:
        if isinstance(x, tensor):
            return x
        return self.scalar_constant(x, to_tensor_type(x))

    # ---- shapes --------------------------------------------------------------------------

    def splat(self, x: tensor, shape: Sequence[int]) -> tensor:
        if not shape:
            return x
        return self.create("splat", [x], x.dtype, shape)

    def expand_dims(self, x: tensor, axis: int) -> tensor:
        rank = len(x.shape)
        if not isinstance(axis, int) or not -rank - 1 <= axis <= rank:
            raise ValueError(f"expand_dims axis {axis} is out of range for a tensor of rank {rank}")
        axis = axis + rank + 1 if axis < 0 else axis
        shape = x.shape[:axis] + [1] + x.shape[axis:]
        if not x.shape:
            return self.splat(x, shape)
        return self.create("expand_dims", [x], x.dtype, shape, axis=axis)

    def broadcast_to(self, x: tensor, shape: Sequence[int]) -> tensor:
        shape = list(shape)
        if not x.shape:
            return self.splat(x, shape)
        if len(x.shape) != len(shape):
            raise ValueError(f"cannot broadcast, rank mismatch: {x.shape}, {shape}")
        if x.shape == shape:
            return x
        for index, size in enumerate(x.shape):
            if size != shape[index] and size != 1:
                raise ValueError(f"cannot broadcast {x.shape} to {shape}: dimension {index} has "
                                 f"size {size}, not 1 or {shape[index]}")
        return self.create("broadcast", [x], x.dtype, shape)

    def reshape(self, x: tensor, shape: Sequence[int]) -> tensor:
        shape = [int(s) for s in shape]
        if not shape:
            raise ValueError("reshape to a rank-0 shape is not supported")
        numel = 1
        for size in shape:
            numel *= size
        if numel != x.numel:
            raise ValueError(f"reshape cannot change the number of elements ({x.shape} to {shape})")
        if not x.shape:
            return self.splat(x, shape)
        return self.create("reshape", [x], x.dtype, shape)

    def to_shape(self, x: tensor, shape: Sequence[int]) -> tensor:
        """Broadcasts ``x`` to ``shape``, left-padding its rank with size-1 dims first."""
        while x.shape and len(x.shape) < len(shape):
            x = self.expand_dims(x, 0)
        return self.broadcast_to(x, shape)

    def broadcast_values(self, *values: tensor) -> List[tensor]:
        shape: List[int] = []
        for v in values:
            shape = broadcast_shapes(shape, v.shape)
        return [self.to_shape(v, shape) for v in values]

    def subscript(self, x: tensor, index: Any) -> tensor:
        """``x[:, None]``-style indexing: ``None`` inserts a size-1 dim at its position, ``:``
        changes nothing (as Triton's, also past the last dim: ``scalar[None, None, :]`` is
        [1, 1])."""
        items = index if isinstance(index, tuple) else (index,)
        for dim, item in enumerate(items):
            if item is None:
                x = self.expand_dims(x, dim)
            elif not (isinstance(item, slice) and item == slice(None)):
                raise TypeError(f"unsupported tensor index {item!r}: only ':' and None are "
                                "supported")
        return x

    # ---- casts ---------------------------------------------------------------------------

    def cast(self, x: tensor, dst: dtype, fp_downcast_rounding: Optional[str] = None) -> tensor:
        if isinstance(dst, tl.block_type):  # Triton casts to a block type's element type
            dst = dst.scalar
        if not isinstance(dst, dtype):
            raise TypeError(f"cast needs a dtype, got {dst!r}")
        src = x.dtype
        if src == dst:
            return x
        if fp_downcast_rounding is not None:
            if fp_downcast_rounding not in ("rtne", "rtz"):
                raise ValueError(f"Invalid rounding mode: {fp_downcast_rounding}. Supported "
                                 "rounding modes are 'rtne' and 'rtz'.")
            if not (src.is_floating() and dst.is_floating()
                    and dst.primitive_bitwidth < src.primitive_bitwidth):
                raise ValueError("fp_downcast_rounding should be set only for truncating fp "
                                 f"conversions. Source scalar type is {src} and destination "
                                 f"type is {dst}")
        if src.is_floating() and dst.is_floating():
            if fp_downcast_rounding == "rtz":
                # One truncf toward zero (wider sources go through fp32 in codegen: exact,
                # truncation composes). fp8e4b15 ignores the mode, as Triton's conversion.
                return self.create("truncf", [x], dst, x.shape, rounding="rtz")
            return self._cast_float(x, dst)
        if src.is_int() and dst.is_int():
            if dst.is_bool():
                return self.not_equal(x, 0)
            if src.int_bitwidth == dst.int_bitwidth:  # same bits, other signedness
                return tensor(x.handle, dst, x.shape)
            if src.int_bitwidth > dst.int_bitwidth:
                return self.create("trunci", [x], dst, x.shape)
            op = "extsi" if src.is_int_signed() else "extui"
            return self.create(op, [x], dst, x.shape)
        if src.is_floating() and dst.is_int():
            if src.is_fp8():
                return self.cast(self.cast(x, tl.float32), dst)
            if dst.is_bool():
                return self.not_equal(x, 0.0)
            return self.create("fptosi" if dst.is_int_signed() else "fptoui", [x], dst, x.shape)
        if src.is_int() and dst.is_floating():
            if dst.is_fp8():
                return self.cast(self.cast(x, tl.float32), dst)
            op = "sitofp" if src.is_int_signed() else "uitofp"
            return self.create(op, [x], dst, x.shape)
        if src.is_ptr() and dst.is_int():
            if dst.is_bool():
                return self.not_equal(self.cast(x, tl.int64), 0)
            if dst.int_bitwidth == 64:
                return self.create("ptrtoint", [x], dst, x.shape)
        if src.is_int() and dst.is_ptr():
            return self.create("inttoptr", [x], dst, x.shape)
        if src.is_ptr() and dst.is_ptr():
            return self.create("bitcast", [x], dst, x.shape)
        raise TypeError(f"cannot cast {src} to {dst}")

    def _cast_float(self, x: tensor, dst: dtype) -> tensor:
        src = x.dtype
        # As Triton: fp16/bf16 convert to anything but fp32 through fp32 (exact), and two float
        # types of one width (fp16/bf16, the fp8s) have no direct conversion.
        if src.is_fp8e4b15() and not dst.is_fp32():  # decoded through fp32 (exact)
            return self.cast(self.cast(x, tl.float32), dst)
        if not (src.is_fp8() or dst.is_fp8()) and (src.is_fp16() or src.is_bf16()) \
                and not dst.is_fp32():
            return self.cast(self.cast(x, tl.float32), dst)
        if src.primitive_bitwidth == dst.primitive_bitwidth:
            return self.cast(self.cast(x, tl.float32), dst)
        op = "truncf" if src.primitive_bitwidth > dst.primitive_bitwidth else "extf"
        return self.create(op, [x], dst, x.shape)

    def bitcast(self, x: tensor, dst: dtype) -> tensor:
        src = x.dtype
        if src == dst:
            return x
        if src.is_ptr() or dst.is_ptr():
            return self.cast(x, dst)
        if src.primitive_bitwidth != dst.primitive_bitwidth:
            raise ValueError(f"cannot bitcast {src} ({src.primitive_bitwidth} bits) to {dst} "
                             f"({dst.primitive_bitwidth} bits)")
        if src.to_ir() == dst.to_ir():
            return tensor(x.handle, dst, x.shape)
        return self.create("bitcast", [x], dst, x.shape)

    # ---- operand promotion ---------------------------------------------------------------

    @staticmethod
    def _check_ptr(a: dtype, b: dtype, allow_ptr_a: bool) -> None:
        if a.is_ptr() and (not allow_ptr_a or (b.is_ptr() and a != b) or b.is_floating()):
            raise IncompatibleTypeError(a, b)

    def binary_operands(self, lhs: Any, rhs: Any, allow_lhs_ptr: bool = False,
                        allow_rhs_ptr: bool = False, div_or_mod: bool = False
                        ) -> Tuple[tensor, tensor]:
        """Triton's binary_op_type_checking_impl: convert both operands to their computation
        type (Python scalars take the other operand's type when of a lower or equal kind),
        then broadcast them to one shape."""
        lhs_scalar, rhs_scalar = is_number(lhs), is_number(rhs)
        lhs_ty = to_tensor_type(lhs) if lhs_scalar else self._operand(lhs).dtype
        rhs_ty = to_tensor_type(rhs) if rhs_scalar else self._operand(rhs).dtype
        self._check_ptr(lhs_ty, rhs_ty, allow_lhs_ptr)
        self._check_ptr(rhs_ty, lhs_ty, allow_rhs_ptr)
        if lhs_ty.is_ptr() or rhs_ty.is_ptr():
            lhs, rhs = self.to_tensor(lhs), self.to_tensor(rhs)
        else:
            ret = computation_type(lhs_ty, lhs_scalar, rhs_ty, rhs_scalar, div_or_mod)
            for value, scalar in ((lhs, lhs_scalar), (rhs, rhs_scalar)):
                if scalar and ret.is_int_unsigned() and value < 0 and not ret.is_bool():
                    raise ValueError(f"cannot combine an unsigned {ret} tensor with the negative "
                                     f"scalar {value}; cast one of them explicitly")
                if scalar and ret.is_int() and not (ret.get_int_min_value() <= value
                                                    <= ret.get_int_max_value()):
                    raise ValueError(f"scalar {value} is out of range for type {ret}")
            lhs = self.scalar_constant(lhs, ret) if lhs_scalar else self.cast(lhs, ret)
            rhs = self.scalar_constant(rhs, ret) if rhs_scalar else self.cast(rhs, ret)
        lhs, rhs = self.broadcast_values(lhs, rhs)
        return lhs, rhs

    @staticmethod
    def _operand(x: Any) -> tensor:
        if not isinstance(x, tensor):
            raise TypeError(f"expected a tensor or a number, got {x!r}")
        return x

    # ---- arithmetic ----------------------------------------------------------------------

    def add(self, a: Any, b: Any) -> tensor:
        a, b = self.binary_operands(a, b, True, True)
        if a.dtype.is_ptr() and b.dtype.is_ptr():
            raise TypeError("cannot add two pointers")
        if b.dtype.is_ptr():
            a, b = b, a
        if a.dtype.is_ptr():
            if b.dtype.is_int_unsigned() and b.dtype.int_bitwidth < 64:
                # addptr reads its offset as signed: widen unsigned offsets to keep them positive.
                b = self.create("extui", [b], tl.int64, b.shape)
            return self.create("addptr", [a, b], a.dtype, a.shape)
        return self.create("addf" if a.dtype.is_floating() else "addi", [a, b], a.dtype, a.shape)

    def sub(self, a: Any, b: Any) -> tensor:
        if isinstance(a, tensor) and a.dtype.is_ptr() and is_number(b):
            return self.add(a, -b)
        a, b = self.binary_operands(a, b, True, False)
        if a.dtype.is_ptr():
            return self.add(a, self.minus(b))
        return self.create("subf" if a.dtype.is_floating() else "subi", [a, b], a.dtype, a.shape)

    def mul(self, a: Any, b: Any) -> tensor:
        a, b = self.binary_operands(a, b)
        return self.create("mulf" if a.dtype.is_floating() else "muli", [a, b], a.dtype, a.shape)

    def truediv(self, a: Any, b: Any) -> tensor:
        """``/``: int / int is computed in fp32, as Triton; fp16/bf16 in fp32 too (see
        computation_type). As Triton's (its DivFOp lowering), an fp32 quotient may be the fast
        ``div.full.f32`` (within 2 ulp; codegen picks div.rn in kernels with a dot, measured
        faster there: docs/perf/triton_parity.md), an fp64 one is ``div.rn.f64``;
        ``tl.div_rn`` always rounds correctly."""
        a, b = self.binary_operands(a, b, div_or_mod=True)
        if a.dtype.is_int():
            a, b = self.cast(a, tl.float32), self.cast(b, tl.float32)
        op = "fast_divf" if a.dtype.is_fp32() or a.dtype.is_fp8() else "divf"
        return self.create(op, [a, b], a.dtype, a.shape)

    def floordiv(self, a: Any, b: Any) -> tensor:
        """``//`` on integers rounds toward zero (C semantics, as Triton): divsi / divui."""
        a, b = self.binary_operands(a, b, div_or_mod=True)
        if not a.dtype.is_int():
            raise TypeError(f"// needs integer operands, got {a.dtype}")
        return self.create("divsi" if a.dtype.is_int_signed() else "divui", [a, b], a.dtype,
                           a.shape)

    def mod(self, a: Any, b: Any) -> tensor:
        """``%``: the sign of the dividend (C semantics): remsi / remui / remf."""
        a, b = self.binary_operands(a, b, div_or_mod=True)
        if a.dtype.is_floating():
            return self.create("remf", [a, b], a.dtype, a.shape)
        return self.create("remsi" if a.dtype.is_int_signed() else "remui", [a, b], a.dtype,
                           a.shape)

    def minus(self, x: tensor) -> tensor:
        if x.dtype.is_ptr():
            raise TypeError(f"wrong type argument to unary minus ({x.dtype})")
        if x.dtype.is_floating():
            return self.create("negf", [x], x.dtype, x.shape)
        return self.sub(self.scalar_constant(0, x.dtype), x)

    def _bitwise_operands(self, a: Any, b: Any) -> Tuple[tensor, tensor]:
        a, b = self.binary_operands(a, b)
        if not a.dtype.is_int() or not b.dtype.is_int():
            raise IncompatibleTypeError(a.dtype, b.dtype)
        return a, b

    def bitwise(self, op: str, a: Any, b: Any) -> tensor:
        """``op`` in andi, ori, xori, shli, shrsi, shrui."""
        a, b = self._bitwise_operands(a, b)
        return self.create(op, [a, b], a.dtype, a.shape)

    def shr(self, a: Any, b: Any, signed: bool) -> tensor:
        """``>>``: arithmetic when the shifted operand is signed, logical otherwise (Triton)."""
        return self.bitwise("shrsi" if signed else "shrui", a, b)

    def invert(self, x: tensor) -> tensor:
        if not x.dtype.is_int():
            raise TypeError(f"wrong type argument to unary invert ({x.dtype})")
        return self.bitwise("xori", x, self.scalar_constant(-1, x.dtype))

    def logical_not(self, x: tensor) -> tensor:
        return self.invert(self.cast(x, tl.int1))

    def logical(self, op: str, a: Any, b: Any) -> tensor:
        """``and`` / ``or`` on runtime values: both sides become int1, then andi / ori."""
        a, b = self.cast(self.to_tensor(a), tl.int1), self.cast(self.to_tensor(b), tl.int1)
        return self.bitwise(op, a, b)

    def minimum(self, x: Any, y: Any, propagate_nan: Any = tl.PropagateNan.NONE) -> tensor:
        return self._min_max(x, y, propagate_nan, "min")

    def maximum(self, x: Any, y: Any, propagate_nan: Any = tl.PropagateNan.NONE) -> tensor:
        return self._min_max(x, y, propagate_nan, "max")

    def _min_max(self, x: Any, y: Any, propagate_nan: Any, which: str) -> tensor:
        x, y = self.binary_operands(x, y)
        if x.dtype.is_floating():
            if propagate_nan == tl.PropagateNan.ALL:
                op = which + "imumf"
            elif propagate_nan in (tl.PropagateNan.NONE, None):
                op = which + "numf"
            else:
                raise ValueError(f"unexpected propagate_nan {propagate_nan!r}")
        else:
            op = which + ("si" if x.dtype.is_int_signed() else "ui")
        return self.create(op, [x, y], x.dtype, x.shape)

    def cdiv(self, x: Any, div: Any) -> tensor:
        return self.floordiv(self.sub(self.add(x, div), 1), div)

    # ---- comparisons ---------------------------------------------------------------------

    _PREDICATES = {  # name: (float, signed int, unsigned int)
        "lt": ("olt", "slt", "ult"), "le": ("ole", "sle", "ule"),
        "gt": ("ogt", "sgt", "ugt"), "ge": ("oge", "sge", "uge"),
        "eq": ("oeq", "eq", "eq"), "ne": ("une", "ne", "ne"),
    }

    def compare(self, name: str, a: Any, b: Any) -> tensor:
        a, b = self.binary_operands(a, b)
        fp, signed, unsigned = self._PREDICATES[name]
        if a.dtype.is_floating():
            op, predicate = "cmpf", fp
        elif a.dtype.is_int():
            op, predicate = "cmpi", signed if a.dtype.is_int_signed() else unsigned
        else:
            raise TypeError(f"cannot compare values of type {a.dtype}")
        return self.create(op, [a, b], tl.int1, a.shape, predicate=predicate)

    def not_equal(self, a: Any, b: Any) -> tensor:
        return self.compare("ne", a, b)

    # ---- creation ------------------------------------------------------------------------

    def program_id(self, axis: Any) -> tensor:
        if axis not in (0, 1, 2):
            raise ValueError(f"program_id axis must be 0, 1, or 2 but got {axis}")  # Triton's words
        return self.create("program_id", [], tl.int32, [], axis=axis)

    def num_programs(self, axis: Any) -> tensor:
        if axis not in (0, 1, 2):
            raise ValueError(f"num_programs axis must be 0, 1, or 2 but got {axis}")
        return self.create("num_programs", [], tl.int32, [], axis=axis)

    def arange(self, start: Any, end: Any) -> tensor:
        if not (isinstance(start, int) and isinstance(end, int)) or isinstance(start, bool):
            raise TypeError("arange's start and end must be constexpr ints, got "
                            f"{start} and {end} (annotate the kernel parameter that gives the "
                            "bound as `BLOCK: tl.constexpr`, or a local as "
                            "`n: tl.constexpr = ...`)")
        if start >> 31 not in (0, -1) or end >> 31 not in (0, -1):
            raise ValueError("arange's bounds must fit in int32")
        length = end - start
        if length <= 0:
            raise ValueError(f"arange's end ({end}) must be greater than its start ({start})")
        if length & (length - 1):
            raise ValueError("arange's range must be a power of 2")  # Triton's words
        return self.create("make_range", [], tl.int32, [length], start=start, end=end)

    def full(self, shape: Any, value: Any, element: Any) -> tensor:
        if not isinstance(element, dtype):
            raise TypeError(f"full/zeros need a dtype, got {element!r}")
        shape = self.block_shape(shape)
        if isinstance(value, tensor):
            if value.shape:
                raise ValueError(f"full's value must be a scalar, got a tile {value}")
            scalar = self.cast(value, element)
        elif is_number(value):
            scalar = self.scalar_constant(value, element)
        else:
            raise TypeError(f"full's value must be a number or a scalar, got {value!r}")
        return self.splat(scalar, shape)

    @staticmethod
    def block_shape(shape: Any) -> List[int]:
        shape = [shape] if isinstance(shape, int) else shape
        if not isinstance(shape, (list, tuple)):
            raise TypeError(f"a shape must be a constexpr list of ints, got {shape!r}")
        for index, size in enumerate(shape):
            if not isinstance(size, int) or isinstance(size, bool):
                raise TypeError(f"shape element {index} must be a constexpr int, got {size}")
            if size <= 0 or size & (size - 1):
                raise ValueError(f"Shape element {index} must be a power of 2")  # Triton's
        check_tile_size("full", shape)
        return list(shape)

    # ---- selection and memory ------------------------------------------------------------

    def where(self, cond: Any, x: Any, y: Any) -> tensor:
        cond = self.to_tensor(cond)
        if cond.dtype != tl.int1:  # as Triton 3.6: still taken (as `!= 0`), with a warning
            warnings.warn("tl.where with a non-boolean condition is deprecated (Triton will "
                          f"refuse it in a future release); got {cond.dtype}: compare it, "
                          "e.g. `cond != 0`", UserWarning, stacklevel=2)
        cond = self.cast(cond, tl.int1)
        x, y = self.binary_operands(x, y, True, True)
        cond, x, y = self.broadcast_values(cond, x, y)
        return self.create("select", [cond, x, y], x.dtype, x.shape)

    def _memory_operand(self, value: Any, element: dtype) -> tensor:
        """A value stored or used as ``other``, converted to the pointee type."""
        if is_number(value):
            if element.is_int() and not element.is_bool():
                value = int(value)  # rounds toward zero, as fptosi would
            return self.scalar_constant(value, element)
        return self.cast(self._operand(value), element)

    @staticmethod
    def _check_mask(mask: tensor) -> None:
        if mask.dtype != tl.int1:
            raise TypeError(f"mask must be a boolean (int1) value, got {mask.dtype}")

    def _pointer(self, pointer: Any, what: str) -> tensor:
        if not isinstance(pointer, tensor) or not pointer.dtype.is_ptr():
            raise TypeError(f"{what} needs a pointer or a tensor of pointers, got {pointer}")
        return pointer

    def load(self, pointer: Any, mask: Any, other: Any, cache_modifier: str,
             eviction_policy: str, volatile: bool) -> tensor:
        pointer = self._pointer(pointer, "load")
        if mask is None and other is not None:
            raise ValueError("load's `other` needs a `mask`")
        attrs = self._cache_attrs(cache_modifier, eviction_policy, ("", ".ca", ".cg", ".cv"))
        if volatile:
            attrs["volatile"] = True
        operands = [pointer]
        if mask is not None:
            mask = self.to_tensor(mask)
            self._check_mask(mask)
            if not pointer.shape and mask.shape:
                raise ValueError("a mask cannot be a tile when the pointer is a scalar")
            pointer, mask = self.broadcast_values(pointer, mask)
            operands = [pointer, mask]
        element = pointer.dtype.element_ty
        is_bool = element == tl.int1  # int1 lives in memory as int8
        if is_bool:
            element = tl.int8
            pointer = self.cast(pointer, tl.pointer_type(tl.int8))
            operands[0] = pointer
        if other is not None:
            other = self._memory_operand(other, element)
            if not pointer.shape and other.shape:
                raise ValueError("`other` cannot be a tile when the pointer is a scalar")
            operands.append(self.to_shape(other, pointer.shape))
        result = self.create("load", operands, element, pointer.shape, **attrs)
        return self.cast(result, tl.int1) if is_bool else result

    def store(self, pointer: Any, value: Any, mask: Any, cache_modifier: str,
              eviction_policy: str) -> None:
        pointer = self._pointer(pointer, "store")
        if pointer.dtype.is_const():  # a `tl.const` parameter (as Triton)
            raise ValueError("Cannot store to a constant pointer")
        attrs = self._cache_attrs(cache_modifier, eviction_policy,
                                  ("", ".wb", ".cg", ".cs", ".wt"))
        element = pointer.dtype.element_ty
        if element == tl.int1:
            element = tl.int8
            pointer = self.cast(pointer, tl.pointer_type(tl.int8))
        value = self._memory_operand(value, element)
        values = [pointer, value]
        if mask is not None:
            mask = self.to_tensor(mask)
            self._check_mask(mask)
            values.append(mask)
        shape = pointer.shape
        values = self.broadcast_values(*values)
        if values[0].shape != shape:
            raise ValueError(f"store value/mask of shape {values[1].shape} do not fit the "
                             f"pointer's shape {shape}")
        self.builder.create("store", [v.handle for v in values], [], attrs)

    # ---- debugging -----------------------------------------------------------------------

    def device_print(self, prefix: str, args: Sequence[Any], hex: bool) -> None:
        """A `print` op. As Triton, a prefix followed by values reads "<space>prefix: "."""
        if args and not prefix.endswith(" "):
            prefix += " "
        if args and not prefix.endswith(": "):
            prefix = prefix[:-1] + ": "
        if len(prefix) > 2 and not prefix.startswith(" "):
            prefix = " " + prefix
        values = [self.to_tensor(a) for a in args]  # pointers print their addresses
        attrs: dict = {"prefix": prefix, "hex": hex}
        if values:
            attrs["is_signed"] = [int(v.dtype.is_int_signed()) for v in values]
        self.builder.create("print", [v.handle for v in values], [], attrs)

    def device_assert(self, cond: Any, message: str) -> None:
        """An `assert` op on an i1 scalar or tile; other values test `!= 0`, as Python's
        (tl.device_assert calls it only in debug mode)."""
        cond = self.to_tensor(cond)
        if cond.dtype.is_ptr():
            raise TypeError(f"device_assert needs a boolean or numeric condition, got {cond}")
        if cond.dtype != tl.int1:
            cond = self.compare("ne", cond, 0)
        self.builder.create("assert", [cond.handle], [], {"message": message})

    @staticmethod
    def _cache_attrs(cache: str, eviction: str, caches: Sequence[str]) -> dict:
        if cache not in caches:
            raise ValueError(f"cache modifier '{cache}' is not supported here; use one of "
                             f"{', '.join(c for c in caches if c)}")
        if eviction not in ("", "evict_first", "evict_last"):
            raise ValueError(f"eviction policy '{eviction}' is not supported")
        attrs = {}
        if cache:
            attrs["cache"] = cache
        if eviction:
            attrs["evict"] = eviction
        return attrs


def normalize_number(x: Any) -> Any:
    """NumPy scalars (np.int64(3), np.float32(1.5), np.bool_(True)) become bool/int/float, so
    that they follow the rules of Python scalars."""
    if type(x).__module__ == "numpy" and getattr(x, "shape", None) == () and hasattr(x, "item"):
        value = x.item()
        if isinstance(value, (bool, int, float)):
            return value
    return x
