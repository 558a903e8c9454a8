"""The IR that join, split, cat, gather, histogram, flip and sort build, from existing ops.

Mixed into semantic.Semantic. Nothing here adds an IR op: every builtin is a composition of
expand_dims / broadcast / select / reshape and reductions, so it runs on every target and in
the interpreter unchanged. Where an element must be *picked* (split, gather, item), the picked
value's bits are OR-reduced over a one-hot selection (bits of the other lanes are zero), which
moves any value exactly: -0.0, NaN payloads and pointers included.

Shapes follow Triton: join adds a minor dim of 2 (``[..., 0]`` is ``a``), split removes it,
interleave alternates ``a`` and ``b`` along the last dim, cat concatenates along dim 0, sort
and topk use Triton's bitonic network on the tile reshaped to a hypercube of 2s, flip swaps
halves by XOR-ing with a size-2 reduction (as Triton's standard library).
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

from . import core as tl
from .core import dtype, tensor

_INT_BY_WIDTH = {1: tl.int1, 8: tl.int8, 16: tl.int16, 32: tl.int32, 64: tl.int64}


def log2_exact(value: int, what: str) -> int:
    """log2 of a power of two; a ValueError naming ``what`` otherwise."""
    if not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise ValueError(f"{what} must be a power of 2, got {value}")
    return value.bit_length() - 1


class ShapeSemantic:
    """join / split / cat / gather / histogram / flip / sort (see the module docstring)."""

    # The methods of semantic.Semantic used here.
    create: Callable[..., tensor]
    to_tensor: Callable[[Any], tensor]
    expand_dims: Callable[[tensor, int], tensor]
    broadcast_to: Callable[[tensor, Sequence[int]], tensor]
    broadcast_values: Callable[..., List[tensor]]
    reshape: Callable[[tensor, Sequence[int]], tensor]
    splat: Callable[[tensor, Sequence[int]], tensor]
    arange: Callable[[int, int], tensor]
    full: Callable[[Any, Any, Any], tensor]
    cast: Callable[..., tensor]
    bitcast: Callable[[tensor, dtype], tensor]
    compare: Callable[[str, Any, Any], tensor]
    bitwise: Callable[[str, Any, Any], tensor]
    where: Callable[[Any, Any, Any], tensor]
    reduce: Callable[..., List[tensor]]
    add: Callable[[Any, Any], tensor]

    # ---- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _tile(x: Any, what: str) -> tensor:
        if not isinstance(x, tensor) or not x.shape:
            raise TypeError(f"{what} needs a tensor (a tile), got {x!r}")
        return x

    def _to_bits(self, x: tensor) -> Tuple[tensor, Callable[[tensor], tensor]]:
        """``x`` as a signed integer of its width, and the function that turns such bits back
        into ``x``'s dtype."""
        element = x.dtype
        if element.is_ptr():
            return self.cast(x, tl.int64), lambda bits: self.cast(bits, element)
        if element.is_int():
            return x, lambda bits: bits
        bits_type = _INT_BY_WIDTH[element.primitive_bitwidth]
        return self.bitcast(x, bits_type), lambda bits: self.bitcast(bits, element)

    def _indicator(self, rank: int, axis: int) -> tensor:
        """The int32 tensor ``[0, 1]`` along ``axis`` of a rank-``rank`` shape of 1s."""
        index = self.arange(0, 2)
        for dim in range(rank):
            if dim != axis:
                index = self.expand_dims(index, dim)
        return index

    def _select(self, cond: tensor, x: tensor, y: tensor) -> tensor:
        """select without promotion (x and y have one dtype); all three broadcast."""
        cond, x, y = self.broadcast_values(cond, x, y)
        return self.create("select", [cond, x, y], x.dtype, x.shape)

    def _pick(self, bits: tensor, one_hot: tensor, axis: int) -> tensor:
        """The bits where ``one_hot`` is true, OR-reduced along ``axis`` (one hit at most: the
        value itself, else 0)."""
        zero = self.create("constant", [], bits.dtype, [], value=0)
        chosen = self._select(one_hot, bits, zero)
        return self.reduce([chosen], axis, lambda v: self.bitwise("ori", v[0], v[1]))[0]

    def _xor_halves(self, y: tensor, axis: int) -> tensor:
        """Swaps the two halves of the size-2 ``axis``: ``a ^ (a ^ b) == b``."""
        total = self.reduce([y], axis, lambda v: self.bitwise("xori", v[0], v[1]), True)[0]
        return self.bitwise("xori", y, total)

    # ---- join, split, cat, item ----------------------------------------------------------

    def join(self, a: Any, b: Any) -> tensor:
        a, b = self.to_tensor(a), self.to_tensor(b)
        if a.dtype != b.dtype:
            raise TypeError(f"join needs two tensors of one dtype, got {a.dtype} and {b.dtype}")
        a, b = self.broadcast_values(a, b)
        shape = a.shape + [2]
        first = self.compare("eq", self._indicator(len(shape), len(shape) - 1), 0)
        wide = [self.broadcast_to(self.expand_dims(v, len(shape) - 1), shape) for v in (a, b)]
        return self._select(first, wide[0], wide[1])

    def split(self, a: Any) -> Tuple[tensor, tensor]:
        a = self._tile(a, "split")
        if a.shape[-1] != 2:
            raise ValueError(f"split needs a last dimension of size 2, got shape {a.shape}")
        bits, restore = self._to_bits(a)
        rank = len(a.shape)
        first = self.compare("eq", self._indicator(rank, rank - 1), 0)
        second = self.compare("ne", self._indicator(rank, rank - 1), 0)
        return (restore(self._pick(bits, first, rank - 1)),
                restore(self._pick(bits, second, rank - 1)))

    def unsplat(self, x: Any) -> tensor:
        """The scalar held by a one-element tile (``x.item()``)."""
        x = self.to_tensor(x)
        if not x.shape:
            return x
        if x.numel != 1:
            raise ValueError(f"item() needs a tensor of one element, got shape {x.shape}")
        bits, restore = self._to_bits(self.reshape(x, [1]))
        return restore(self.reduce([bits], 0, lambda v: v[0])[0])

    def cat(self, a: Any, b: Any) -> tensor:
        """``a`` then ``b`` along dim 0 (tiles of one shape and dtype)."""
        a, b = self._tile(a, "cat"), self._tile(b, "cat")
        if a.dtype != b.dtype:
            raise TypeError(f"cat needs two tensors of one dtype, got {a.dtype} and {b.dtype}")
        if a.shape != b.shape:
            raise ValueError(f"cat needs two tensors of one shape (the result's dim 0 must be a "
                             f"power of 2), got {a.shape} and {b.shape}")
        shape = [2] + a.shape
        first = self.compare("eq", self._indicator(len(shape), 0), 0)
        wide = [self.broadcast_to(self.expand_dims(v, 0), shape) for v in (a, b)]
        stacked = self._select(first, wide[0], wide[1])
        return self.reshape(stacked, [2 * a.shape[0]] + a.shape[1:])

    # ---- gather and histogram ------------------------------------------------------------

    def gather(self, src: Any, index: Any, axis: Any) -> tensor:
        """``out[i][j] = src[index[i][j]][j]`` for axis 0 (np.take_along_axis); an index
        outside ``[0, src.shape[axis])`` gives 0."""
        src, index = self._tile(src, "gather"), self._tile(index, "gather")
        if not index.dtype.is_int():
            raise TypeError(f"gather's index must be an integer tensor, got {index.dtype}")
        rank = len(src.shape)
        if len(index.shape) != rank:
            raise ValueError(f"gather's source and index must have one rank, got {src.shape} "
                             f"and {index.shape}")
        if not isinstance(axis, int) or not -rank <= axis < rank:
            raise ValueError(f"gather axis {axis} is out of range for a tensor of rank {rank}")
        axis = axis + rank if axis < 0 else axis
        for dim in range(rank):
            if dim != axis and index.shape[dim] != src.shape[dim]:
                raise ValueError(f"gather's index dim {dim} ({index.shape[dim]}) must match the "
                                 f"source's ({src.shape[dim]})")
        size = src.shape[axis]
        # The candidates of each output element run along a new dim after `axis`.
        shape = index.shape[:axis + 1] + [size] + index.shape[axis + 1:]
        bits, restore = self._to_bits(src)
        candidates = self.broadcast_to(self.expand_dims(bits, axis), shape)
        position = self.arange(0, size)
        for dim in range(len(shape)):
            if dim != axis + 1:
                position = self.expand_dims(position, dim)
        wanted = self.expand_dims(index, axis + 1)
        hit = self.compare("eq", wanted, position)
        return restore(self._pick(candidates, hit, axis + 1))

    def histogram(self, x: Any, num_bins: Any, mask: Optional[Any]) -> tensor:
        """int32 counts of the values 0 .. num_bins - 1 in the 1-D integer ``x`` (where
        ``mask`` is true); values outside that range are not counted."""
        x = self._tile(x, "histogram")
        if len(x.shape) != 1:
            raise ValueError(f"histogram needs a 1-D tensor, got shape {x.shape}")
        if not x.dtype.is_int():
            raise TypeError(f"histogram needs integers, got {x.dtype}")
        if not isinstance(num_bins, int) or isinstance(num_bins, bool):
            raise TypeError(f"histogram's num_bins must be a constexpr int, got {num_bins!r}")
        log2_exact(num_bins, "histogram's num_bins")
        bins = self.expand_dims(self.arange(0, num_bins), 0)
        hit = self.compare("eq", self.expand_dims(x, 1), bins)
        if mask is not None:
            mask = self.to_tensor(mask)
            if mask.dtype != tl.int1:
                raise TypeError(f"histogram's mask must be boolean (int1), got {mask.dtype}")
            mask = self.broadcast_to(mask, x.shape)
            hit = self.bitwise("andi", hit, self.expand_dims(mask, 1))
        counts = self.cast(hit, tl.int32)
        return self.reduce([counts], 0, lambda v: self.add(v[0], v[1]))[0]

    # ---- flip and sort -------------------------------------------------------------------

    def flip(self, x: Any, dim: Any) -> tensor:
        x = self._tile(x, "flip")
        rank = len(x.shape)
        dim = rank - 1 if dim is None else dim
        if not isinstance(dim, int) or not -rank <= dim < rank:
            raise ValueError(f"flip dim {dim} is out of range for a tensor of rank {rank}")
        dim = dim + rank if dim < 0 else dim
        steps = log2_exact(x.shape[dim], f"flip's dimension {dim}")
        if steps == 0:
            return x
        bits, restore = self._to_bits(x)
        cube = self.reshape(bits, x.shape[:dim] + [2] * steps + x.shape[dim + 1:]) \
            if steps != 1 else bits
        for i in range(steps):
            cube = self._xor_halves(cube, dim + i)
        return restore(self.reshape(cube, x.shape) if cube.shape != x.shape else cube)

    def _compare_and_swap(self, x: tensor, flip: Any, i: int) -> tensor:
        """One step of the bitonic network on hypercube ``x``: the pairs along its ``i``-th
        innermost dim are ordered (ascending where ``flip ^ is_right`` is 0)."""
        n_dims = len(x.shape)
        bits, restore = self._to_bits(x)
        partner = restore(self._xor_halves(bits, n_dims - 1 - i))
        is_right = self._indicator(n_dims, n_dims - 1 - i)
        direction = self.bitwise("xori", flip, is_right) if isinstance(flip, tensor) \
            else self.bitwise("xori", is_right, int(flip))
        swap = self.compare("ne", self.compare("gt", x, partner), direction)
        return self._select(swap, partner, x)

    def _bitonic_merge_hypercube(self, x: tensor, stage: int, order: int) -> tensor:
        """``stage`` rounds of compare-and-swap; order 0 ascending, 1 descending, 2
        alternating by the ``stage``-th bit of the position."""
        flip: Any = self._indicator(len(x.shape), len(x.shape) - 1 - stage) \
            if order == 2 else order
        for i in range(stage):
            x = self._compare_and_swap(x, flip, stage - 1 - i)
        return x

    def _extremum_axis(self, x: tensor, axis: int, greater: bool) -> tensor:
        """tl.max / tl.min along ``axis`` (removed), with their dtype rules: bf16 and types
        narrower than 32 bits are computed (and returned) in fp32 / int32, as Triton's."""
        if x.dtype.is_bf16() or x.dtype.primitive_bitwidth < 32:
            x = self.cast(x, tl.float32 if x.dtype.is_floating() else tl.int32)
        combine = self.max_combine if greater else self.min_combine  # type: ignore[attr-defined]
        return self.reduce([x], axis, combine)[0]

    def sort_impl(self, x: Any, k: Optional[int], dim: Any, descending: Any) -> tensor:
        """Triton's sort_impl: a bitonic sort of the minor dim; with ``k``, the bitonic top-k
        (the first k elements of the descending sort)."""
        x = self._tile(x, "sort")
        rank = len(x.shape)
        dim = rank - 1 if dim is None else dim
        if dim not in (rank - 1, -1):
            raise ValueError(f"sort and topk support only the minor dimension ({rank - 1}), "
                             f"got dim {dim}")
        descending = int(bool(descending))
        log_n = log2_exact(x.shape[-1], "the sorted dimension")
        log_k = log_n if k is None else log2_exact(k, "topk's k")
        if log_k > log_n:
            raise ValueError(f"topk's k ({k}) exceeds the dimension's size ({x.shape[-1]})")
        n_dims = log2_exact(x.numel, "the tile's size")
        cube = self.reshape(x, [2] * n_dims if n_dims else [1])
        for i in range(1, log_k + 1):
            cube = self._bitonic_merge_hypercube(cube, i, 2 if i < log_n else descending)
        for i in range(log_k + 1, log_n + 1):
            axis = len(cube.shape) - 1 - log_k
            cube = self._extremum_axis(cube, axis, bool(descending))
            cube = self._bitonic_merge_hypercube(cube, log_k, 2 if i < log_n else descending)
        return self.reshape(cube, x.shape[:-1] + [2 ** log_k])

    def bitonic_merge(self, x: Any, dim: Any, descending: Any) -> tensor:
        """Merges bitonic sequences along the minor dim (Triton's bitonic_merge)."""
        x = self._tile(x, "bitonic_merge")
        rank = len(x.shape)
        if dim is not None and dim not in (rank - 1, -1):
            raise ValueError(f"bitonic_merge supports only the minor dimension ({rank - 1}), "
                             f"got dim {dim}")
        stages = log2_exact(x.shape[-1], "the merged dimension")
        cube = self.reshape(x, [2] * log2_exact(x.numel, "the tile's size"))
        cube = self._bitonic_merge_hypercube(cube, stages, int(bool(descending)))
        return self.reshape(cube, x.shape)
