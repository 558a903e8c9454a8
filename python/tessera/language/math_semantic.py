"""The type rules of the math functions (language/math.py) and the IR ops they build.

Mixed into semantic.Semantic (kept in its own file beside it). As Triton: float functions
take fp16, bf16, fp32 and fp64 and return the input's dtype; fp16/bf16 are computed in fp32
(extf, the op, truncf), because the GPU has no fp16 transcendental instructions and the IR
ops take f32/f64 only. Integers are rejected where Triton rejects them, with a hint to cast.
"""
from __future__ import annotations

from typing import Any, Sequence, Tuple

from . import core as tl
from .core import dtype, tensor

ALL_FLOATS = ("fp16", "bf16", "fp32", "fp64")
WIDE_FLOATS = ("fp32", "fp64")
UMULHI_TYPES = ("int32", "int64", "uint32", "uint64")


def check_dtypes(name: str, values: Sequence[tensor], allowed: Sequence[str]) -> None:
    """Triton's _check_dtype: every tensor argument's dtype must be one of ``allowed``."""
    for value in values:
        if value.dtype.name not in allowed:
            hint = ""
            if value.dtype.is_int() and "fp32" in allowed:
                hint = "; cast it first, e.g. x.to(tl.float32)"
            raise ValueError(f"{name} expects dtype {' or '.join(allowed)}, got "
                             f"{value.dtype}{hint}")


class MathSemantic:
    """Elementwise math: exp, log, sqrt, erf, abs, fma, umulhi, fdiv, clamp, ..."""

    # Provided by Semantic (semantic.py).
    builder: Any
    create: Any
    cast: Any
    to_tensor: Any
    binary_operands: Any
    broadcast_values: Any
    bitcast: Any
    scalar_constant: Any
    minimum: Any
    maximum: Any

    # ---- helpers -------------------------------------------------------------------------

    def _in_fp32(self, values: Sequence[tensor]) -> Tuple[list, dtype]:
        """The values in the type the op computes in (fp16/bf16 -> fp32), and their dtype."""
        out = values[0].dtype
        if out.is_fp16() or out.is_bf16():
            return [self.cast(v, tl.float32) for v in values], out
        return list(values), out

    def _build(self, op: str, values: Sequence[tensor], out: dtype) -> tensor:
        result = self.create(op, values, values[0].dtype, values[0].shape)
        return self.cast(result, out)

    # ---- unary float functions ----------------------------------------------------------

    def float_unary(self, op: str, x: Any, name: str,
                    allowed: Sequence[str] = ALL_FLOATS) -> tensor:
        """``op`` (an IR math op) of a float tensor, computed in f32/f64, in x's dtype.
        Example: float_unary("exp", x, "exp")."""
        x = self.to_tensor(x)
        check_dtypes(name, [x], allowed)
        values, out = self._in_fp32([x])
        return self._build(op, values, out)

    def abs(self, x: Any) -> tensor:
        """|x|: absf for floats (fp8 by clearing the sign bit), absi for signed integers,
        unchanged for unsigned ones (as Triton)."""
        x = self.to_tensor(x)
        if x.dtype.is_ptr():
            raise TypeError(f"abs of a pointer ({x}) is not supported")
        if x.dtype.is_fp8():
            bits = self.bitcast(x, tl.int8)
            cleared = self.create("andi", [bits, self.full_like_scalar(0x7F, tl.int8, x.shape)],
                                  tl.int8, x.shape)
            return self.bitcast(cleared, x.dtype)
        if x.dtype.is_floating():
            return self.create("absf", [x], x.dtype, x.shape)
        if x.dtype.is_int_unsigned():
            return x
        return self.create("absi", [x], x.dtype, x.shape)

    def full_like_scalar(self, value: Any, element: dtype, shape: Sequence[int]) -> tensor:
        scalar = self.scalar_constant(value, element)
        return self.create("splat", [scalar], element, shape) if shape else scalar

    # ---- functions of several operands ---------------------------------------------------

    def fma(self, x: Any, y: Any, z: Any) -> tensor:
        """x * y + z rounded once; the three operands are promoted to one float type."""
        x, y = self.binary_operands(x, y)
        z, x = self.binary_operands(z, x)
        z, y = self.binary_operands(z, y)
        x, y, z = self.broadcast_values(x, y, z)
        check_dtypes("fma", [x, y, z], ALL_FLOATS)
        values, out = self._in_fp32([x, y, z])
        return self._build("fma", values, out)

    def umulhi(self, x: Any, y: Any) -> tensor:
        """The high half of the 2N-bit unsigned product of two N-bit integers (N = 32, 64)."""
        x, y = self.binary_operands(x, y)
        check_dtypes("umulhi", [x, y], UMULHI_TYPES)
        return self.create("mulhiui", [x, y], x.dtype, x.shape)

    def div_rn(self, x: Any, y: Any) -> tensor:
        """x / y correctly rounded (the IR's divf)."""
        x, y = self.binary_operands(x, y)
        check_dtypes("div_rn", [x, y], WIDE_FLOATS)
        return self.create("divf", [x, y], x.dtype, x.shape)

    def fdiv(self, x: Any, y: Any, ieee_rounding: bool) -> tensor:
        """x / y, fast and approximate (div.full.f32, 2 ulp) unless ``ieee_rounding``, which
        rounds correctly (Triton ignores the flag; Tessera honours it). fp16/bf16 operands
        compute in fp32 and the result is fp32, as Triton's."""
        for value in (x, y):
            if isinstance(value, tensor) and not value.dtype.is_floating():
                raise TypeError(f"fdiv needs floating-point operands, got {value.dtype}")
        x, y = self.binary_operands(x, y, div_or_mod=True)
        if not x.dtype.is_floating():
            raise TypeError(f"fdiv needs floating-point operands, got {x.dtype}")
        op = "divf" if ieee_rounding else "fast_divf"
        return self.create(op, [x, y], x.dtype, x.shape)

    def clamp(self, x: Any, lo: Any, hi: Any, propagate_nan: Any) -> tensor:
        """min(max(x, lo), hi) for floats: a NaN x gives lo unless propagate_nan=ALL (as
        Triton's tt.clampf)."""
        x = self.to_tensor(x)
        if not x.dtype.is_floating():
            raise ValueError(f"clamp only supports floating-point types, got {x.dtype}")
        return self.minimum(self.maximum(x, lo, propagate_nan), hi, propagate_nan)
