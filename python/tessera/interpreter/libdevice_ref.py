"""How the interpreter computes each libdevice function (the ``reference`` of a table row,
language/extra/libdevice_table.py): exactly, then rounded once to the result dtype.

A reference is ``fn(args, out) -> array``: ``args`` are the operands as NumPy arrays of the
signature's dtypes (uint32 as np.uint32, ...), ``out`` the NumPy result dtype. Kinds:

- ``np.<ufunc>``: NumPy in float64 (exact for fp32 inputs up to f64's own last-bit error, then
  rounded to fp32; fp64 results are NumPy's, within an ulp or two);
- ``mp.<name>``: mpmath at 64 (fp32) or 120 (fp64) bits, rounded once (the special
  functions NumPy lacks);
- ``<name>:<mode>``: exact rationals rounded in an IEEE mode (libdevice_rounding.py);
- the rest: bit and integer functions, exact by construction.

The GPU's libdevice is not always correctly rounded (most fp32 functions are within 1-4 ulp;
the fast_* ones and rcp64h are approximations): how far it may be is a tolerance of the GPU
tests, not a property of the interpreter.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable, Dict, List

import numpy as np

from .libdevice_rounding import F32, F64, round_rational, sqrt_rational, to_integer

Reference = Callable[[List[np.ndarray], np.dtype], np.ndarray]
_INT_MIN32, _INT_MAX32 = -(1 << 31), (1 << 31) - 1
# mpmath's working bits: well past the format's, and mpmath adds guard bits where it cancels.
_MP_PRECISION = {F32: 64, F64: 120}


def _elementwise(fn: Callable, args: List[np.ndarray], out: np.dtype) -> np.ndarray:
    """fn on Python scalars, element by element (broadcast operands share one shape)."""
    shape = np.broadcast(*args).shape
    flat = [np.broadcast_to(a, shape).ravel() for a in args]
    result = np.empty(int(np.prod(shape, dtype=np.int64)), dtype=out)
    for i in range(result.size):
        result[i] = fn(*(a[i].item() for a in flat))
    return result.reshape(shape)


def _numpy(name: str) -> Reference:
    function = getattr(np, name)

    def reference(args, out):
        with np.errstate(all="ignore"):
            return np.asarray(function(*(a.astype(F64) for a in args))).astype(out)
    return reference


def _native(function: Callable) -> Reference:
    """A function exact in the operands' own dtype (nextafter, ldexp, fdim, ...)."""
    def reference(args, out):
        with np.errstate(all="ignore"):
            return np.asarray(function(*args)).astype(out)
    return reference


# --- mpmath: exact special functions ------------------------------------------------------

def _mp_functions(mp: Any) -> Dict[str, Callable]:
    return {
        "sinpi": mp.sinpi, "cospi": mp.cospi,
        "j0": lambda x: mp.besselj(0, x), "j1": lambda x: mp.besselj(1, x),
        "y0": lambda x: mp.bessely(0, x), "y1": lambda x: mp.bessely(1, x),
        "jn": lambda n, x: mp.besselj(n, x), "yn": lambda n, x: mp.bessely(n, x),
        "i0": lambda x: mp.besseli(0, x), "i1": lambda x: mp.besseli(1, x),
        "erfinv": mp.erfinv, "erfcinv": lambda x: mp.erfinv(1 - x),
        "erfcx": lambda x: mp.exp(x * x) * mp.erfc(x),
        "normcdf": lambda x: mp.erfc(-x / mp.sqrt(2)) / 2,
        "normcdfinv": lambda p: mp.sqrt(2) * mp.erfinv(2 * p - 1),
        "tgamma": mp.gamma,
    }


# Values at the points mpmath does not evaluate (the C library's limits and poles).
_MP_SPECIAL = {
    ("j0", math.inf): 0.0, ("j0", -math.inf): 0.0, ("j1", math.inf): 0.0,
    ("j1", -math.inf): -0.0, ("y0", math.inf): 0.0, ("y1", math.inf): 0.0,
    ("y0", 0.0): -math.inf, ("y1", 0.0): -math.inf,
    ("i0", math.inf): math.inf, ("i0", -math.inf): math.inf, ("i1", math.inf): math.inf,
    ("i1", -math.inf): -math.inf, ("erfcx", math.inf): 0.0, ("erfcx", -math.inf): math.inf,
    ("erfinv", 1.0): math.inf, ("erfinv", -1.0): -math.inf, ("erfcinv", 0.0): math.inf,
    ("erfcinv", 2.0): -math.inf, ("normcdf", math.inf): 1.0, ("normcdf", -math.inf): 0.0,
    ("normcdfinv", 0.0): -math.inf, ("normcdfinv", 1.0): math.inf,
    ("tgamma", math.inf): math.inf,
}


# Far tails mpmath cannot reach (it overflows a float deciding its series): the limits, exact
# to far below an fp64 ulp at |x| > 1e10 (erfcx(x) = 1 / (x sqrt(pi)) (1 - 1 / (2 x**2) ...)).
_FAR = {
    "normcdf": lambda x: 0.0 if x < 0 else 1.0,
    "erfcx": lambda x: math.inf if x < 0 else 1 / (x * math.sqrt(math.pi)),
}


def _round_mpf(value: Any, out: np.dtype):
    """An mpmath number rounded once to ``out`` (far outside the format: inf or 0 at once)."""
    sign, mantissa, exponent, bits = value._mpf_
    if not mantissa:
        return 0.0
    if exponent + bits > 1100 or exponent + bits < -1200:
        magnitude = math.inf if exponent + bits > 0 else 0.0
        return -magnitude if sign else magnitude
    exact = Fraction(int(mantissa)) * Fraction(2) ** int(exponent)
    return round_rational(-exact if sign else exact, out, "rn")


def _mpmath(name: str) -> Reference:
    def reference(args, out):
        import mpmath  # only for these functions (a light, pure-Python dependency)

        function = _mp_functions(mpmath)[name]

        def element(*values):
            x = values[-1]
            if isinstance(x, float) and math.isnan(x):
                return math.nan
            if len(values) == 1 and (name, x) in _MP_SPECIAL:
                return _MP_SPECIAL[(name, x)]
            if name == "tgamma" and x == 0:
                return math.copysign(math.inf, x)
            if name == "tgamma" and (x == -math.inf or (x < 0 and x == math.floor(x))):
                return math.nan
            if name in ("jn", "yn") and math.isinf(x):
                return 0.0 if x > 0 or name == "jn" else math.nan
            if name == "yn" and x == 0:
                return -math.inf
            if name in _FAR and abs(x) > 1e10:
                return _FAR[name](x)
            if name in ("i0", "i1") and abs(x) > 1000:  # e**|x|: beyond every format
                return math.inf if name == "i0" or x > 0 else -math.inf
            # erfcinv and normcdfinv first form 1 - x or 2p - 1: exact with x's exponent's bits.
            extra = max(0, -math.frexp(x)[1]) if name in ("erfcinv", "normcdfinv") else 0
            try:
                with mpmath.workprec(_MP_PRECISION[out] + extra):
                    value = function(*(mpmath.mpf(v) if isinstance(v, float) else v
                                       for v in values))
            except (ArithmeticError, ValueError, TypeError):  # outside the domain (-inf, ...)
                return math.nan
            if isinstance(value, mpmath.mpc) or mpmath.isnan(value):
                return math.nan
            if mpmath.isinf(value):
                return float(value)
            return _round_mpf(value, out)

        return _elementwise(element, args, out)
    return reference


# --- exact arithmetic in a rounding mode --------------------------------------------------

def _sign_negative(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def _exact_op(op: str, mode: str) -> Reference:
    """add, sub, mul, div, fma, sqrt, rcp rounded in ``mode``: exact rationals when every
    operand is finite, IEEE's own special results (NaN, inf) otherwise."""
    numpy_ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                 "sqrt": np.sqrt, "rcp": lambda x: np.divide(1.0, x),
                 "fma": lambda a, b, c: a * b + c}

    def element_for(out):
        def element(*values):
            if op == "fma" and all(map(math.isfinite, values[:2])) and math.isinf(values[2]):
                return values[2]  # a finite product plus an infinity, whatever it rounds to
            if not all(math.isfinite(v) for v in values) or (
                    op in ("div", "rcp") and values[-1] == 0) or (op == "sqrt" and values[0] < 0):
                with np.errstate(all="ignore"):
                    return numpy_ops[op](*(out.type(v) for v in values))
            q = [Fraction(v) for v in values]
            if op == "sqrt":
                return round_rational(sqrt_rational(q[0]), out, mode, _sign_negative(values[0]))
            if op == "rcp":
                return round_rational(1 / q[0], out, mode)
            if op == "div":
                zero_negative = _sign_negative(values[0]) != _sign_negative(values[1])
                return round_rational(q[0] / q[1], out, mode, zero_negative)
            if op == "mul":
                zero_negative = _sign_negative(values[0]) != _sign_negative(values[1])
                return round_rational(q[0] * q[1], out, mode, zero_negative)
            if op == "fma":
                terms = [(q[0] * q[1], _sign_negative(values[0]) != _sign_negative(values[1])),
                         (q[2], _sign_negative(values[2]))]
            else:
                second = -q[1] if op == "sub" else q[1]
                second_negative = _sign_negative(values[1]) != (op == "sub")
                terms = [(q[0], _sign_negative(values[0])), (second, second_negative)]
            total = terms[0][0] + terms[1][0]
            # An exact zero sum: -0 when both terms are -0, or in mode rd; else +0 (IEEE 754).
            both_zero_negative = all(t == 0 and neg for t, neg in terms)
            return round_rational(total, out, mode, both_zero_negative or mode == "rd")
        return element

    return lambda args, out: _elementwise(element_for(out), args, out)


def _to_float(mode: str) -> Reference:
    def element_for(out):
        def element(x):
            if isinstance(x, float) and not math.isfinite(x):
                return x
            return round_rational(Fraction(x), out, mode, _sign_negative(float(x)))
        return element
    return lambda args, out: _elementwise(element_for(out), args, out)


def _to_int(signed: bool, mode: str) -> Reference:
    def reference(args, out):
        bits = out.itemsize * 8
        # libdevice turns a NaN double into the sign-bit pattern (0x80000000), a NaN float into 0.
        nan_bits = 1 << (bits - 1) if args[0].dtype == np.float64 and bits == 32 else None

        def element(x):
            if nan_bits is not None and math.isnan(x):
                return nan_bits
            return to_integer(x, bits, signed, mode)
        values = _elementwise(element, args, np.dtype(object))
        return np.asarray([int(v) & ((1 << bits) - 1) for v in values.ravel()],
                          dtype=np.uint64).astype(f"u{out.itemsize}").view(out).reshape(
                              values.shape)
    return reference


# --- integer and bit functions ------------------------------------------------------------

def _int_elementwise(fn: Callable) -> Reference:
    """fn on Python ints; the result's low bits are kept (two's complement wrap)."""
    def reference(args, out):
        bits = out.itemsize * 8
        values = _elementwise(fn, args, np.dtype(object))
        wrapped = [int(v) & ((1 << bits) - 1) for v in values.ravel()]
        return np.asarray(wrapped, dtype=np.uint64).astype(f"u{out.itemsize}").view(
            out).reshape(values.shape)
    return reference


def _width(args) -> int:
    return args[0].dtype.itemsize * 8


def _unsigned(x: int, bits: int) -> int:
    return x & ((1 << bits) - 1)


def _bit_function(fn: Callable) -> Reference:
    """fn(unsigned value, bit width) of the first operand."""
    def reference(args, out):
        bits = _width(args)
        return _int_elementwise(lambda x: fn(_unsigned(x, bits), bits))(args, out)
    return reference


def _byte_perm(x: int, y: int, s: int) -> int:
    source = _unsigned(x, 32) | (_unsigned(y, 32) << 32)
    result = 0
    for i in range(4):  # prmt: each result byte is the source byte the selector nibble names
        selector = (s >> (4 * i)) & 0x7
        result |= ((source >> (8 * selector)) & 0xFF) << (8 * i)
    return result


def _sign_extend(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def _mul24(args, out):
    signed = out.kind == "i"
    narrow = (lambda v: _sign_extend(v, 24)) if signed else (lambda v: v & 0xFFFFFF)
    return _int_elementwise(lambda a, b: narrow(a) * narrow(b))(args, out)


def _mulhi(args, out):
    bits = out.itemsize * 8
    return _int_elementwise(lambda a, b: (a * b) >> bits)(args, out)


# --- float functions with their own special cases -----------------------------------------

def _ilogb(args, out):
    def element(x):
        if math.isnan(x) or x == 0:
            return _INT_MIN32
        if math.isinf(x):
            return _INT_MAX32
        return math.frexp(x)[1] - 1
    return _elementwise(element, args, out)


def _logb(args, out):
    x = args[0]
    with np.errstate(all="ignore"):
        exponent = np.frexp(x)[1].astype(F64) - 1
        result = np.where(x == 0, -np.inf, np.where(np.isfinite(x), exponent, np.abs(x)))
    return result.astype(out)


def _round(args, out):
    x = args[0]
    truncated = np.trunc(x)
    with np.errstate(all="ignore"):  # |x - trunc(x)| is exact: half away from zero
        away = np.abs(x - truncated) >= 0.5
        return np.where(away, truncated + np.sign(x), truncated).astype(out)


def _llround(args, out):
    def element(x):
        if math.isnan(x):
            return -(1 << 63)
        if math.isinf(x):
            return (1 << 63) - 1 if x > 0 else -(1 << 63)
        q = Fraction(x)
        rounded = math.floor(abs(q) + Fraction(1, 2)) * (1 if q >= 0 else -1)
        return min(max(rounded, -(1 << 63)), (1 << 63) - 1)
    return _int_elementwise(element)(args, out)


def _remainder(args, out):
    def element(x, y):
        try:
            return math.remainder(x, y)
        except ValueError:
            return math.nan
    return _elementwise(element, args, out)


def _lgamma(args, out):
    def element(x):
        try:
            return math.lgamma(x)
        except ValueError:  # the poles 0, -1, -2, ...
            return math.inf
        except OverflowError:
            return math.inf
    return _elementwise(element, args, out)


def _special(function: Callable) -> Reference:
    return lambda args, out: _elementwise(function, args, out)


def _rsqrt(args, out):
    def element(x):
        if math.isnan(x) or x < 0:
            return math.nan
        if x == 0:
            return math.copysign(math.inf, x)
        if math.isinf(x):
            return 0.0
        return round_rational(sqrt_rational(1 / Fraction(x)), out, "rn")
    return _elementwise(element, args, out)


def _norm(reciprocal: bool) -> Reference:
    def reference(args, out):
        with np.errstate(all="ignore"):
            wide = [np.abs(a.astype(F64)) for a in args]
            total = np.sqrt(sum(w * w for w in wide)) if out == F32 else _hypot_all(wide)
            infinite = np.logical_or.reduce([np.isinf(w) for w in wide])
            total = np.where(infinite, np.inf, total)  # inf beats NaN, as hypot
            return (1.0 / total if reciprocal else total).astype(out)
    return reference


def _hypot_all(values):
    result = values[0]
    for value in values[1:]:
        result = np.hypot(result, value)
    return result


def _cbrt_reciprocal(args, out):
    with np.errstate(all="ignore"):
        return (1.0 / np.cbrt(args[0].astype(F64))).astype(out)


def _fdim(args, out):
    x, y = args
    with np.errstate(all="ignore"):
        difference = np.where(x > y, x - y, x.dtype.type(0))
        return np.where(np.isnan(x) | np.isnan(y), np.nan, difference).astype(out)


def _hiloint2double(args, out):
    high, low = (a.astype(np.int64).view(np.uint64) & np.uint64(0xFFFFFFFF) for a in args)
    return ((high << np.uint64(32)) | low).view(F64)


def _bits(args, out):
    return np.ascontiguousarray(args[0]).view(out)


_REFERENCES: Dict[str, Reference] = {
    "clz": _bit_function(lambda x, bits: bits - x.bit_length()),
    "popc": _bit_function(lambda x, bits: bin(x).count("1")),
    "brev": _bit_function(lambda x, bits: int(format(x, f"0{bits}b")[::-1], 2)),
    "ffs": _bit_function(lambda x, bits: (x & -x).bit_length()),
    "byte_perm": _int_elementwise(_byte_perm),
    "mulhi": _mulhi,
    "mul24": _mul24,
    "sad": _int_elementwise(lambda x, y, z: abs(x - y) + _unsigned(z, 32)),
    "hadd": _int_elementwise(lambda x, y: (x + y) >> 1),
    "rhadd": _int_elementwise(lambda x, y: (x + y + 1) >> 1),
    "abs": lambda args, out: (np.abs(args[0]) if out.kind == "f" else
                              _int_elementwise(abs)(args, out)),
    "saturate": _native(lambda x: np.where(np.isnan(x), 0, np.clip(x, 0, 1))),
    "rsqrt": _rsqrt,
    "exp10": lambda args, out: _numpy("power")([np.full_like(args[0], 10), args[0]], out),
    "erf": _special(math.erf),
    "erfc": _special(math.erfc),
    "lgamma": _lgamma,
    "pow": _numpy("power"),
    "remainder": _remainder,
    "fdim": _fdim,
    "round": _round,
    "llround": _llround,
    "llrint": _to_int(True, "rn"),
    "ilogb": _ilogb,
    "logb": _logb,
    "ldexp": _native(lambda x, n: np.ldexp(x, n.astype(np.int32))),
    "rhypot": _norm(True),
    "norm": _norm(False),
    "rnorm": _norm(True),
    "rcbrt": _cbrt_reciprocal,
    "isnan": _native(np.isnan),
    "isinf": _native(np.isinf),
    "isfinite": _native(np.isfinite),
    "signbit": _native(np.signbit),
    "hiloint2double": _hiloint2double,
    "double2loint": lambda args, out: args[0].view(np.uint64).astype(np.uint32).view(out),
    "double2hiint": lambda args, out: (args[0].view(np.uint64) >> np.uint64(32)).astype(
        np.uint32).view(out),
    "bits": _bits,
}

_NATIVE_NUMPY = {"nextafter", "copysign", "fmod", "floor", "ceil", "trunc", "rint"}


def reference(name: str) -> Reference:
    """The function a table row's ``reference`` names (see this module's docstring)."""
    if name.startswith("np."):
        function = name[3:]
        if function in _NATIVE_NUMPY:  # exact in the operand dtype (nextafter must be)
            return _native(getattr(np, function))
        return _numpy(function)
    if name.startswith("mp."):
        return _mpmath(name[3:])
    base, _, mode = name.partition(":")
    if base in ("add", "sub", "mul", "div", "fma", "sqrt", "rcp"):
        return _exact_op(base, mode or "rn")
    if base == "to_float":
        return _to_float(mode)
    if base in ("to_int", "to_uint"):
        return _to_int(base == "to_int", mode)
    return _REFERENCES[base]
