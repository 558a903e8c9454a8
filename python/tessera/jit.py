"""``@tessera.jit``: a Python function becomes a kernel launched as ``kernel[grid](args...)``.

A call binds the arguments, specializes on their kinds (specialization.py), finds the compiled
kernel in the in-memory cache (then the on-disk cache, then compiles), and launches it on the
stream of the arguments' framework. In interpret mode (``TESSERA_INTERPRET=1`` or
``@jit(interpret=True)``) the same tile IR runs on the CPU through the interpreter instead.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .config import knobs
from .specialization import specialize

Grid = Union[Sequence[int], Callable[[Dict[str, Any]], Sequence[int]]]


def cdiv(a, b):
    """Ceiling division ``(a + b - 1) // b``, on Python ints (and inside kernels)."""
    return (a + b - 1) // b


def _is_constexpr_annotation(annotation: Any) -> bool:
    if annotation is inspect.Parameter.empty:
        return False
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "constexpr"
    return getattr(annotation, "__name__", "") == "constexpr"


def _normalize_grid(grid: Any, kernel: str) -> Tuple[int, int, int]:
    if isinstance(grid, int):
        grid = (grid,)
    try:
        dims = tuple(int(g) for g in grid)
    except TypeError:
        raise TypeError(f"{kernel}: the grid must be a tuple of 1 to 3 ints or a callable "
                        f"returning one, got {grid!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 0 for d in dims):
        raise ValueError(f"{kernel}: the grid must have 1 to 3 non-negative dims, got {dims}")
    return dims + (1,) * (3 - len(dims))


class JITFunction:
    """A kernel: call it as ``kernel[grid](*args, **constexprs)``; inspect it with ``asm``."""

    __tessera_jit__ = True

    def __init__(self, fn: Callable, *, interpret: Optional[bool] = None) -> None:
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.interpret = interpret
        self.signature = inspect.signature(fn)
        self.params = list(self.signature.parameters.values())
        self.constexpr_params = {p.name for p in self.params
                                 if _is_constexpr_annotation(p.annotation)}
        self._kernels: Dict[Any, Any] = {}      # specialization key -> launchable kernel
        self._tile_ir: Dict[Any, Any] = {}      # specialization key -> module (interpreter)
        self._source_key: Optional[str] = None
        functools.update_wrapper(self, fn)

    # ------------------------------------------------------------------ calling

    def __getitem__(self, grid: Grid) -> Callable[..., None]:
        return functools.partial(self.run, grid=grid)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__}: a @jit kernel is launched as "
                           f"{self.__name__}[grid](...); @jit functions it calls are inlined")

    def _bind(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> Dict[str, Any]:
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}: {e} (signature: {self.__name__}"
                            f"{self.signature})") from None
        bound.apply_defaults()
        return dict(bound.arguments)

    def _split(self, bound: Dict[str, Any]):
        """constexpr values, runtime parameter names and values, and the specialization."""
        constexprs: Dict[str, Any] = {}
        names: List[str] = []
        values: List[Any] = []
        for p in self.params:
            value = bound[p.name]
            if p.name in self.constexpr_params or value is None:
                constexprs[p.name] = value
            else:
                names.append(p.name)
                values.append(value)
        specs = []
        for name, value in zip(names, values):
            try:
                specs.append(specialize(value))
            except (TypeError, OverflowError) as e:
                raise TypeError(f"{self.__name__}: argument '{name}': {e}") from None
        return constexprs, names, values, tuple(specs)

    def _signature_of(self, names: List[str], specs) -> Tuple[Dict[str, str], set, set]:
        signature = {n: s[0] for n, s in zip(names, specs)}
        div16 = {n for n, s in zip(names, specs) if s[1]}
        eq1 = {n for n, s in zip(names, specs) if s[2]}
        return signature, div16, eq1

    def run(self, *args, grid: Grid, num_warps: int = 4, num_stages: int = 1, **kwargs) -> None:
        bound = self._bind(args, kwargs)
        constexprs, names, values, specs = self._split(bound)
        if callable(grid):
            grid = grid(bound)
        grid3 = _normalize_grid(grid, self.__name__)
        interpret = knobs.interpret if self.interpret is None else self.interpret
        key = (specs, _hashable(constexprs), num_warps, num_stages)
        if interpret:
            self._run_interpreted(key, names, values, specs, constexprs, grid3, num_warps)
        else:
            from .runtime import launcher
            kernel = self._kernels.get(key)
            if kernel is None:
                kernel = launcher.prepare(self, key, names, values, specs, constexprs,
                                          num_warps, num_stages)
                self._kernels[key] = kernel
            kernel.launch(grid3, values)

    def _run_interpreted(self, key, names, values, specs, constexprs, grid3, num_warps):
        from . import interpreter
        from .compiler import build_tile_ir
        module = self._tile_ir.get(key)
        if module is None:
            signature, div16, eq1 = self._signature_of(names, specs)
            module = build_tile_ir(self.fn, signature, constexprs, div16, eq1, num_warps)
            self._tile_ir[key] = module
        interpreter.run(module, grid3, values, kernel_name=self.__name__)

    # ------------------------------------------------------------------ inspection

    def source_key(self) -> str:
        """Source of the kernel and every @jit function it calls (part of the cache key)."""
        if self._source_key is None:
            from .frontend import kernel_source_key
            self._source_key = kernel_source_key(self.fn)
        return self._source_key

    def compile(self, *args, arch: Optional[str] = None, num_warps: int = 4,
                num_stages: int = 1, **kwargs):
        """Compiles for these arguments without launching; returns the CompiledKernel."""
        from .compiler import CompileOptions, compile_kernel
        from .runtime import launcher
        bound = self._bind(args, kwargs)
        constexprs, names, _values, specs = self._split(bound)
        signature, div16, eq1 = self._signature_of(names, specs)
        options = CompileOptions(num_warps=num_warps, num_stages=num_stages,
                                 arch=arch or launcher.default_arch())
        return compile_kernel(self.fn, signature, constexprs, div16, eq1, options)

    def asm(self, *args, **kwargs) -> Dict[str, Any]:
        """Every stage of the compiled kernel: "tir", "tgir", "llir", "ptx", "cubin"."""
        return self.compile(*args, **kwargs).asm


def _hashable(values: Dict[str, Any]):
    items = []
    for k, v in sorted(values.items()):
        try:
            hash(v)
            items.append((k, v))
        except TypeError:
            items.append((k, repr(v)))
    return tuple(items)


def jit(fn: Optional[Callable] = None, *, interpret: Optional[bool] = None):
    """Decorator: compile a Python function as a Tessera kernel.

    Example::

        @tessera.jit
        def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)

        add_kernel[(tessera.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    """
    if fn is None:
        return lambda f: JITFunction(f, interpret=interpret)
    return JITFunction(fn, interpret=interpret)
