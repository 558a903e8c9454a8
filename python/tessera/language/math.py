"""Math functions of the kernel language: ``tl.exp``, ``tl.math.exp``, ... (triton.language.math).

Float functions take fp16, bf16, fp32 and fp64 tensors (or Python numbers) and return the
input's dtype; fp16/bf16 are computed in fp32. On the GPU exp, exp2, sqrt, rsqrt, fdiv and `/`
are fast approximations (a few ulp, as Triton's); sqrt_rn and div_rn round correctly; log,
log2, sin, cos, erf and tanh come from libdevice (within 2 ulp in fp32). The interpreter
computes every function exactly (rounded once to the dtype). Type rules: math_semantic.py.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from .core import PropagateNan, builtin, tensor, _unwrap
from .math_semantic import WIDE_FLOATS


def _unary(op: str, what: str, allowed=None) -> Callable:
    """A builtin computing the IR op ``op`` elementwise, named after ``op``'s Python name."""

    def function(x: Any, _semantic=None) -> tensor:
        if allowed is None:
            return _semantic.float_unary(op, _unwrap(x), function.__name__)
        return _semantic.float_unary(op, _unwrap(x), function.__name__, allowed)

    function.__doc__ = (f"The elementwise {what} of ``x`` (fp16, bf16, fp32, fp64"
                        f"{'' if allowed is None else '; here only ' + ', '.join(allowed)}).")
    return function


def _named(name: str, function: Callable, example: str) -> Callable:
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"{function.__doc__} Example: ``{example}``."
    return builtin(function)


exp = _named("exp", _unary("exp", "exponential e**x"), "p = tl.exp(x - m)")
exp2 = _named("exp2", _unary("exp2", "power of two 2**x"), "p = tl.exp2(x * 1.4426950408889634)")
log = _named("log", _unary("log", "natural logarithm"), "lse = m + tl.log(s)")
log2 = _named("log2", _unary("log2", "base-2 logarithm"), "bits = tl.log2(x)")
sqrt = _named("sqrt", _unary("sqrt", "fast (approximate) square root"), "r = tl.sqrt(v)")
sqrt_rn = _named("sqrt_rn", _unary("precise_sqrt", "correctly rounded square root",
                                   WIDE_FLOATS), "r = tl.sqrt_rn(v)")
rsqrt = _named("rsqrt", _unary("rsqrt", "reciprocal square root 1/sqrt(x)"),
               "inv = tl.rsqrt(var + eps)")
sin = _named("sin", _unary("sin", "sine"), "s = tl.sin(theta)")
cos = _named("cos", _unary("cos", "cosine"), "c = tl.cos(theta)")
erf = _named("erf", _unary("erf", "error function"),
             "gelu = 0.5 * x * (1 + tl.erf(x * 0.7071067811865476))")
tanh = _named("tanh", _unary("tanh", "hyperbolic tangent"), "t = tl.math.tanh(x)")
floor = _named("floor", _unary("floor", "floor (round toward -inf)"), "i = tl.floor(x)")
ceil = _named("ceil", _unary("ceil", "ceiling (round toward +inf)"), "i = tl.ceil(x)")


@builtin
def abs(x: Any, _semantic=None) -> tensor:
    """The elementwise absolute value: floats (fp8 included) clear the sign bit, signed
    integers negate (the minimum value stays itself), unsigned ones are returned unchanged.
    Example: ``err = tl.abs(a - b)``."""
    return _semantic.abs(_unwrap(x))


@builtin
def fma(x: Any, y: Any, z: Any, _semantic=None) -> tensor:
    """The elementwise fused multiply-add ``x * y + z``, rounded once (floats; operands are
    promoted to one dtype and broadcast). Example: ``acc = tl.fma(a, b, acc)``."""
    return _semantic.fma(_unwrap(x), _unwrap(y), _unwrap(z))


@builtin
def umulhi(x: Any, y: Any, _semantic=None) -> tensor:
    """The most significant N bits of the unsigned 2N-bit product of two N-bit integers
    (int32, int64, uint32, uint64). Example: ``hi = tl.umulhi(a, 0x9E3779B9)``."""
    return _semantic.umulhi(_unwrap(x), _unwrap(y))


@builtin
def div_rn(x: Any, y: Any, _semantic=None) -> tensor:
    """The elementwise division ``x / y`` rounded to nearest (fp32, fp64). Example:
    ``q = tl.div_rn(a, b)``."""
    return _semantic.div_rn(_unwrap(x), _unwrap(y))


@builtin
def fdiv(x: Any, y: Any, ieee_rounding: bool = False, _semantic=None) -> tensor:
    """The elementwise division ``x / y``: fast and approximate (2 ulp in fp32), or correctly
    rounded with ``ieee_rounding=True``. fp16/bf16 operands give fp32, as Triton. Example:
    ``p = tl.fdiv(num, den)``."""
    return _semantic.fdiv(_unwrap(x), _unwrap(y), bool(_unwrap(ieee_rounding)))


@builtin
def clamp(x: Any, min: Any, max: Any, propagate_nan: PropagateNan = PropagateNan.NONE,
          _semantic=None) -> tensor:
    """``x`` clamped to ``[min, max]`` elementwise (floats). A NaN ``x`` gives ``min`` unless
    ``propagate_nan=PropagateNan.ALL``. Example: ``y = tl.clamp(x, -6.0, 6.0)``."""
    return _semantic.clamp(_unwrap(x), _unwrap(min), _unwrap(max), _unwrap(propagate_nan))


@builtin
def sigmoid(x: Any, _semantic=None) -> tensor:
    """The logistic function ``1 / (1 + exp(-x))``, computed exactly as Triton writes it (so
    fp16/bf16 inputs give fp32, from the division). Example: ``gate = tl.sigmoid(x)``."""
    x = _semantic.to_tensor(_unwrap(x))
    denominator = _semantic.add(1, exp(_semantic.minus(x), _semantic=_semantic))
    return _semantic.truediv(1, denominator)


@builtin
def softmax(x: tensor, dim: Optional[int] = None, keep_dims: bool = False,
            ieee_rounding: bool = False, _semantic=None) -> tensor:
    """The softmax of ``x`` along ``dim`` (0 when None): ``exp(x - max) / sum(exp(x - max))``
    with the fast division unless ``ieee_rounding``, as Triton's tl.softmax. The result has
    x's shape (``keep_dims`` is accepted for Triton's signature; the row maximum and sum keep
    their dims internally so that any ``dim`` broadcasts). Example:
    ``p = tl.softmax(scores, dim=1)``."""
    from . import reduction  # the reductions build on the same Semantic

    dim = 0 if _unwrap(dim) is None else _unwrap(dim)
    x = _unwrap(x)
    largest = reduction.max(x, dim, keep_dims=True, _semantic=_semantic)
    numerator = exp(_semantic.sub(x, largest), _semantic=_semantic)
    denominator = reduction.sum(numerator, dim, keep_dims=True, _semantic=_semantic)
    return fdiv(numerator, denominator, _unwrap(ieee_rounding), _semantic=_semantic)
