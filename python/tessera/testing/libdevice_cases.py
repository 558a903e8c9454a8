"""Test cases of the libdevice functions: batched kernels, inputs, an independent reference.

Shared by the interpreter test (tests/python/interpreter/test_libdevice.py), the PTX test
(tests/python/compiler/test_libdevice_ptx.py) and the GPU test (tests/gpu/test_libdevice.py).
Functions are grouped by signature; one kernel launch runs a whole group, function ``k``
reading its own inputs at row ``k`` and writing row ``k`` of the output.

The reference (libdevice_reference.py) is computed independently of the interpreter's
(different libraries and algorithms: SciPy, the decimal module, exact comparisons of
neighbouring floats), so that the interpreter test checks the interpreter, and the GPU test
checks libdevice against the same values. Example::

    for group in groups():
        args = make_inputs(group, 1000, rng)
        ...
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Tuple

import numpy as np

import tessera
import tessera.language as tl
from tessera.language.extra import libdevice
from tessera.language.extra.libdevice_table import BOOL_RESULTS, FUNCTIONS, Signature

NUMPY = {"int32": np.dtype(np.int32), "uint32": np.dtype(np.uint32),
         "int64": np.dtype(np.int64), "uint64": np.dtype(np.uint64),
         "fp32": np.dtype(np.float32), "fp64": np.dtype(np.float64)}


@tessera.jit
def batch1(x0, out, n, NAMES: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for k in tl.static_range(len(NAMES)):
        a = tl.load(x0 + k * n + offs, mask=mask)
        tl.store(out + k * n + offs, getattr(libdevice, NAMES[k])(a), mask=mask)


@tessera.jit
def batch2(x0, x1, out, n, NAMES: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for k in tl.static_range(len(NAMES)):
        a = tl.load(x0 + k * n + offs, mask=mask)
        b = tl.load(x1 + k * n + offs, mask=mask)
        tl.store(out + k * n + offs, getattr(libdevice, NAMES[k])(a, b), mask=mask)


@tessera.jit
def batch3(x0, x1, x2, out, n, NAMES: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for k in tl.static_range(len(NAMES)):
        a = tl.load(x0 + k * n + offs, mask=mask)
        b = tl.load(x1 + k * n + offs, mask=mask)
        c = tl.load(x2 + k * n + offs, mask=mask)
        tl.store(out + k * n + offs, getattr(libdevice, NAMES[k])(a, b, c), mask=mask)


@tessera.jit
def batch4(x0, x1, x2, x3, out, n, NAMES: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for k in tl.static_range(len(NAMES)):
        a = tl.load(x0 + k * n + offs, mask=mask)
        b = tl.load(x1 + k * n + offs, mask=mask)
        c = tl.load(x2 + k * n + offs, mask=mask)
        d = tl.load(x3 + k * n + offs, mask=mask)
        tl.store(out + k * n + offs, getattr(libdevice, NAMES[k])(a, b, c, d), mask=mask)


KERNELS = {1: batch1, 2: batch2, 3: batch3, 4: batch4}


class Group(NamedTuple):
    """Functions of one signature, run by one launch."""
    args: Tuple[np.dtype, ...]
    result: np.dtype                         # np.bool_ for isnan & co. (int1 in the kernel)
    members: Tuple[Tuple[str, Signature], ...]
    slow: bool  # the interpreter evaluates these element by element with mpmath

    @property
    def label(self) -> str:
        args = ",".join(a.name for a in self.args)
        return f"{args}->{self.result.name}{'-mp' if self.slow else ''}"

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(name for name, _ in self.members)


def groups() -> List[Group]:
    """Every (function, signature) of the table, grouped by argument and result dtypes."""
    found: Dict[tuple, list] = {}
    for function in FUNCTIONS.values():
        for signature in function.signatures:
            result = (np.dtype(np.bool_) if function.name in BOOL_RESULTS
                      else NUMPY[signature.result])
            slow = function.reference.startswith("mp.")
            key = (tuple(NUMPY[a] for a in signature.args), result, slow)
            found.setdefault(key, []).append((function.name, signature))
    return [Group(args, result, tuple(members), slow)
            for (args, result, slow), members in found.items()]


# --- inputs ---------------------------------------------------------------------------------

def _special_floats(dtype: np.dtype) -> np.ndarray:
    info = np.finfo(dtype)
    return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5,
                     3.0, info.max, -info.max, info.tiny, -info.tiny, info.smallest_subnormal,
                     1e30, -1e30, 100.5, 1 / 3], dtype=dtype)


def _wide_floats(dtype: np.dtype, n: int, rng: np.random.Generator,
                 low: float = -12, high: float = 12) -> np.ndarray:
    """Random signs and magnitudes 2**[low, high), all mantissa bits random."""
    magnitude = rng.uniform(1.0, 2.0, n) * np.exp2(rng.integers(low, high, n))
    return (magnitude * rng.choice([-1.0, 1.0], n)).astype(dtype)


# Domains where a function is meaningful (or fast on the CPU reference); else wide floats.
_DOMAINS = {
    "asin": (-1, 1), "acos": (-1, 1), "atanh": (-1, 1), "erfinv": (-1, 1), "acosh": (1, 1e4),
    "erfcinv": (0, 2), "normcdfinv": (0, 1), "fast_sinf": (-3.14, 3.14),
    "fast_cosf": (-3.14, 3.14), "fast_tanf": (-1.2, 1.2), "fast_logf": (1e-3, 1e3),
    "fast_log2f": (1e-3, 1e3), "fast_log10f": (1e-3, 1e3), "fast_expf": (-20, 20),
    "fast_exp10f": (-8, 8), "fast_powf": (0.5, 4), "rcp64h": (1e-30, 1e30),
    "j0": (-60, 60), "j1": (-60, 60), "y0": (1e-3, 60), "y1": (1e-3, 60), "jn": (-30, 30),
    "yn": (0.1, 30), "cyl_bessel_i0": (-30, 30), "cyl_bessel_i1": (-30, 30),
    "tgamma": (-20, 30), "lgamma": (-20, 1e4), "erfcx": (-9, 1e4),
    "fast_dividef": (-1e3, 1e3),  # div.full: 2 ulp only for |y| in [2**-126, 2**126]
}
_NO_SPECIALS = {"rcp64h"} | {n for n in _DOMAINS if n.startswith("fast_")}
_INT_DOMAINS = {"jn": (0, 6), "yn": (0, 6), "ldexp": (-160, 160), "scalbn": (-160, 160),
                "pow": (-12, 12)}


def _floats(name: str, dtype: np.dtype, n: int, rng: np.random.Generator) -> np.ndarray:
    if name in _DOMAINS:
        low, high = _DOMAINS[name]
        values = rng.uniform(low, high, n).astype(dtype)
    else:
        values = _wide_floats(dtype, n, rng)
    if name not in _NO_SPECIALS and name not in ("jn", "yn"):
        specials = _special_floats(dtype)
        count = min(len(specials), n // 4)
        values[rng.choice(n, count, replace=False)] = rng.choice(specials, count)
    return values


def _ints(name: str, dtype: np.dtype, n: int, rng: np.random.Generator) -> np.ndarray:
    if name in _INT_DOMAINS:
        low, high = _INT_DOMAINS[name]
        return rng.integers(low, high, n, endpoint=True).astype(dtype)
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    small = rng.integers(-300 if info.min < 0 else 0, 300, n // 4).astype(dtype)
    values[: n // 4] = small  # small values and the extremes too
    extremes = np.array([0, 1, int(info.max), int(info.min)], dtype=object).astype(dtype)
    values[n // 4: n // 4 + 4] = extremes
    return rng.permutation(values)


def make_inputs(group: Group, n: int, rng: np.random.Generator) -> List[np.ndarray]:
    """Per argument, a (len(members), n) array: row k holds function k's inputs."""
    arrays = []
    for position, dtype in enumerate(group.args):
        rows = []
        for name, _ in group.members:
            if dtype.kind == "f":
                rows.append(_floats(name, dtype, n, rng))
            else:
                rows.append(_ints(name, dtype, n, rng))
        arrays.append(np.stack(rows))
    return arrays


# --- tolerances -------------------------------------------------------------------------------

class Tolerance(NamedTuple):
    """A result passes within ``ulps`` units in the last place, or within
    ``abs_tol + rel_tol * |expected|``."""
    ulps: float = 0
    abs_tol: float = 0.0
    rel_tol: float = 0.0


_BESSEL = {"j0", "j1", "y0", "y1", "jn", "yn", "cyl_bessel_i0", "cyl_bessel_i1"}
# The reference takes these from SciPy.
SCIPY_FUNCTIONS = {"erf", "erfc", "erfinv", "erfcinv", "erfcx", "normcdf", "normcdfinv",
                   "lgamma", "tgamma"} | _BESSEL
# Within one rounding of the exact value in both the interpreter and the reference.
_ROUNDED_ONCE = {"sin", "cos", "tan", "exp", "exp2", "exp10", "log", "log2", "log10", "log1p",
                 "expm1", "sinh", "cosh", "tanh", "asin", "acos", "atan", "atan2", "asinh",
                 "acosh", "atanh", "cbrt", "rcbrt", "hypot", "rhypot", "norm3d", "rnorm3d",
                 "norm4d", "rnorm4d", "pow", "rsqrt", "rsqrt_rn", "sinpi", "cospi",
                 "rcp64h"} | SCIPY_FUNCTIONS | {n for n in FUNCTIONS if n.startswith("fast_")}


def cpu_tolerance(name: str, signature: Signature) -> Tolerance:
    """How far the interpreter may be from the independent reference: 0 where both are exact
    (integers, bits, rounding modes, conversions), else the reference's own error."""
    if name not in _ROUNDED_ONCE or NUMPY[signature.result].kind != "f":
        return Tolerance()
    wide = signature.result == "fp64"
    if name in _BESSEL:  # SciPy's Bessel functions are accurate to ~1e-16 absolute
        return Tolerance(64 if wide else 1, abs_tol=1e-13 if wide else 1e-12)
    if name == "normcdf" and wide:  # SciPy's ndtr rounds -x / sqrt(2) first: its relative
        # error grows as x**2 ulp in the far tail (1.4e-13 seen at x = -28.2, about 2.5e-13 at
        # the underflow limit x = -38)
        return Tolerance(64, abs_tol=1e-300, rel_tol=1e-12)
    if name in SCIPY_FUNCTIONS:
        return Tolerance(64, abs_tol=1e-300, rel_tol=1e-13) if wide else Tolerance(1)
    if name in ("sinpi", "cospi") and wide:  # the reference's pi * x is rounded
        return Tolerance(4, abs_tol=1e-15)
    return Tolerance(4 if wide else 1)


# libdevice's documented accuracy (CUDA Math API, maximum ulp error), fp32 then fp64.
_GPU_ULPS = {
    "sin": (2, 2), "cos": (2, 2), "tan": (4, 2), "sinpi": (2, 2), "cospi": (2, 2),
    "exp": (2, 1), "exp2": (2, 1), "exp10": (2, 1), "expm1": (1, 1), "log": (1, 1),
    "log2": (1, 1), "log10": (2, 1), "log1p": (1, 1), "sinh": (3, 2), "cosh": (2, 1),
    "tanh": (2, 1), "asin": (4, 2), "acos": (2, 2), "atan": (2, 2), "atan2": (3, 2),
    "asinh": (3, 2), "acosh": (4, 2), "atanh": (3, 2), "pow": (8, 2), "cbrt": (1, 1),
    "rcbrt": (1, 1), "hypot": (3, 2), "rhypot": (2, 1), "norm3d": (3, 2), "rnorm3d": (2, 1),
    "norm4d": (3, 2), "rnorm4d": (2, 1), "erf": (2, 2), "erfc": (4, 5), "erfinv": (2, 5),
    "erfcinv": (4, 6), "erfcx": (4, 4), "normcdf": (5, 5), "normcdfinv": (5, 8),
    "lgamma": (6, 4), "tgamma": (5, 10), "j0": (9, 7), "j1": (9, 7), "y0": (9, 7),
    "y1": (9, 7), "jn": (32, 32), "yn": (32, 32), "cyl_bessel_i0": (6, 6),
    "cyl_bessel_i1": (6, 6), "rsqrt": (2, 1), "sqrt": (3, 0), "fast_dividef": (2, 2),
}


def gpu_tolerance(name: str, signature: Signature) -> Tolerance:
    """How far libdevice on the GPU may be from the reference: its documented bound plus the
    reference's own error; the fast_* functions and rcp64h are approximations (relative)."""
    base = cpu_tolerance(name, signature)
    if NUMPY[signature.result].kind != "f":
        return base
    wide = signature.result == "fp64"
    if name.startswith("fast_") and name != "fast_dividef" or name == "rcp64h":
        return Tolerance(base.ulps, abs_tol=1e-6, rel_tol=1e-4)
    ulps = _GPU_ULPS.get(name, (0, 0))[1 if wide else 0]
    abs_tol = base.abs_tol
    if name in _BESSEL:  # accuracy is absolute past the first zeros
        abs_tol = max(abs_tol, 5e-12 if wide else 2.2e-6)
    rel_tol = base.rel_tol
    # Measured on an H100 beyond the documented bounds: tgammaf 7 ulp near x = 24, normcdf in
    # the far tail (x < -26) 1e-13 relative (where the reference's own error is of that
    # order); powi (an int exponent) multiplies repeatedly, a few ulp per step, and its
    # subnormal results may flush to zero. pow with a float exponent is held to its documented
    # bound: the 11 to 36 ulp once seen where |y * log2 x| is large were the lowering's doing
    # (fp contraction reached into libdevice's compensated log2; codegen no longer lets it).
    if name == "pow" and signature.args[1:] == ("int32",):
        ulps = 16
        abs_tol = max(abs_tol, float(np.finfo(NUMPY[signature.result]).tiny))
    elif name == "tgamma":
        ulps = max(ulps, 8)
    elif name == "normcdf":
        rel_tol = max(rel_tol, 1e-12)
    if name == "lgamma":  # unbounded near its zeros and for x in about [-23, -2.26] (CUDA)
        abs_tol = max(abs_tol, 1e-13 if wide else 1e-5)
        rel_tol = max(rel_tol, 1e-14 if wide else 2e-6)
    return Tolerance(base.ulps + ulps, abs_tol, rel_tol)
