"""Op handlers of the interpreter: for each op name in cpp/ir/ops.def (except structure and
control flow, which live in evaluator.py), a factory that turns the op's OpInfo into a function
fn(state, *operands) computing its result with vectorized NumPy over the whole tile.

Factories run once per op when a plan is built (plan.py), so attribute decoding and dtype
dispatch happen there, not per program. Undefined cases raise OpFault (see errors.py). A
scalar result may come back as a 0-d array: the evaluator checks its type and unwraps it.
"""
from __future__ import annotations

import operator
from typing import Callable, Dict

import numpy as np

from . import numerics as nm
from .errors import OpFault
from .plan import OpInfo, PlanError

HANDLERS: Dict[str, Callable[[OpInfo], Callable]] = {}


def handles(*names: str):
    def register(factory):
        for name in names:
            HANDLERS[name] = factory
        return factory
    return register


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False  # shared by every program: no handler may write into it
    return array


def _first_lane(mask) -> tuple:
    mask = np.asarray(mask)
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


# --- values -----------------------------------------------------------------------------------

def _constant_value(value, t):
    dtype = t.dtype
    if t.pointee is not None or (dtype.kind in "iub"):
        if isinstance(value, float) and value != int(value):
            raise PlanError(f"integer constant of type {t.text} has value {value}")
        scalar = nm.wrap_int(int(value), dtype)
    else:
        source = np.float64(value) if isinstance(value, float) else np.int64(value)
        scalar = nm.to_float(source, dtype)[()]
    if not t.shape:
        return scalar
    return _frozen(np.full(t.shape, scalar, dtype))


@handles("constant")
def _constant(info: OpInfo):
    value = _constant_value(info.attrs["value"], info.results[0])
    return lambda state: value


@handles("program_id", "num_programs")
def _program_index(info: OpInfo):
    axis = int(info.attrs["axis"])
    make = info.results[0].dtype.type
    if info.name == "program_id":
        return lambda state: make(state.pid[axis])
    return lambda state: make(state.grid[axis])


@handles("make_range")
def _make_range(info: OpInfo):
    values = _frozen(np.arange(info.attrs["start"], info.attrs["end"], dtype=np.int32))
    return lambda state: values


@handles("splat", "broadcast")
def _broadcast(info: OpInfo):
    shape = info.results[0].shape
    return lambda state, x: np.broadcast_to(x, shape)


@handles("expand_dims")
def _expand_dims(info: OpInfo):
    axis = int(info.attrs["axis"])
    return lambda state, x: np.expand_dims(x, axis)


@handles("reshape")
def _reshape(info: OpInfo):
    shape = info.results[0].shape  # row-major element order, as Triton's reshape
    return lambda state, x: np.reshape(x, shape)


@handles("convert_layout")
def _convert_layout(info: OpInfo):
    return lambda state, x: x  # layouts say where elements live, never what they are


# --- memory -----------------------------------------------------------------------------------

@handles("addptr")
def _addptr(info: OpInfo):
    size = np.int64(info.operands[0].pointee.itemsize)

    def addptr(state, pointer, offset):  # offsets are signed, scaled by the pointee size
        return pointer + nm.as_signed(offset).astype(np.int64) * size

    return addptr


@handles("load")
def _load(info: OpInfo):
    result = info.results[0]
    shape, dtype = result.shape, result.dtype
    loads_pointers = result.pointee is not None

    def load(state, pointer, mask=None, other=None, *tensor_map):
        # A descriptor load under TMA also carries its tensor map and box coordinates (ops.def):
        # the masked load is its meaning, so they are not needed here.
        if mask is not None:
            mask = np.broadcast_to(mask, shape)
        values, lanes = state.memory.load(np.asarray(pointer), mask, dtype)
        if loads_pointers:  # memory holds host addresses (pointer arrays): see _pointer_cast
            values = state.memory.to_virtual(values)
        if lanes is None:
            out = values.reshape(shape)
        else:  # masked-off lanes take `other`, or zero
            out = np.zeros(shape, dtype) if other is None else np.array(
                np.broadcast_to(other, shape), dtype)
            out.reshape(-1)[lanes] = values
        return out

    return load


@handles("store")
def _store(info: OpInfo):
    stores_pointers = info.operands[1].pointee is not None

    def store(state, pointer, value, mask=None, *tensor_map):
        # A descriptor store under TESSERA_TMA_STORE also carries its tensor map and box
        # coordinates: the masked store is its meaning (the TMA clips the box as the mask does).
        pointer = np.asarray(pointer)
        if stores_pointers:  # memory holds host addresses, as data_ptr() gives them
            value = state.memory.to_host(value)
        if mask is not None:
            mask = np.broadcast_to(mask, pointer.shape)
        state.memory.store(pointer, np.broadcast_to(value, pointer.shape), mask)

    return store


# --- integer arithmetic -----------------------------------------------------------------------

_MODULAR = {"addi": np.add, "subi": np.subtract, "muli": np.multiply, "andi": np.bitwise_and,
            "ori": np.bitwise_or, "xori": np.bitwise_xor}


@handles(*_MODULAR)
def _modular(info: OpInfo):
    fn = _MODULAR[info.name]
    if info.results[0].dtype == nm.BOOL:  # i1 arithmetic is modulo 2
        return lambda state, a, b: nm.from_bits(fn(nm.as_unsigned(a), nm.as_unsigned(b)),
                                                nm.BOOL)
    if info.attrs.get("check_overflow"):  # a pointer offset's (transforms/check_offsets.cpp)
        return _checked(info, fn)
    return lambda state, a, b: fn(a, b)


_EXACT = {"addi": ("+", operator.add), "subi": ("-", operator.sub), "muli": ("*", operator.mul)}


def _checked(info: OpInfo, fn):
    """addi/subi/muli that compute a pointer offset: an exact result outside the type's range
    raises, naming the lane, the operands and the exact value, rather than wrapping to an
    address the kernel did not mean (the GPU checks the same with debug=True)."""
    dtype = info.results[0].dtype
    bits = nm.bit_width(dtype)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    symbol, exact_op = _EXACT[info.name]
    make = dtype.type

    def overflow(a, b, exact, lane):
        pick = (lambda x: np.broadcast_to(x, np.shape(exact))[lane]) if lane else (lambda x: x)
        where = f" (lane {list(lane)})" if lane else ""
        return OpFault(f"int{bits} overflow in the offset of a pointer: {int(pick(a))} {symbol} "
                       f"{int(pick(b))} = {int(pick(exact))} does not fit in int{bits}{where}, "
                       "so the address would wrap around. Tessera computes offsets in int64 "
                       "only for tensors of 2**31 elements or more (docs/limits.md): this "
                       "offset points past its tensor (mask those lanes) or must be computed "
                       "in int64 (x.to(tl.int64))")

    def checked(state, a, b):
        if type(a) is not np.ndarray and type(b) is not np.ndarray:  # scalars: Python ints
            exact = exact_op(int(a), int(b))
            if not low <= exact <= high:
                raise overflow(a, b, exact, ())
            return make(exact)
        exact = fn(np.asarray(a, np.int64), np.asarray(b, np.int64))  # |a|, |b| < 2**31
        if exact.min() < low or exact.max() > high:
            raise overflow(a, b, exact, _first_lane((exact < low) | (exact > high)))
        return exact.astype(dtype)

    return checked


def _check_divisor(b):
    zero = np.asarray(b) == 0
    if np.any(zero):
        raise OpFault("integer division by zero" +
                      (f" (lane {_first_lane(zero)})" if zero.ndim else ""))


@handles("divsi", "remsi")
def _signed_division(info: OpInfo):
    dtype = info.results[0].dtype
    quotient = info.name == "divsi"

    def divide(state, a, b):  # C semantics: the quotient rounds toward zero
        _check_divisor(b)
        a, b = nm.as_signed(a), nm.as_signed(b)
        minus_one = b == -1  # INT_MIN / -1 wraps to INT_MIN; x % -1 is 0; NumPy traps on both
        safe = np.where(minus_one, b.dtype.type(1), b)
        remainder = np.fmod(a, safe)
        if not quotient:
            return nm.from_bits(np.where(minus_one, a.dtype.type(0), remainder), dtype)
        q = (a - remainder) // safe
        return nm.from_bits(np.where(minus_one, 0 - a, q), dtype)

    return divide


@handles("divui", "remui")
def _unsigned_division(info: OpInfo):
    dtype = info.results[0].dtype
    fn = np.floor_divide if info.name == "divui" else np.remainder

    def divide(state, a, b):
        _check_divisor(b)
        return nm.from_bits(fn(nm.as_unsigned(a), nm.as_unsigned(b)), dtype)

    return divide


@handles("shli", "shrsi", "shrui")
def _shift(info: OpInfo):
    """Shift amounts are unsigned; amounts >= the bit width clamp as PTX's shl/shr do (LLVM
    calls them poison): shli and shrui give 0, shrsi fills with the sign bit."""
    dtype = info.results[0].dtype
    width = nm.bit_width(dtype)
    name = info.name

    def shift(state, a, b):
        amount = nm.as_unsigned(b)
        too_far = amount >= width
        clamped = np.where(too_far, amount.dtype.type(width - 1), amount)
        if name == "shrsi":
            signed = nm.as_signed(a)
            return nm.from_bits(signed >> clamped.astype(signed.dtype), dtype)
        bits = nm.as_unsigned(a)
        moved = bits << clamped if name == "shli" else bits >> clamped
        return nm.from_bits(np.where(too_far, bits.dtype.type(0), moved), dtype)

    return shift


@handles("maxsi", "minsi", "maxui", "minui")
def _int_max_min(info: OpInfo):
    dtype = info.results[0].dtype
    view = nm.as_unsigned if info.name.endswith("ui") else nm.as_signed
    fn = np.maximum if info.name.startswith("max") else np.minimum
    return lambda state, a, b: nm.from_bits(fn(view(a), view(b)), dtype)


_CMPI = {"eq": (np.equal, None), "ne": (np.not_equal, None),
         "slt": (np.less, "s"), "sle": (np.less_equal, "s"),
         "sgt": (np.greater, "s"), "sge": (np.greater_equal, "s"),
         "ult": (np.less, "u"), "ule": (np.less_equal, "u"),
         "ugt": (np.greater, "u"), "uge": (np.greater_equal, "u")}


@handles("cmpi")
def _cmpi(info: OpInfo):
    predicate = info.attrs["predicate"]
    if predicate not in _CMPI:
        raise PlanError(f"unknown cmpi predicate '{predicate}'")
    fn, signedness = _CMPI[predicate]
    if signedness is None:
        return lambda state, a, b: fn(a, b)
    view = nm.as_signed if signedness == "s" else nm.as_unsigned
    return lambda state, a, b: fn(view(a), view(b))


# --- floating-point arithmetic ----------------------------------------------------------------

_FLOAT_BINARY = {"addf": np.add, "subf": np.subtract, "mulf": np.multiply,
                 "divf": np.divide, "remf": np.fmod}


@handles(*_FLOAT_BINARY)
def _float_binary(info: OpInfo):
    fn = nm.float_op(_FLOAT_BINARY[info.name], info.results[0].dtype)
    return lambda state, a, b: fn(a, b)


@handles("maxnumf", "minnumf", "maximumf", "minimumf")
def _float_max_min(info: OpInfo):
    fn = nm.float_op(nm.max_min(info.name), info.results[0].dtype)
    return lambda state, a, b: fn(a, b)


@handles("negf")
def _negf(info: OpInfo):
    return lambda state, x: nm.negate_float(x)


@handles("cmpf")
def _cmpf(info: OpInfo):
    predicate = info.attrs["predicate"]
    if predicate not in nm.CMPF:
        raise PlanError(f"unknown cmpf predicate '{predicate}'")
    fn = nm.CMPF[predicate]
    if info.operands[0].dtype in nm.NARROW_FLOATS:  # compare exactly in f32
        return lambda state, a, b: fn(np.asarray(a).astype(nm.F32), np.asarray(b).astype(nm.F32))
    return lambda state, a, b: fn(a, b)


@handles("select")
def _select(info: OpInfo):
    scalar = not info.results[0].shape
    if scalar:
        return lambda state, c, a, b: a if c else b
    return lambda state, c, a, b: np.where(c, a, b)


# --- casts ------------------------------------------------------------------------------------

@handles("extsi", "extui", "trunci")
def _int_cast(info: OpInfo):
    dtype = info.results[0].dtype
    unsigned = info.name != "extsi"
    return lambda state, x: nm.int_cast(x, dtype, unsigned)


@handles("inttoptr", "ptrtoint")
def _pointer_cast(info: OpInfo):
    """Integers hold host addresses, pointers the interpreter's virtual ones (memory.py): the
    casts translate, so a data_ptr() read from memory becomes a pointer into its array, and a
    pointer cast to int64 is its real address. Both zero-extend or truncate, as LLVM's do."""
    dtype = info.results[0].dtype
    if info.name == "inttoptr":
        return lambda state, x: state.memory.to_virtual(nm.int_cast(x, dtype, True))
    return lambda state, x: nm.int_cast(state.memory.to_host(x), dtype, True)


@handles("extf", "truncf", "sitofp", "uitofp")
def _to_float(info: OpInfo):
    dtype = info.results[0].dtype
    unsigned = info.name == "uitofp"
    rounding = info.attrs.get("rounding", "rtne")
    if rounding not in ("rtne", "rtz"):
        raise PlanError(f"unknown rounding mode '{rounding}'")
    if "f8e4m3b15" in info.operands[0].text:  # codes in uint8 (see numerics.DTYPES)
        return lambda state, x: nm.to_float(nm.from_e4b15(x), dtype)
    if "f8e4m3b15" in info.results[0].text:
        return lambda state, x: nm.to_e4b15(x)
    if rounding == "rtz":
        return lambda state, x: nm.to_float_toward_zero(x, dtype)
    return lambda state, x: nm.to_float(x, dtype, unsigned)


@handles("fptosi", "fptoui")
def _to_int(info: OpInfo):
    dtype = info.results[0].dtype
    unsigned = info.name == "fptoui"
    return lambda state, x: nm.float_to_int(x, dtype, unsigned)


@handles("bitcast")
def _bitcast(info: OpInfo):
    dtype = info.results[0].dtype
    if info.operands[0].dtype.itemsize != dtype.itemsize:
        raise PlanError(f"bitcast from {info.operands[0].text} to {info.results[0].text} "
                        "changes the bit width")
    return lambda state, x: np.asarray(x).view(dtype)


@handles("inline_asm")
def _inline_asm(info: OpInfo):
    raise PlanError("tl.inline_asm_elementwise runs PTX, which the interpreter cannot execute "
                    "(Triton's interpreter does not run inline assembly either); run this "
                    "kernel on the GPU, or give the interpreter a tl-only version of it")
