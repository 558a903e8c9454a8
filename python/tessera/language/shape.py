"""Shape builtins of triton.language: join, split, interleave, cat, view, ravel, broadcast,
item, gather and histogram.

Each is composed of existing IR ops (shape_semantic.py), so it works on every target and in
the interpreter. What Triton leaves open, Tessera fixes and documents: ``cat`` always returns
the plain concatenation (a valid answer for ``can_reorder=True``), ``view`` and
``reshape(can_reorder=True)`` keep the row-major order, ``gather`` gives 0 for an index out of
range, and ``histogram`` does not count values outside ``[0, num_bins)``.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

from .core import _shape_arg, _unwrap, builtin, tensor


@builtin
def join(a: Any, b: Any, _semantic=None) -> tensor:
    """Joins ``a`` and ``b`` (broadcast to one shape, one dtype) along a new minor dim of
    size 2: ``tl.join(a, b)[..., 0]`` is ``a``. Two scalars give a tensor of shape [2].
    Example: ``pairs = tl.join(re, im)`` (shape ``re.shape + [2]``)."""
    return _semantic.join(_unwrap(a), _unwrap(b))


@builtin
def split(a: tensor, _semantic=None) -> Tuple[tensor, tensor]:
    """Splits ``a`` along its last dim, which must have size 2, into ``(a[..., 0],
    a[..., 1])``; the inverse of ``join``. A tensor of shape [2] gives two scalars.
    Example: ``re, im = tl.split(pairs)``."""
    return _semantic.split(_unwrap(a))


@builtin
def interleave(a: Any, b: Any, _semantic=None) -> tensor:
    """Interleaves ``a`` and ``b`` along their last dim: ``[a0, b0, a1, b1, ...]``, i.e.
    ``tl.join(a, b).reshape(a.shape[:-1] + [2 * a.shape[-1]])``. Example:
    ``tl.interleave(even, odd)``."""
    joined = _semantic.join(_unwrap(a), _unwrap(b))
    if len(joined.shape) == 1:  # two scalars
        return joined
    return _semantic.reshape(joined, joined.shape[:-2] + [2 * joined.shape[-2]])


@builtin
def cat(input: tensor, other: tensor, can_reorder: bool = False, _semantic=None) -> tensor:
    """Concatenates two tiles of one shape along dim 0. Triton only promises some order of
    the elements (``can_reorder=True``); Tessera always returns ``input`` then ``other``, so
    ``can_reorder`` changes nothing. Example: ``tl.cat(lo, hi, can_reorder=True)``."""
    return _semantic.cat(_unwrap(input), _unwrap(other))


@builtin
def view(input: tensor, *shape: int, _semantic=None) -> tensor:
    """Deprecated spelling of ``reshape(input, shape, can_reorder=True)``: the same elements
    in a new shape (Tessera keeps the row-major order). Example: ``tl.view(x, (32, 32))``."""
    return _semantic.reshape(_semantic.to_tensor(_unwrap(input)), _shape_arg(shape))


@builtin
def ravel(x: tensor, can_reorder: bool = False, _semantic=None) -> tensor:
    """The elements of ``x`` as a 1-D tensor, in row-major order (kept with
    ``can_reorder=True`` too). Example: ``flat = tl.ravel(tile)``."""
    x = _unwrap(x)
    return _semantic.reshape(x, [x.numel])


@builtin
def broadcast(input: Any, other: Any, _semantic=None) -> Tuple[tensor, tensor]:
    """Broadcasts two tensors to their common shape (NumPy rules) and returns both.
    Example: ``a, b = tl.broadcast(row[None, :], col[:, None])``."""
    a, b = _semantic.to_tensor(_unwrap(input)), _semantic.to_tensor(_unwrap(other))
    a, b = _semantic.broadcast_values(a, b)
    return a, b


@builtin
def item(input: tensor, _semantic=None) -> tensor:
    """The scalar held by a one-element tensor. Example: ``total = tl.sum(x, 0, True).item()``
    (or ``tl.item(t)``)."""
    return _semantic.unsplat(_unwrap(input))


@builtin
def gather(src: tensor, index: tensor, axis: int, _semantic=None) -> tensor:
    """Gathers ``src`` along ``axis`` at the integer ``index`` (of ``src``'s rank; its other
    dims equal ``src``'s): ``out[i, j] = src[index[i, j], j]`` for axis 0, as
    ``np.take_along_axis``. The result has ``index``'s shape and ``src``'s dtype; an index
    outside ``[0, src.shape[axis])`` gives 0. Built from comparisons and a reduction: the
    cost is ``index.numel * src.shape[axis]`` compares (meant for small tiles). Example:
    ``rows = tl.gather(table, idx, 0)``."""
    return _semantic.gather(_unwrap(src), _unwrap(index), _unwrap(axis))


@builtin
def histogram(input: tensor, num_bins: int, mask: Optional[tensor] = None,
              _semantic=None) -> tensor:
    """The int32 histogram of the 1-D integer ``input`` over the bins 0 .. num_bins - 1
    (``num_bins`` a power of 2); elements where ``mask`` is false are not counted, nor are
    values outside ``[0, num_bins)`` (Triton does not define those). Cost:
    ``input.numel * num_bins`` compares. Example: ``counts = tl.histogram(keys, 64)``."""
    return _semantic.histogram(_unwrap(input), _unwrap(num_bins), _unwrap(mask))
