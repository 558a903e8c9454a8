"""An independent reference for the libdevice functions, and ulp comparisons (for tests).

Independent of the interpreter's references (interpreter/libdevice_ref.py): special functions
come from SciPy (float64) instead of mpmath; directed rounding picks, among the neighbours of
NumPy's nearest value, the one the mode asks for by exact comparisons (instead of building
the rounded significand); decimal rounds halfway cases; struct reads bit patterns.
Example: ``want = expected("div_rz", signature, [x, y])``.
"""
from __future__ import annotations

import decimal
import math
import struct
from fractions import Fraction
from typing import Callable, Dict, List

import numpy as np

from tessera.language.extra.libdevice_table import BOOL_RESULTS, Signature

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
_NUMPY = {"int32": np.dtype(np.int32), "uint32": np.dtype(np.uint32),
          "int64": np.dtype(np.int64), "uint64": np.dtype(np.uint64), "fp32": F32, "fp64": F64}


def _each(fn: Callable, args: List[np.ndarray], out: np.dtype) -> np.ndarray:
    shape = args[0].shape
    flat = [a.ravel() for a in args]
    values = [fn(*(a[i].item() for a in flat)) for i in range(flat[0].size)]
    if out.kind in "iu":  # wrap Python ints to the result's width
        bits = out.itemsize * 8
        values = [int(v) & ((1 << bits) - 1) for v in values]
        return np.array(values, dtype=f"u{out.itemsize}").view(out).reshape(shape)
    return np.array(values, dtype=F64).astype(out).reshape(shape)


# --- correct rounding by exact comparisons -------------------------------------------------

def _directed(sign_vs_exact: Callable[[Fraction], int], approx: float, dtype: np.dtype,
              mode: str, zero_negative: bool = False):
    """The float of ``dtype`` that ``mode`` rounds the exact value to, given
    ``sign_vs_exact(q) = sign(q - exact)`` and ``approx``, a float within an ulp or two of it.
    The nearest-even search treats inf as 2**(emax+1), as IEEE's overflow rule does."""
    top = Fraction(2) ** int(np.finfo(dtype).maxexp)

    def sign(c: float) -> int:
        return (1 if c > 0 else -1) if math.isinf(c) else sign_vs_exact(Fraction(c))

    def value(c: float) -> Fraction:
        return (top if c > 0 else -top) if math.isinf(c) else Fraction(c)

    largest = float(np.finfo(dtype).max)
    start = dtype.type(min(max(approx, -largest), largest))
    neighbours = {float(start)}
    for direction in (-np.inf, np.inf):
        c = start
        for _ in range(2):
            c = np.nextafter(c, dtype.type(direction))
            neighbours.add(float(c))
    neighbours = sorted(neighbours)
    signs = [sign(c) for c in neighbours]
    if 0 in signs:
        exact = neighbours[signs.index(0)]
        return dtype.type(-0.0 if exact == 0 and zero_negative else exact)
    below = max(c for c, s in zip(neighbours, signs) if s < 0)
    above = min(c for c, s in zip(neighbours, signs) if s > 0)
    if mode == "rn":
        middle = sign_vs_exact((value(below) + value(above)) / 2)
        if middle == 0:  # a tie: the even significand (inf counts as even)
            odd = int(np.array(below, dtype=dtype).view(f"u{dtype.itemsize}")) % 2
            result = above if odd and not math.isinf(below) else below
        else:
            result = below if middle > 0 else above
    elif mode == "rd":
        result = below
    elif mode == "ru":
        result = above
    else:  # rz: toward zero
        result = below if sign_vs_exact(Fraction(0)) < 0 else above
    return dtype.type(result)


def round_exact(exact: Fraction, dtype: np.dtype, mode: str, zero_negative: bool = False):
    """``exact`` rounded to ``dtype`` in ``mode`` (rn, rz, rd, ru)."""
    if exact == 0:
        return dtype.type(-0.0 if zero_negative else 0.0)
    try:
        approx = float(exact)
    except OverflowError:
        approx = math.inf if exact > 0 else -math.inf
    if math.isinf(approx):
        approx = math.copysign(float(np.finfo(dtype).max), approx)

    def sign_vs_exact(q: Fraction) -> int:
        return (q > exact) - (q < exact)
    return _directed(sign_vs_exact, approx, dtype, mode, zero_negative)


def _negative(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def _arith(op: str, mode: str) -> Callable:
    def element_for(out):
        def element(*v):
            ieee = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
                    "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
                    "fma": lambda a, b, c: a * b + c, "rcp": lambda a: 1 / a,
                    "sqrt": np.sqrt}[op]
            if op == "fma" and all(map(math.isfinite, v[:2])) and math.isinf(v[2]):
                return v[2]
            if not all(map(math.isfinite, v)) or (op in ("div", "rcp") and v[-1] == 0) or (
                    op == "sqrt" and v[0] < 0):
                with np.errstate(all="ignore"):
                    return float(ieee(*(out.type(x) for x in v)))
            q = [Fraction(x) for x in v]
            if op == "sqrt":
                if v[0] == 0:
                    return v[0]

                def sign_vs_root(c: Fraction) -> int:  # sign(c - sqrt(v)), exactly
                    return -1 if c < 0 else (c * c > q[0]) - (c * c < q[0])
                return float(_directed(sign_vs_root, math.sqrt(v[0]), out, mode))
            if op == "fma":
                exact, terms = q[0] * q[1] + q[2], [(q[0] * q[1], _negative(v[0]) != _negative(
                    v[1])), (q[2], _negative(v[2]))]
            elif op in ("add", "sub"):
                second = -q[1] if op == "sub" else q[1]
                exact = q[0] + second
                terms = [(q[0], _negative(v[0])), (second, _negative(v[1]) != (op == "sub"))]
            else:
                exact = {"mul": lambda: q[0] * q[1], "div": lambda: q[0] / q[1],
                         "rcp": lambda: 1 / q[0]}[op]()
                terms = None
            if terms is not None:
                zero_negative = all(t == 0 and n for t, n in terms) or mode == "rd"
            else:
                zero_negative = _negative(v[0]) != _negative(v[-1] if op != "rcp" else 1.0)
            return float(round_exact(exact, out, mode, zero_negative))
        return element
    return lambda args, out: _each(element_for(out), args, out)


def _to_float(mode: str) -> Callable:
    def element_for(out):
        def element(x):
            if isinstance(x, float) and not math.isfinite(x):
                return x
            return float(round_exact(Fraction(x), out, mode, isinstance(x, float) and
                                     _negative(x)))
        return element
    return lambda args, out: _each(element_for(out), args, out)


def _to_int(signed: bool, mode: str) -> Callable:
    rounders = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}

    def reference(args, out):
        bits = out.itemsize * 8
        low, high = ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed
                     else (0, (1 << bits) - 1))

        # NaN: 0 from a float, the sign-bit pattern from a double (as the GPU's libdevice does)
        # or into 64 bits.
        from_double = args[0].dtype == np.float64

        def element(x):
            if math.isnan(x):
                if bits == 32 and not from_double:
                    return 0
                return (-(1 << (bits - 1)) if signed else 1 << (bits - 1))
            if math.isinf(x):
                return high if x > 0 else low
            return min(max(int(rounders[mode](x)), low), high)
        return _each(element, args, out)
    return reference


# --- the functions ---------------------------------------------------------------------------

def _scipy(name: str, *fixed) -> Callable:
    def reference(args, out):
        import scipy.special as special
        with np.errstate(all="ignore"):
            values = getattr(special, name)(*fixed, *(a.astype(F64) for a in args))
        return np.asarray(values).astype(out)
    return reference


def _erfcinv(args, out):
    """SciPy's erfcinv, except for subnormal inputs, where SciPy returns inf though the answer
    is finite (erfcinv(5e-324) = 27.213...): solved there with mpmath."""
    values = _scipy("erfcinv")(args, np.float64)
    x = args[0].astype(F64)
    tiny = (x > 0) & (x < np.finfo(F64).tiny)
    if tiny.any():
        import mpmath
        with mpmath.workdps(40):
            for index in zip(*np.nonzero(tiny)):
                target = mpmath.mpf(float(x[index]))
                values[index] = float(mpmath.findroot(lambda t: mpmath.erfc(t) - target, 27))
    return np.asarray(values).astype(out)


def _f64(function: Callable) -> Callable:
    def reference(args, out):
        with np.errstate(all="ignore"):
            return np.asarray(function(*(a.astype(F64) for a in args))).astype(out)
    return reference


def _decimal_round(x: float) -> float:
    if not math.isfinite(x):
        return x
    rounded = decimal.Decimal(x).to_integral_value(rounding=decimal.ROUND_HALF_UP)
    return math.copysign(float(rounded), x)


def _remainder(x: float, y: float) -> float:
    if not (math.isfinite(x) and y != 0 and not math.isnan(y)):
        return math.nan
    if math.isinf(y):
        return x
    quotient = Fraction(x) / Fraction(y)
    result = Fraction(x) - round(quotient) * Fraction(y)  # round(): ties to even
    return math.copysign(float(result), x) if result == 0 else float(result)


def _frexp_exponent(x: float) -> int:
    return math.frexp(x)[1] - 1


def _ilogb(x: float) -> int:
    if math.isnan(x) or x == 0:
        return -(1 << 31)
    return (1 << 31) - 1 if math.isinf(x) else _frexp_exponent(x)


def _logb(x: float) -> float:
    if math.isnan(x) or math.isinf(x):
        return abs(x)
    return -math.inf if x == 0 else float(_frexp_exponent(x))


def _bits_of(x: float, fmt: str) -> bytes:
    return struct.pack(fmt, x)


def _reinterpret(args, out):
    source = args[0].dtype
    codes = {"f4": "<f", "f8": "<d", "i4": "<i", "u4": "<I", "i8": "<q", "u8": "<Q"}
    read, write = codes[source.str[1:]], codes[out.str[1:]]
    values = [struct.unpack(write, struct.pack(read, v))[0] for v in args[0].ravel().tolist()]
    return np.array(values, dtype=out).reshape(args[0].shape)


def _sinpi(cos: bool) -> Callable:
    def reference(args, out):
        x = args[0].astype(F64)
        with np.errstate(all="ignore"):
            reduced = np.fmod(x, 2.0)  # exact
            value = np.cos(np.pi * reduced) if cos else np.sin(np.pi * reduced)
            # Exact zeros: sinpi at integers (with x's sign), cospi at half-integers (+0).
            if cos:
                value = np.where(np.isfinite(x) & (np.fmod(x, 1.0) == 0.5) |
                                 (np.fmod(x, 1.0) == -0.5), 0.0, value)
            else:
                value = np.where(np.isfinite(x) & (x == np.round(x)),
                                 np.where(np.signbit(x), -0.0, 0.0), value)
        return value.astype(out)
    return reference


def _llround(x: float) -> int:
    if math.isnan(x):
        return -(1 << 63)
    if math.isinf(x):
        return (1 << 63) - 1 if x > 0 else -(1 << 63)
    return min(max(int(_decimal_round(x)), -(1 << 63)), (1 << 63) - 1)


def _bessel(name: str, odd: bool = False, first_kind: bool = True) -> Callable:
    """SciPy's Bessel function with the C library's values at +-inf (SciPy gives NaN)."""
    scipy_reference = _scipy(name)

    def reference(args, out):
        result = scipy_reference(args, out)
        x = args[-1]
        if first_kind:
            limit = np.where(x < 0, -0.0, 0.0) if odd else 0.0
            return np.where(np.isinf(x), limit, result).astype(out)
        return np.where(x == np.inf, 0.0, result).astype(out)
    return reference


def _bessel_i(odd: bool) -> Callable:
    scipy_reference = _scipy("i1" if odd else "i0")

    def reference(args, out):
        x = args[0]
        limit = np.where(x < 0, -np.inf, np.inf) if odd else np.inf
        return np.where(np.isinf(x), limit, scipy_reference(args, out)).astype(out)
    return reference


def _lgamma(args, out):
    result = _scipy("gammaln")(args, out)
    x = args[0].astype(F64)
    with np.errstate(all="ignore"):  # near 0, gamma(x) overflows but log|gamma| = -log|x|
        result = np.where(np.abs(x) < 1e-300, -np.log(np.abs(x)), result)
    return np.where(np.isinf(x), np.inf, result).astype(out)  # C: lgamma(-inf) = inf


def _clz(x: int, bits: int) -> int:
    text = format(x & ((1 << bits) - 1), f"0{bits}b")
    return text.index("1") if "1" in text else bits


def _ffs(x: int, bits: int) -> int:
    text = format(x & ((1 << bits) - 1), f"0{bits}b")
    return bits - text.rindex("1") if "1" in text else 0


def _brev(x: int, bits: int) -> int:
    value, result = x & ((1 << bits) - 1), 0
    for _ in range(bits):
        result, value = (result << 1) | (value & 1), value >> 1
    return result


def _byte_perm(x: int, y: int, s: int) -> int:
    source = struct.pack("<II", x & 0xFFFFFFFF, y & 0xFFFFFFFF)
    picked = bytes(source[(s >> (4 * i)) & 7] for i in range(4))
    return struct.unpack("<I", picked)[0]


def _width_of(args) -> int:
    return args[0].dtype.itemsize * 8


def _signed24(v: int) -> int:
    v &= 0xFFFFFF
    return v - (1 << 24) if v & 0x800000 else v


_BY_NAME: Dict[str, Callable] = {
    "clz": lambda args, out: _each(lambda x: _clz(x, _width_of(args)), args, out),
    "ffs": lambda args, out: _each(lambda x: _ffs(x, _width_of(args)), args, out),
    "brev": lambda args, out: _each(lambda x: _brev(x, _width_of(args)), args, out),
    "popc": lambda args, out: np.bitwise_count(args[0].view(f"u{args[0].itemsize}")).astype(
        out),
    "byte_perm": lambda args, out: _each(_byte_perm, args, out),
    "mulhi": lambda args, out: _each(lambda a, b: (a * b) >> (out.itemsize * 8), args, out),
    "mul24": lambda args, out: _each(
        (lambda a, b: _signed24(a) * _signed24(b)) if out.kind == "i" else
        (lambda a, b: (a & 0xFFFFFF) * (b & 0xFFFFFF)), args, out),
    "sad": lambda args, out: _each(lambda x, y, z: abs(x - y) + (z & 0xFFFFFFFF), args, out),
    "hadd": lambda args, out: _each(lambda x, y: (x + y) // 2, args, out),
    "rhadd": lambda args, out: _each(lambda x, y: -((-(x + y)) // 2), args, out),
    "abs": lambda args, out: (_f64(np.fabs)(args, out) if out.kind == "f"
                              else _each(abs, args, out)),
    "saturatef": lambda args, out: _each(lambda x: 0.0 if math.isnan(x) else min(max(x, 0.0),
                                                                                 1.0), args, out),
    "rcp64h": _f64(lambda x: 1 / x),
    "rsqrt": _f64(lambda x: 1 / np.sqrt(x)), "rsqrt_rn": _f64(lambda x: 1 / np.sqrt(x)),
    "sqrt": _arith("sqrt", "rn"), "fma": _arith("fma", "rn"),
    "fast_dividef": _f64(np.divide),
    "hiloint2double": lambda args, out: _each(lambda h, lo: struct.unpack("<d", struct.pack(
        "<Q", ((h & 0xFFFFFFFF) << 32) | (lo & 0xFFFFFFFF)))[0], args, out),
    "double2loint": lambda args, out: _each(lambda d: struct.unpack("<ii", _bits_of(d, "<d"))[0],
                                            args, out),
    "double2hiint": lambda args, out: _each(lambda d: struct.unpack("<ii", _bits_of(d, "<d"))[1],
                                            args, out),
    "int_as_float": _reinterpret, "float_as_int": _reinterpret, "uint_as_float": _reinterpret,
    "float_as_uint": _reinterpret, "longlong_as_double": _reinterpret,
    "double_as_longlong": _reinterpret,
    "isnan": lambda args, out: _each(math.isnan, args, out),
    "isinf": lambda args, out: _each(math.isinf, args, out),
    "finitef": lambda args, out: _each(math.isfinite, args, out),
    "isfinited": lambda args, out: _each(math.isfinite, args, out),
    "signbit": lambda args, out: _each(_negative, args, out),
    "llrint": _to_int(True, "rn"),
    "llround": lambda args, out: _each(_llround, args, out),
    "round": lambda args, out: _each(_decimal_round, args, out),
    "remainder": lambda args, out: _each(_remainder, args, out),
    "fdim": lambda args, out: _each(lambda x, y: math.nan if math.isnan(x) or math.isnan(y)
                                    else (x - y if x > y else 0.0), args, out),
    "ilogb": lambda args, out: _each(_ilogb, args, out),
    "logb": lambda args, out: _each(_logb, args, out),
    "ldexp": lambda args, out: _each(lambda x, n: x * 2.0 ** n if math.isfinite(x) else x,
                                     [args[0].astype(F64), args[1]], out),
    "nextafter": lambda args, out: np.nextafter(args[0], args[1]).astype(out),
    "copysign": _f64(np.copysign), "fmod": _f64(np.fmod),
    "sinpi": _sinpi(False), "cospi": _sinpi(True),
    "exp10": _f64(lambda x: np.power(10.0, x)), "fast_exp10f": _f64(lambda x: np.power(10.0, x)),
    "rcbrt": _f64(lambda x: 1 / np.cbrt(x)),
    "hypot": _f64(np.hypot), "rhypot": _f64(lambda x, y: 1 / np.hypot(x, y)),
    "norm3d": _f64(lambda a, b, c: np.hypot(np.hypot(a, b), c)),
    "rnorm3d": _f64(lambda a, b, c: 1 / np.hypot(np.hypot(a, b), c)),
    "norm4d": _f64(lambda a, b, c, d: np.hypot(np.hypot(a, b), np.hypot(c, d))),
    "rnorm4d": _f64(lambda a, b, c, d: 1 / np.hypot(np.hypot(a, b), np.hypot(c, d))),
    "pow": _f64(np.power), "fast_powf": _f64(np.power),
    "erf": _scipy("erf"), "erfc": _scipy("erfc"), "erfinv": _scipy("erfinv"),
    "erfcinv": _erfcinv, "erfcx": _scipy("erfcx"), "normcdf": _scipy("ndtr"),
    "normcdfinv": _scipy("ndtri"), "lgamma": _lgamma, "tgamma": _scipy("gamma"),
    "j0": _bessel("j0"), "j1": _bessel("j1", odd=True), "y0": _bessel("y0", first_kind=False),
    "y1": _bessel("y1", first_kind=False), "jn": _bessel("jv"),
    "yn": _bessel("yn", first_kind=False), "cyl_bessel_i0": _bessel_i(False),
    "cyl_bessel_i1": _bessel_i(True),
}
_BY_NAME["scalbn"] = _BY_NAME["ldexp"]
_NUMPY_NAMES = {"floor": "floor", "ceil": "ceil", "trunc": "trunc", "exp2": "exp2",
                "rint": "rint", "nearbyint": "rint", "sin": "sin", "cos": "cos", "tan": "tan",
                "log2": "log2", "exp": "exp", "cosh": "cosh", "sinh": "sinh", "tanh": "tanh",
                "atan2": "arctan2", "atan": "arctan", "asin": "arcsin", "acos": "arccos",
                "log": "log", "log10": "log10", "log1p": "log1p", "acosh": "arccosh",
                "asinh": "arcsinh", "atanh": "arctanh", "expm1": "expm1", "cbrt": "cbrt",
                "fast_sinf": "sin", "fast_cosf": "cos", "fast_log2f": "log2",
                "fast_logf": "log", "fast_expf": "exp", "fast_tanf": "tan",
                "fast_log10f": "log10"}


def _lookup(name: str) -> Callable:
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name in _NUMPY_NAMES:
        return _f64(getattr(np, _NUMPY_NAMES[name]))
    base, _, mode = name.rpartition("_")
    if base in ("add", "sub", "mul", "div", "fma", "sqrt", "rcp"):
        return _arith(base, mode)
    source, _, target = base.partition("2")
    if target in ("float", "double"):
        return _to_float(mode)
    if target in ("int", "uint", "ll", "ull"):
        return _to_int(target in ("int", "ll"), mode)
    raise KeyError(f"no reference for libdevice.{name}")


def expected(name: str, signature: Signature, args: List[np.ndarray]) -> np.ndarray:
    """libdevice.<name>(*args) for one signature, from the independent reference."""
    typed = [np.asarray(a).astype(_NUMPY[t]) for a, t in zip(args, signature.args)]
    out = _NUMPY[signature.result]
    result = _lookup(name)(typed, out)
    if name in BOOL_RESULTS:
        return np.asarray(result).astype(np.bool_)
    return np.asarray(result).astype(out)


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units in the last place of want's dtype (ordered bit patterns); 0 where
    both are NaN, huge where only one is."""
    dtype = want.dtype
    signed = np.dtype(f"i{dtype.itemsize}")

    def ordered(x):
        bits = np.ascontiguousarray(x, dtype=dtype).view(signed).astype(object)
        return np.where(bits < 0, -(bits & (2 ** (8 * dtype.itemsize - 1) - 1)), bits)
    distance = np.abs(ordered(got) - ordered(want)).astype(np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    one_nan = np.isnan(got) != np.isnan(want)
    return np.where(both_nan, 0.0, np.where(one_nan, np.inf, distance))


def mismatches(got: np.ndarray, want: np.ndarray, ulps: float = 0, abs_tol: float = 0.0,
               rel_tol: float = 0.0) -> np.ndarray:
    """Indices where ``got`` is neither within ``ulps`` of ``want`` nor within
    abs_tol + rel_tol * |want| (NaN matches NaN; integers must be equal)."""
    if want.dtype.kind != "f":
        return np.flatnonzero(got != want)
    with np.errstate(all="ignore"):
        close = ulp_distance(got, want) <= ulps
        finite = np.isfinite(want) & np.isfinite(got)
        near = np.abs(got.astype(F64) - want.astype(F64)) <= abs_tol + rel_tol * np.abs(
            want.astype(F64))
    return np.flatnonzero(~(close | (finite & near)))


def describe(name: str, args: List[np.ndarray], got: np.ndarray, want: np.ndarray,
             bad: np.ndarray, limit: int = 5) -> str:
    lines = [f"libdevice.{name}: {len(bad)} of {got.size} differ"]
    for i in bad[:limit]:
        inputs = ", ".join(repr(a.ravel()[i]) for a in args)
        lines.append(f"  ({inputs}) -> {got.ravel()[i]!r}, expected {want.ravel()[i]!r}")
    return "\n".join(lines)

