"""Interpreter handlers of the debugging ops `print` (tl.device_print) and `assert`
(tl.device_assert): ops with side effects only, registered in handlers.HANDLERS.

print writes one line per element in the format of Triton's GPU printf, so the interpreter
and the GPU read alike::

    pid (0, 0, 0) idx ( 3) x: 1.500000

that is "pid (x, y, z) idx (i, j, ...)<prefix>[(operand n) ]<value>", the prefix already
munged by the front end (" x: "), "(operand n)" only when the op prints several values.
Elements come in row-major order, operand after operand (a GPU interleaves threads). Floats
print as C's %f, integers as signed or unsigned per the op's is_signed attribute, and with
hex=True every value prints its bits as 0x%0<bits/4>x; pointers print their host addresses
as %p does (0x...). Lines go to sys.stdout, so notebooks
and pytest's capsys see them.
"""
from __future__ import annotations

import math
import sys
from typing import Callable, List

import numpy as np

from . import numerics as nm
from .errors import AssertionFault
from .handlers import handles
from .plan import OpInfo, TypeInfo


def _formatter(t: TypeInfo, signed: bool, hex_bits: bool) -> Callable[[np.ndarray], List[str]]:
    """Turns a flat array of `t`'s dtype into the text printf would give each element."""
    dtype = t.dtype
    if hex_bits:
        width = nm.bit_width(dtype) // 4  # i1: width 0, as Triton's "0x%00x"
        if dtype == nm.BOOL:
            return lambda flat: [f"0x{int(v):0{width}x}" for v in flat]
        unsigned = nm.unsigned_of(dtype)
        return lambda flat: [f"0x{int(v):0{width}x}" for v in flat.view(unsigned)]
    if nm.is_float(dtype):
        return lambda flat: [f"{v:f}" for v in flat.astype(np.float64).tolist()]
    if dtype == nm.BOOL or not signed:
        return lambda flat: [str(v) for v in nm.as_unsigned(flat).tolist()]
    return lambda flat: [str(v) for v in flat.tolist()]


def _index_texts(shape) -> List[str]:
    """"idx (i, j)" of every element in row-major order; each index is padded to
    ceil(log10(extent)) characters, as Triton's format."""
    if not shape:
        return ["idx ()"]
    widths = [math.ceil(math.log10(extent)) if extent > 0 else 0 for extent in shape]
    return ["idx (" + ", ".join(f"{i:>{w}}" for i, w in zip(index, widths)) + ")"
            for index in np.ndindex(*shape)]


@handles("print")
def _print(info: OpInfo):
    prefix = str(info.attrs.get("prefix", ""))
    hex_bits = bool(info.attrs.get("hex", False))
    signed = list(info.attrs.get("is_signed", [])) or [0] * len(info.operands)
    # Pointers print the host address they stand for (the interpreter's pointer values are
    # virtual: memory.py), as C's %p ("0x" and lowercase hex digits), hex or not.
    pointers = [t.pointee is not None for t in info.operands]
    formats = [_formatter(t, bool(s), hex_bits) for t, s in zip(info.operands, signed)]
    indices = [_index_texts(t.shape) for t in info.operands]
    several = len(info.operands) > 1

    def device_print(state, *values) -> None:
        x, y, z = state.pid
        head = f"pid ({x}, {y}, {z}) "
        if not values:
            sys.stdout.write(head.rstrip() + prefix + "\n")
            return
        lines: List[str] = []
        for number, (value, fmt, idx) in enumerate(zip(values, formats, indices)):
            operand = f"(operand {number}) " if several else ""
            if pointers[number]:
                texts = [f"0x{a:x}" for a in state.memory.host_addresses(value)]
            else:
                texts = fmt(np.asarray(value).reshape(-1))
            lines.extend(f"{head}{i}{prefix}{operand}{text}\n" for i, text in zip(idx, texts))
        sys.stdout.write("".join(lines))

    return device_print


@handles("assert")
def _assert(info: OpInfo):
    message = str(info.attrs.get("message", ""))
    shaped = bool(info.operands[0].shape)

    def device_assert(state, condition) -> None:
        condition = np.asarray(condition)
        if condition.all():
            return
        where = ""
        if shaped:
            failing = np.argwhere(~condition)
            first = tuple(int(i) for i in failing[0])
            where = f" (at index {first}" + (f" and {len(failing) - 1} more" if len(failing) > 1
                                             else "") + ")"
        raise AssertionFault(f"device_assert failed: {message or '<no message>'}{where}")

    return device_assert
