"""Reductions and scans of the kernel language, with triton.language's names and semantics.

``tl.sum``, ``tl.max``, ``tl.min``, ``tl.argmax``, ``tl.argmin``, ``tl.xor_sum``, ``tl.reduce``
(with a user @jit combine function), ``tl.cumsum``, ``tl.cumprod`` and
``tl.associative_scan``; each is also a tensor method (``x.sum(axis=1)``). The type rules and
the IR they build live in reduction_semantic.py.

Dtypes (as Triton): sum and cumsum widen integers narrower than 32 bits to 32 bits of their
signedness and keep float types (``dtype=`` picks another accumulation type); max and min
compute bf16 in fp32 and, without ``return_indices``, any type narrower than 32 bits in fp32
or int32; cumsum and cumprod compute bf16 in fp32. Combine functions must be associative;
reductions also treat them as commutative (the GPU combines lanes in butterfly order).
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple, Union

from .core import _unwrap, builtin, dtype, float32, int32, is_jit, tensor
from .reduction_semantic import pick_sum_dtype

NEEDS_GENERATOR = "__tessera_needs_generator__"


def _with_generator(fn: Callable) -> Callable:
    """Marks a builtin that also gets ``_generator`` (the code generator, to inline a @jit
    combine function)."""
    setattr(fn, NEEDS_GENERATOR, True)
    return fn


def _inputs(input: Any) -> Tuple[List[tensor], bool]:
    """The input tensors, and whether they came as a tuple (then results do too)."""
    if isinstance(input, (tuple, list)):
        return [_unwrap(v) for v in input], True
    return [_unwrap(input)], False


def _jit_combine(combine_fn: Any, generator: Any) -> Callable[[List[tensor]], Any]:
    if not is_jit(combine_fn):
        raise TypeError(f"combine_fn must be a @tessera.jit function, got {combine_fn!r}")
    if generator is None:
        raise RuntimeError("a combine_fn can only be inlined while compiling a kernel")
    return lambda values: generator.call_jit(None, combine_fn, values, {})


def _promote_bf16(x: tensor, _semantic: Any) -> tensor:
    return _semantic.cast(x, float32) if x.dtype.is_bf16() else x


# --------------------------------------------------------------------------------------------
# Generic reduce and scan
# --------------------------------------------------------------------------------------------


@_with_generator
@builtin
def reduce(input: Any, axis: Optional[int], combine_fn: Any, keep_dims: bool = False,
           _semantic=None, _generator=None) -> Union[tensor, Tuple[tensor, ...]]:
    """Reduces ``input`` (a tensor, or a tuple of tensors of one shape) along ``axis`` (every
    axis when None) with ``combine_fn``, a @jit function taking the accumulated values then
    the current ones and returning one value per input. Example::

        @tessera.jit
        def add_pairs(a0, a1, b0, b1):
            return a0 + b0, a1 + b1

        total, count = tl.reduce((x, ones), 1, add_pairs)
    """
    inputs, is_tuple = _inputs(input)
    results = _semantic.reduce(inputs, _unwrap(axis), _jit_combine(combine_fn, _generator),
                               bool(_unwrap(keep_dims)))
    return tuple(results) if is_tuple else results[0]


@_with_generator
@builtin
def associative_scan(input: Any, axis: int, combine_fn: Any, reverse: bool = False,
                     _semantic=None, _generator=None) -> Union[tensor, Tuple[tensor, ...]]:
    """The inclusive scan of ``input`` (a tensor or a tuple of them) along ``axis`` with the
    associative @jit ``combine_fn`` (accumulated values first); ``reverse=True`` scans from
    the end. Example: ``tl.associative_scan(x, 0, add)`` is ``tl.cumsum(x, 0)``."""
    inputs, is_tuple = _inputs(input)
    results = _semantic.scan(inputs, _unwrap(axis), _jit_combine(combine_fn, _generator),
                             bool(_unwrap(reverse)))
    return tuple(results) if is_tuple else results[0]


# --------------------------------------------------------------------------------------------
# Standard reductions
# --------------------------------------------------------------------------------------------


@builtin
def sum(input: tensor, axis: Optional[int] = None, keep_dims: bool = False,
        dtype: Optional[dtype] = None, _semantic=None) -> tensor:
    """The sum along ``axis`` (of every element when None), accumulated in ``dtype`` when
    given (int8/int16 sum in int32, uint8/uint16 in uint32, as Triton). Example:
    ``row_sums = tl.sum(x, axis=1)``."""
    input, out = _unwrap(input), _unwrap(dtype)
    out = out if out is not None else pick_sum_dtype(input.dtype)
    if out is not None:
        input = _semantic.cast(input, out)
    return _semantic.reduce([input], _unwrap(axis), _semantic.sum_combine,
                            bool(_unwrap(keep_dims)))[0]


def _extremum(input: tensor, axis: Any, return_indices: Any, tie_break_left: Any,
              keep_dims: Any, greater: bool, _semantic: Any) -> Any:
    input = _promote_bf16(_unwrap(input), _semantic)
    keep_dims = bool(_unwrap(keep_dims))
    if _unwrap(return_indices):
        tie = bool(_unwrap(tie_break_left))
        results = _semantic.reduce_with_indices(
            input, _unwrap(axis), lambda v: _semantic.arg_combine(v, greater, tie), keep_dims)
        return tuple(results)
    if input.dtype.primitive_bitwidth < 32:
        input = _semantic.cast(input, float32 if input.dtype.is_floating() else int32)
    combine = _semantic.max_combine if greater else _semantic.min_combine
    return _semantic.reduce([input], _unwrap(axis), combine, keep_dims)[0]


@builtin
def max(input: tensor, axis: Optional[int] = None, return_indices: bool = False,
        return_indices_tie_break_left: bool = True, keep_dims: bool = False,
        _semantic=None) -> Union[tensor, Tuple[tensor, tensor]]:
    """The maximum along ``axis`` (NaNs lose, as tl.maximum); with ``return_indices`` also the
    int32 index of a maximum (the first one when return_indices_tie_break_left). Example:
    ``m = tl.max(x, axis=1)``; ``m, i = tl.max(x, 0, return_indices=True)``."""
    return _extremum(input, axis, return_indices, return_indices_tie_break_left, keep_dims,
                     True, _semantic)


@builtin
def min(input: tensor, axis: Optional[int] = None, return_indices: bool = False,
        return_indices_tie_break_left: bool = True, keep_dims: bool = False,
        _semantic=None) -> Union[tensor, Tuple[tensor, tensor]]:
    """The minimum along ``axis`` (see ``max``). Example: ``lo = tl.min(x, axis=0)``."""
    return _extremum(input, axis, return_indices, return_indices_tie_break_left, keep_dims,
                     False, _semantic)


@builtin
def argmax(input: tensor, axis: Optional[int], tie_break_left: bool = True,
           keep_dims: bool = False, _semantic=None) -> tensor:
    """The int32 index of a maximum along ``axis`` (the first one when tie_break_left; a
    row-major flat index when axis is None). Example: ``best = tl.argmax(scores, axis=1)``."""
    return _extremum(input, axis, True, tie_break_left, keep_dims, True, _semantic)[1]


@builtin
def argmin(input: tensor, axis: Optional[int], tie_break_left: bool = True,
           keep_dims: bool = False, _semantic=None) -> tensor:
    """The int32 index of a minimum along ``axis`` (see ``argmax``)."""
    return _extremum(input, axis, True, tie_break_left, keep_dims, False, _semantic)[1]


@builtin
def xor_sum(input: tensor, axis: Optional[int] = None, keep_dims: bool = False,
            _semantic=None) -> tensor:
    """The XOR of the integers along ``axis``. Example: ``parity = tl.xor_sum(bits, 0)``."""
    input = _unwrap(input)
    if not isinstance(input, tensor) or not input.dtype.is_int():
        raise TypeError(f"xor_sum needs integers, got {input}")
    return _semantic.reduce([input], _unwrap(axis), _semantic.xor_combine,
                            bool(_unwrap(keep_dims)))[0]


@builtin
def cumsum(input: tensor, axis: int = 0, reverse: bool = False, dtype: Optional[dtype] = None,
           _semantic=None) -> tensor:
    """The inclusive cumulative sum along ``axis`` (from the end when ``reverse``); dtypes
    as ``sum`` (bf16 is summed in fp32). Example: ``offsets = tl.cumsum(counts, 0)``."""
    input, out = _promote_bf16(_unwrap(input), _semantic), _unwrap(dtype)
    out = out if out is not None else pick_sum_dtype(input.dtype)
    if out is not None:
        input = _semantic.cast(input, out)
    return _semantic.scan([input], _unwrap(axis), _semantic.sum_combine,
                          bool(_unwrap(reverse)))[0]


@builtin
def cumprod(input: tensor, axis: int = 0, reverse: bool = False, _semantic=None) -> tensor:
    """The inclusive cumulative product along ``axis`` (bf16 in fp32). Example:
    ``tl.cumprod(decay, 0)``."""
    input = _promote_bf16(_unwrap(input), _semantic)
    return _semantic.scan([input], _unwrap(axis), _semantic.prod_combine,
                          bool(_unwrap(reverse)))[0]
