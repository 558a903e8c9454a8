"""The type rules of reductions and scans, and the `reduce` / `scan` IR they build.

Mixed into semantic.Semantic (kept in its own file beside it). A reduction is one `reduce` op
per axis with a combiner region built by a Python callable: ``combine(values)`` gets the
accumulated values then the current ones (scalar tensors, 2 per operand) and returns one
value per operand (a tensor, or a tuple for several). tl.reduce passes the user's @jit
function, inlined by the code generator; tl.sum, tl.max, ... pass the combiners below.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

from . import core as tl
from .core import dtype, tensor

Combine = Callable[[List[tensor]], Any]


def pick_sum_dtype(element: dtype) -> Optional[dtype]:
    """Triton's rule: integers narrower than 32 bits are summed in 32 bits of their
    signedness (int1 counts as unsigned); other types are summed in their own type."""
    if element.is_int() and element.int_bitwidth < 32:
        return tl.int32 if element.is_int_signed() else tl.uint32
    return None


class ReductionSemantic:
    """reduce / scan ops and the combiners of the standard reductions."""

    builder: Any

    # ---- operands ------------------------------------------------------------------------

    @staticmethod
    def reduction_operands(inputs: Sequence[Any], what: str) -> List[tensor]:
        if not inputs:
            raise ValueError(f"{what} needs at least one input tensor")
        for value in inputs:
            if not isinstance(value, tensor) or not value.shape:
                raise TypeError(f"{what} needs tensors (tiles), got {value!r}")
            if value.dtype.is_ptr():
                raise TypeError(f"{what} of pointers ({value}) is not supported")
            if value.shape != inputs[0].shape:
                raise ValueError(f"{what}'s inputs must have one shape, got {inputs[0].shape} "
                                 f"and {value.shape}")
        return list(inputs)

    @staticmethod
    def normalize_axis(axis: Any, rank: int, what: str) -> int:
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise TypeError(f"{what}'s axis must be a constexpr int, got {axis!r}")
        if not -rank <= axis < rank:
            raise ValueError(f"{what} axis {axis} is out of range for a tensor of rank {rank}")
        return axis + rank if axis < 0 else axis

    # ---- ops -----------------------------------------------------------------------------

    def reduce(self, inputs: Sequence[Any], axis: Any, combine: Combine,
               keep_dims: bool = False) -> List[tensor]:
        """Reduces every input along ``axis`` (all axes, last first, when None) with one
        combiner; each result has the input's dtype."""
        values = self.reduction_operands(inputs, "reduce")
        rank = len(values[0].shape)
        axes = list(range(rank)) if axis is None else [self.normalize_axis(axis, rank, "reduce")]
        for reduced in sorted(axes, reverse=True):
            values = self._reduce_axis(values, reduced, combine)
        if keep_dims:
            for reduced in sorted(axes):
                values = [self.expand_dims(v, reduced) for v in values]
        return values

    def _reduce_axis(self, inputs: List[tensor], axis: int, combine: Combine) -> List[tensor]:
        shape = inputs[0].shape[:axis] + inputs[0].shape[axis + 1:]
        types = [self.ir_type(v.dtype, shape) for v in inputs]
        op = self.builder.create("reduce", [v.handle for v in inputs], types, {"axis": axis}, 1)
        self._build_combiner(op, [v.dtype for v in inputs], combine, "reduce")
        return [tensor(op.result(i), v.dtype, shape) for i, v in enumerate(inputs)]

    def scan(self, inputs: Sequence[Any], axis: Any, combine: Combine,
             reverse: bool = False) -> List[tensor]:
        """The inclusive scans of the inputs along ``axis`` with one combiner."""
        values = self.reduction_operands(inputs, "associative_scan")
        axis = self.normalize_axis(axis, len(values[0].shape), "associative_scan")
        types = [self.ir_type(v.dtype, v.shape) for v in values]
        attrs = {"axis": axis, "reverse": bool(reverse)}
        op = self.builder.create("scan", [v.handle for v in values], types, attrs, 1)
        self._build_combiner(op, [v.dtype for v in values], combine, "associative_scan")
        return [tensor(op.result(i), v.dtype, v.shape) for i, v in enumerate(values)]

    def _build_combiner(self, op: Any, dtypes: List[dtype], combine: Combine,
                        what: str) -> None:
        block = op.body(0)
        arguments = [tensor(block.add_argument(d.to_ir()), d) for d in dtypes + dtypes]
        self.builder.set_insertion_point_to_end(block)
        returned = combine(arguments)
        results = list(returned) if isinstance(returned, (tuple, list)) else [returned]
        if len(results) != len(dtypes):
            raise TypeError(f"{what}'s combine_fn must return {len(dtypes)} value(s), one per "
                            f"input, got {len(results)}")
        for index, (value, expected) in enumerate(zip(results, dtypes, strict=True)):
            if not isinstance(value, tensor):
                value = self.scalar_constant(value, expected)
            if value.shape or value.dtype != expected:
                raise TypeError(f"{what}'s combine_fn must return a {expected} scalar for input "
                                f"{index}, got {value}")
            results[index] = value
        self.builder.create("yield", [v.handle for v in results], [])
        self.builder.set_insertion_point_after(op)

    def reduce_with_indices(self, x: tensor, axis: Any, combine: Combine,
                            keep_dims: bool) -> List[tensor]:
        """(values, int32 indices) of a reduction that picks elements (argmax, argmin); with
        axis None the indices are row-major flat indices."""
        self.reduction_operands([x], "reduce")
        rank = len(x.shape)
        if axis is None:
            index: Optional[tensor] = None
            stride = 1
            for dim in reversed(range(rank)):
                term = self.mul(self._index_along(x.shape, dim), stride)
                index = term if index is None else self.add(index, term)
                stride *= x.shape[dim]
        else:
            index = self._index_along(x.shape, self.normalize_axis(axis, rank, "reduce"))
        return self.reduce([x, index], axis, combine, keep_dims)

    def _index_along(self, shape: List[int], axis: int) -> tensor:
        """The int32 tensor of `shape` whose elements are their index along `axis`."""
        index = self.arange(0, shape[axis])
        for dim in range(len(shape)):
            if dim != axis:
                index = self.expand_dims(index, dim)
        return self.broadcast_to(index, shape)

    # ---- combiners of the standard reductions ----------------------------------------------

    def sum_combine(self, values: List[tensor]) -> tensor:
        return self.add(values[0], values[1])

    def prod_combine(self, values: List[tensor]) -> tensor:
        return self.mul(values[0], values[1])

    def xor_combine(self, values: List[tensor]) -> tensor:
        return self.bitwise("xori", values[0], values[1])

    def max_combine(self, values: List[tensor]) -> tensor:
        return self.maximum(values[0], values[1])

    def min_combine(self, values: List[tensor]) -> tensor:
        return self.minimum(values[0], values[1])

    def arg_combine(self, values: List[tensor], greater: bool,
                    tie_break_left: bool) -> List[tensor]:
        """Triton's _argmax_combine / _argmin_combine: the better value wins; on a tie, the
        smaller index when tie_break_left."""
        value1, index1, value2, index2 = values
        better = self.compare("gt" if greater else "lt", value1, value2)
        if tie_break_left:
            tie = self.logical("andi", self.compare("eq", value1, value2),
                               self.compare("lt", index1, index2))
            better = self.logical("ori", better, tie)
        return [self.where(better, value1, value2), self.where(better, index1, index2)]
