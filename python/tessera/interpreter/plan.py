"""Compiles a tile-IR func into an evaluation plan: a tree of steps over numbered value slots.

Reading ops, attributes and types through the bindings is slow, so it happens once per module:
each value gets a slot in a flat environment list, each op becomes a Step holding its handler
(from handlers.HANDLERS), its operand and result slots and its expected result types. The
program loop (evaluator.py) then runs steps without touching IR objects. Layout encodings are
ignored: only shapes and element types matter to the values.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .numerics import DTYPES, POINTER_DTYPE


@dataclass(frozen=True)
class TypeInfo:
    """What the interpreter needs of an IR type."""
    text: str                          # the IR spelling, for messages
    shape: Tuple[int, ...]             # () for scalars and pointers
    dtype: np.dtype                    # int64 for pointers
    pointee: Optional[np.dtype] = None  # element type in memory, for pointers


@dataclass
class OpInfo:
    """An op as handler factories see it: plain Python data, no IR objects."""
    name: str
    attrs: Dict[str, Any]
    operands: List[TypeInfo]
    results: List[TypeInfo]
    location: str
    blocks: List["BlockPlan"] = field(default_factory=list)


class Step:
    """One op of the plan: fn(state, *operand values) -> its result, or None when it has none;
    ops with regions (unpack) return the tuple of their results, checked by their yields."""
    __slots__ = ("fn", "ins", "outs", "unpack", "checks", "name", "location")

    def __init__(self, fn: Callable, ins: Tuple[int, ...], outs: Tuple[int, ...], unpack: bool,
                 results: List[TypeInfo], name: str, location: str) -> None:
        self.fn = fn
        self.ins = ins
        self.outs = outs
        self.unpack = unpack
        self.checks = tuple((t.dtype, t.shape) for t in results)
        self.name = name
        self.location = location


@dataclass
class BlockPlan:
    arg_slots: Tuple[int, ...]
    steps: List[Step]
    terminator: str          # "yield", "condition" or "return"
    term_slots: Tuple[int, ...]


@dataclass
class FuncPlan:
    name: str
    arg_types: List[TypeInfo]
    body: BlockPlan
    num_slots: int
    divisibility: List[int]  # per argument, from the func's specialization (1: nothing known)
    tensormaps: List[int] = field(default_factory=list)  # arguments that are tensor maps (TMA)
    global_scratch: int = 0  # bytes of global scratch per program (device tensor maps)


class PlanError(Exception):
    """The IR cannot be interpreted (an op without a handler, a bad attribute)."""

    def __init__(self, message: str, op_name: str = "", location: str = "") -> None:
        super().__init__(message)
        self.op_name = op_name
        self.location = location


_TYPE_CACHE: Dict[str, TypeInfo] = {}


def type_info(t) -> TypeInfo:
    """TypeInfo of an ir.Type (cached by its text; the encoding does not matter)."""
    text = str(t)
    info = _TYPE_CACHE.get(text)
    if info is None:
        shape = tuple(t.shape) if t.is_tensor() else ()
        element = t.element_type
        if element.is_pointer():
            pointee = element.pointee
            pointee_dtype = POINTER_DTYPE if pointee.is_pointer() else DTYPES[pointee.scalar_name]
            info = TypeInfo(text, shape, POINTER_DTYPE, pointee_dtype)
        else:
            info = TypeInfo(text, shape, DTYPES[element.scalar_name])
        _TYPE_CACHE[text] = info
    return info


class _Compiler:
    def __init__(self, handlers: Dict[str, Callable[[OpInfo], Callable]]) -> None:
        self.handlers = handlers
        self.slots: Dict[int, int] = {}  # value id -> slot

    def slot_of(self, value) -> int:
        key = value.id
        slot = self.slots.get(key)
        if slot is None:
            slot = self.slots[key] = len(self.slots)
        return slot

    def block(self, block) -> BlockPlan:
        arg_slots = tuple(self.slot_of(a) for a in block.arguments)
        steps: List[Step] = []
        term_slots: Tuple[int, ...]
        terminator, term_slots = "", ()
        for op in block.operations:
            name = op.name
            if name in ("yield", "condition", "return"):
                terminator = name
                term_slots = tuple(self.slot_of(v) for v in op.operands)
                break
            steps.append(self.step(op, name))
        return BlockPlan(arg_slots, steps, terminator, term_slots)

    def step(self, op, name: str) -> Step:
        location = op.location
        factory = self.handlers.get(name)
        if factory is None:
            raise PlanError(f"the interpreter has no handler for op '{name}'", name, location)
        ins = tuple(self.slot_of(v) for v in op.operands)
        info = OpInfo(name, op.attrs, [type_info(v.type) for v in op.operands],
                      [type_info(r.type) for r in op.results], location,
                      [self.block(op.body(i)) for i in range(op.num_regions)])
        outs = tuple(self.slot_of(r) for r in op.results)
        try:
            fn = factory(info)
        except PlanError as e:
            raise PlanError(str(e), name, location) from None
        return Step(fn, ins, outs, bool(info.blocks), info.results, name, location)


def compile_func(func, handlers: Dict[str, Callable[[OpInfo], Callable]]) -> FuncPlan:
    """The plan of one `func` op."""
    compiler = _Compiler(handlers)
    body = func.body(0)
    arg_types = [type_info(a.type) for a in body.arguments]
    plan_body = compiler.block(body)
    divisibility = list(func.attrs.get("divisibility", [])) or [1] * len(arg_types)
    return FuncPlan(func.attr("sym_name"), arg_types, plan_body, len(compiler.slots),
                    divisibility, list(func.attrs.get("tensormaps", [])),
                    int(func.attrs.get("global_scratch", 0)))
