"""Test helpers: build tile-IR kernels with ir.Builder in a few lines, and exact references.

KernelBuilder gives every op its own source line ("kernel.py:<n>:5") so that error messages
can be checked for the line of the faulting op. round_exact is an oracle independent of the
interpreter: it rounds an exact rational to a float format with Fractions.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Callable, List, Sequence

import ml_dtypes
import numpy as np
from tessera._tessera import ir

NP_DTYPES = {"i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
             "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
             "f64": np.float64, "f8e4m3": ml_dtypes.float8_e4m3fn,
             "f8e5m2": ml_dtypes.float8_e5m2}


def T(name: str):
    return ir.scalar(name)


def ptr(element):
    return ir.pointer(T(element) if isinstance(element, str) else element)


def tensor(shape: Sequence[int], element):
    return ir.tensor(list(shape), T(element) if isinstance(element, str) else element)


class KernelBuilder:
    """Builds one `func` with ops appended in order; regions through for_/if_/while_."""

    def __init__(self, name: str, arg_types: List, file: str = "kernel.py") -> None:
        self.module = ir.Module()
        self.builder = ir.Builder()
        self.builder.set_insertion_point_to_end(self.module.body)
        self.func = self.builder.create("func", [], [], {"sym_name": name}, 1)
        body = self.func.body(0)
        self.args = [body.add_argument(t) for t in arg_types]
        self.builder.set_insertion_point_to_end(body)
        self.file = file
        self.line = 0
        self.lines = {}  # op name -> lines where it was created

    def create(self, name: str, operands, result_types, attrs=None, regions: int = 0):
        self.line += 1
        self.lines.setdefault(name, []).append(self.line)
        self.builder.set_location(f"{self.file}:{self.line}:5")
        return self.builder.create(name, list(operands), list(result_types), attrs or {},
                                   regions)

    def op(self, name: str, *operands, type=None, **attrs):
        """One-result op; the result type defaults to the first operand's."""
        result = type if type is not None else operands[0].type
        return self.create(name, operands, [result], attrs).result(0)

    def const(self, value, t):
        t = T(t) if isinstance(t, str) else t
        return self.op("constant", type=t, value=value)

    def splat(self, scalar, shape):
        return self.op("splat", scalar, type=ir.tensor(list(shape), scalar.type))

    def range(self, start: int, end: int):
        return self.op("make_range", type=tensor([end - start], "i32"), start=start, end=end)

    def cmpi(self, predicate: str, a, b):
        return self.op("cmpi", a, b, type=a.type.with_element(T("i1")), predicate=predicate)

    def cmpf(self, predicate: str, a, b):
        return self.op("cmpf", a, b, type=a.type.with_element(T("i1")), predicate=predicate)

    def load(self, pointers, mask=None, other=None):
        operands = [v for v in (pointers, mask, other) if v is not None]
        t = pointers.type
        return self.op("load", *operands, type=t.with_element(t.element_type.pointee))

    def store(self, pointers, value, mask=None):
        operands = [v for v in (pointers, value, mask) if v is not None]
        self.create("store", operands, [])

    def pointers(self, base, offsets):
        """addptr(splat(base), offsets)."""
        return self.op("addptr", self.splat(base, offsets.type.shape), offsets,
                       type=offsets.type.with_element(base.type))

    def _region(self, block, arg_types, body: Callable, terminator: str):
        arguments = [block.add_argument(t) for t in arg_types]
        outer = self.builder.insertion_block
        self.builder.set_insertion_point_to_end(block)
        yielded = body(*arguments)
        self.create(terminator, list(yielded), [])
        self.builder.set_insertion_point_to_end(outer)

    def for_(self, lower, upper, step, inits, body: Callable):
        """body(iv, *carried) -> list of next carried values; returns the loop's results."""
        types = [v.type for v in inits]
        op = self.create("for", [lower, upper, step, *inits], types, regions=1)
        self._region(op.body(0), [lower.type] + types, body, "yield")
        return op.results

    def if_(self, condition, result_types, then_body: Callable, else_body: Callable):
        op = self.create("if", [condition], result_types, regions=2)
        self._region(op.body(0), [], then_body, "yield")
        self._region(op.body(1), [], else_body, "yield")
        return op.results

    def while_(self, inits, before: Callable, after: Callable):
        """before(*values) -> [cond, *values]; after(*values) -> next values."""
        types = [v.type for v in inits]
        op = self.create("while", list(inits), types, regions=2)
        self._region(op.body(0), types, before, "condition")
        self._region(op.body(1), types, after, "yield")
        return op.results

    def finish(self):
        self.create("return", [], [])
        self.module.verify()
        return self.module


def block_offsets(kb: KernelBuilder, block: int, axis: int = 0):
    """pid * block + arange(block) (i32)."""
    pid = kb.op("program_id", type=T("i32"), axis=axis)
    start = kb.op("muli", pid, kb.const(block, "i32"))
    return kb.op("addi", kb.splat(start, [block]), kb.range(0, block))


# --- exact references -------------------------------------------------------------------------

# (significand bits with the implicit one, smallest normal exponent, largest finite value)
FORMATS = {
    "f16": (11, -14, Fraction(65504)),
    "bf16": (8, -126, Fraction(2 - Fraction(1, 2**7)) * 2**127),
    "f32": (24, -126, Fraction(2 - Fraction(1, 2**23)) * 2**127),
    "f8e4m3": (4, -6, Fraction(448)),
    "f8e5m2": (3, -14, Fraction(57344)),
}


def round_exact(value: Fraction, name: str, saturate: bool = False) -> float:
    """An exact rational rounded to nearest-even in a binary float format (as a Python float);
    past the largest finite value: infinity, or that value when `saturate`."""
    precision, emin, largest = FORMATS[name]
    if value == 0:
        return 0.0
    magnitude = abs(value)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1  # now 2**exponent <= magnitude < 2**(exponent + 1)
    ulp = Fraction(2) ** (max(exponent, emin) - precision + 1)
    quotient = magnitude / ulp
    whole = quotient.numerator // quotient.denominator
    rest = quotient - whole
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2 == 1):
        whole += 1
    rounded = whole * ulp
    if rounded > largest:
        rounded = largest if saturate else None
    sign = -1.0 if value < 0 else 1.0
    return sign * (float("inf") if rounded is None else float(rounded))


def wrap(value: int, bits: int) -> int:
    """Two's-complement wrap of a Python int to a signed `bits`-bit value."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


IR_NAMES = {np.dtype(v): k for k, v in NP_DTYPES.items()}


def run_elementwise(name: str, inputs: Sequence[np.ndarray], result: str, scalar: bool = False,
                    **attrs) -> np.ndarray:
    """out[i] = name(inputs...[i]) through the interpreter: one program over a tensor, or
    (scalar=True) one program per element on scalar values."""
    from tessera import interpreter

    in_names = [IR_NAMES[np.asarray(a).dtype] for a in inputs]
    n = len(inputs[0])
    kb = KernelBuilder(name, [ptr(t) for t in in_names] + [ptr(result)])
    if scalar:
        index = kb.op("program_id", type=T("i32"), axis=0)
        pointers = [kb.op("addptr", a, index, type=a.type) for a in kb.args]
        value_type = T(result)
    else:
        offsets = kb.range(0, n)
        pointers = [kb.pointers(a, offsets) for a in kb.args]
        value_type = tensor([n], result)
    values = [kb.load(p) for p in pointers[:-1]]
    kb.store(pointers[-1], kb.op(name, *values, type=value_type, **attrs))
    out = np.zeros(n, NP_DTYPES[result])
    interpreter.run(kb.finish(), (n if scalar else 1,), [*inputs, out])
    return out
