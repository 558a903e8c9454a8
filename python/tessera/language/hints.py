"""Compiler hints and the debug barrier, as triton.language's: multiple_of, max_contiguous,
max_constancy, assume, debug_barrier.

A hint states a fact the compiler cannot prove about a value's elements, per dimension:

- ``multiple_of(x, 16)``: each run of contiguous values starts at a multiple of 16 (for
  pointers: of 16 bytes);
- ``max_contiguous(x, 128)``: the values come in runs of 128 consecutive integers;
- ``max_constancy(x, 64)``: the values come in runs of 64 equal values.

As in Triton they are attributes of the op that defines the value (the axis analysis,
cpp/analysis/axis_info.cpp, takes them instead of what it derived), so a load through
``x_ptr + tl.max_contiguous(tl.multiple_of(offs, 4), 4)`` may use 16-byte vector accesses. A
false hint is undefined behaviour on the GPU (the interpreter, which runs elementwise, ignores
hints). A value without a defining op (a kernel argument, a loop-carried variable) keeps no
hint, as in Triton.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Union

from .core import _unwrap, builtin, tensor


def _hint_values(name: str, values: Union[int, Sequence[int]]) -> List[int]:
    values = _unwrap(values)
    if not isinstance(values, (list, tuple)):
        values = [values]
    out = []
    for index, value in enumerate(values):
        value = _unwrap(value)
        if isinstance(value, tensor):
            raise TypeError(f"{name}: values element {index} must be a compile-time "
                            f"(constexpr) int, got the runtime value {value}")
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name}: values element {index} must be a constexpr int, got "
                            f"{value!r}")
        if value < 1:
            raise ValueError(f"{name}: values element {index} must be positive, got {value}")
        out.append(value)
    return out


def _hint(name: str, input: Any, values: Any) -> tensor:
    if not isinstance(input, tensor):
        raise TypeError(f"{name} needs a runtime value (a tensor or scalar), got {input!r}")
    values = _hint_values(name, values)
    if len(values) != max(1, len(input.shape)):
        raise ValueError(f"Shape of input to {name} does not match the length of values: "
                         f"{len(values)} value(s) for {input}")
    op = input.handle.defining_op
    if op is not None and len(op.results) == 1:
        op.set_attr(name, values)
    return input


@builtin
def multiple_of(input: tensor, values: Union[int, Sequence[int]], _semantic=None) -> tensor:
    """Returns ``input``, hinting that along each dim its runs of contiguous values start at
    a multiple of ``values[d]`` (a pointer: ``values[d]`` bytes). One value per dim (one for a
    scalar). Example: ``offs = tl.multiple_of(pid * BLOCK, BLOCK) + tl.arange(0, BLOCK)``."""
    return _hint("multiple_of", input, values)


@builtin
def max_contiguous(input: tensor, values: Union[int, Sequence[int]], _semantic=None) -> tensor:
    """Returns ``input``, hinting that along each dim its values come in runs of ``values[d]``
    consecutive integers. Example: ``offs = tl.max_contiguous(tl.multiple_of(offs, 4), 4)``."""
    return _hint("max_contiguous", input, values)


@builtin
def max_constancy(input: tensor, values: Union[int, Sequence[int]], _semantic=None) -> tensor:
    """Returns ``input``, hinting that along each dim its values come in runs of ``values[d]``
    equal values. Example: ``row = tl.max_constancy(offs // 64, 64)``."""
    return _hint("max_constancy", input, values)


@builtin
def assume(cond: Any, _semantic=None) -> None:
    """Lets the compiler assume ``cond`` (a boolean scalar or tile) holds; accepted as in
    Triton. Tessera derives nothing from it yet, so it builds no code; a false assumption is
    undefined behaviour. Example: ``tl.assume(stride > 0)``."""
    cond = _semantic.to_tensor(_unwrap(cond))
    if cond.dtype.is_ptr():
        raise TypeError(f"assume needs a boolean condition, got {cond}")


@builtin
def debug_barrier(_semantic=None) -> None:
    """Synchronizes every thread of the program (``bar.sync 0``): all threads reach it before
    any goes on, and shared memory written before it is visible after it. Example:
    ``tl.debug_barrier()``."""
    _semantic.builder.create("barrier", [], [], {})
