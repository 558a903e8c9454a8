"""``tl.map_elementwise``: apply a scalar @jit function to every element of tensors (Triton
3.6). The scalar function may branch on element values and return several results;
frontend/elementwise.py compiles it over whole tiles with per-element control flow.

Example::

    @tessera.jit
    def selu_scalar(x, alpha):
        if x > 0:
            return x
        else:
            return alpha * (tl.exp(x) - 1)

    @tessera.jit
    def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(y_ptr + offs, tl.map_elementwise(selu_scalar, x, 1.67), mask=offs < n)
"""
from __future__ import annotations

from typing import Any, Callable, List, Tuple, Union

from .core import _unwrap, builtin, tensor
from .reduction import _with_generator


def _columns(semantic: Any, x: tensor, pack: int) -> List[tensor]:
    """The ``pack`` columns of ``x`` (shape [M, pack]), each of shape [M]."""
    if pack == 1:
        return [semantic.reshape(x, [x.shape[0]])]
    evens, odds = semantic.split(semantic.reshape(x, [x.shape[0], pack // 2, 2]))
    even_cols, odd_cols = _columns(semantic, evens, pack // 2), _columns(semantic, odds, pack // 2)
    return [c for pair in zip(even_cols, odd_cols) for c in pair]


def _uncolumns(semantic: Any, columns: List[tensor]) -> tensor:
    """The inverse of :func:`_columns`: [M] columns back into one [M, pack] tensor."""
    if len(columns) == 1:
        return semantic.reshape(columns[0], [columns[0].shape[0], 1])
    evens = _uncolumns(semantic, columns[0::2])
    odds = _uncolumns(semantic, columns[1::2])
    joined = semantic.join(evens, odds)  # [M, pack/2, 2]
    return semantic.reshape(joined, [joined.shape[0], 2 * joined.shape[1]])


@_with_generator
@builtin
def map_elementwise(scalar_fn: Callable[..., Any], *args: Any, pack: int = 1,
                    _semantic=None, _generator=None) -> Union[tensor, Tuple[tensor, ...]]:
    """Applies the @jit function ``scalar_fn`` to each element of ``args`` (broadcast to one
    shape); returns a tensor, or a tuple of tensors when it returns several values.

    ``pack``: each call takes ``pack`` consecutive elements (in row-major order) of every
    argument, argument by argument (``x0, x1, y0, y1`` for pack=2), and returns ``pack``
    values of every result, result by result; a power of two dividing the element count.

    Example::

        lo, hi = tl.map_elementwise(min_max_scalar, x, y)
    """
    if _generator is None:
        raise RuntimeError("map_elementwise can only be used inside a @jit function")
    pack = _unwrap(pack)
    if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1 or pack & (pack - 1):
        raise ValueError(f"map_elementwise's pack must be a power of two, got {pack!r}")
    if not args:
        raise TypeError("map_elementwise needs at least one input tensor")
    inputs = _semantic.broadcast_values(*[_semantic.to_tensor(_unwrap(a)) for a in args])
    shape = list(inputs[0].shape)
    numel = 1
    for size in shape:
        numel *= size
    if pack > 1:
        if numel % pack:
            raise ValueError(f"map_elementwise: {numel} elements do not split into packs of "
                             f"{pack}")
        inputs = [c for x in inputs for c in
                  _columns(_semantic, _semantic.reshape(x, [numel // pack, pack]), pack)]
    results = _generator.call_elementwise(scalar_fn, inputs)  # frontend/elementwise.py
    single = isinstance(results, tensor)
    results = [results] if single else list(results)
    if not results or not all(isinstance(r, tensor) for r in results):
        raise TypeError(f"map_elementwise: {scalar_fn.__name__} must return tensors, got "
                        f"{results!r}")
    if pack > 1:
        if len(results) % pack:
            raise TypeError(f"map_elementwise: {scalar_fn.__name__} returned {len(results)} "
                            f"values, not a multiple of pack={pack}")
        groups = [results[i:i + pack] for i in range(0, len(results), pack)]
        for group in groups:
            if any(r.dtype != group[0].dtype for r in group):
                raise TypeError("map_elementwise: type mismatch in the packed results")
        grid = [numel // pack]
        results = [_semantic.reshape(_uncolumns(_semantic, [_semantic.to_shape(r, grid)
                                                            for r in group]), shape)
                   for group in groups]
    else:
        results = [_semantic.to_shape(r, shape) for r in results]
    # As Triton: a function returning one tensor gives a tensor, else a tuple
    return results[0] if single else tuple(results)
