"""``@tessera.jit``: a Python function becomes a kernel launched as ``kernel[grid](args...)``.

Two paths launch a kernel. The fast one is C++ (cpp/bindings/launch.cpp): JITFunction
subclasses its KernelDispatcher, so ``kernel[grid](...)`` binds the arguments, computes their
specialization, finds the loaded kernel in a C++ table, packs the parameters and launches on the
framework's current stream without running any Python. Everything else takes the Python path,
:meth:`JITFunction.run`: it binds, specializes (specialization.py), finds the compiled kernel
in memory (then on disk, then compiles), launches, raises the errors, and registers the kernel
in the C++ table for the next calls. In interpret mode (``TESSERA_INTERPRET=1`` or
``@jit(interpret=True)``) the Python path runs the tile IR on the CPU through the interpreter.
"""
from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from . import config
from ._tessera import runtime as _runtime
from .config import knobs
from .specialization import argument_key, describe

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


# Bumped whenever a @jit function is created. A kernel compiled before a helper it calls was
# redefined (a notebook cell run again) notices on its next launch with one integer compare,
# then checks whether its sources really changed (see JITFunction._check_redefinitions). The
# C++ fast path keeps its own counter, bumped at the same moments, and leaves such a launch here.
_jit_generation = 0

# The fast path reads the interpret knob where tessera.config keeps it (its override dict and
# os.environ's raw bytes), without calling the knob's Python property on every launch.
_runtime.set_interpret_sources(knobs._overrides, config._RAW_ENVIRON,
                               os.fsencode(config.KNOBS["interpret"].name))


class JITFunction(_runtime.KernelDispatcher):
    """A kernel: call it as ``kernel[grid](*args, **constexprs)``; inspect it with ``asm``.

    ``kernel[grid]`` is implemented by the C++ base class (no ``__getitem__`` here): it launches
    registered kernels from C++ and calls :meth:`run` for everything else.
    """

    __tessera_jit__ = True

    def __init__(self, fn: Callable, *, interpret: Optional[bool] = None) -> None:
        self.fn = fn
        self.__name__ = fn.__name__
        self.interpret = interpret
        self.signature = inspect.signature(fn)
        self.params = list(self.signature.parameters.values())
        self.constexpr_names = [p.name for p in self.params
                                if _is_constexpr_annotation(p.annotation)]
        self.runtime_names = [p.name for p in self.params
                              if p.name not in self.constexpr_names]
        self._bind = self._make_binder()
        self._dispatch_configure(
            tuple(p.name for p in self.params),
            tuple(p.name in self.constexpr_names for p in self.params),
            {p.name: p.default for p in self.params if p.default is not inspect.Parameter.empty})
        self._kernels: Dict[Any, Any] = {}      # specialization key -> launchable kernel
        self._tile_ir: Dict[Any, Any] = {}      # specialization key -> module (interpreter)
        self._tile_ir_source: Optional[str] = None  # the source key _tile_ir was built from
        self._source_key: Optional[str] = None
        global _jit_generation
        _jit_generation += 1
        self._generation = _jit_generation
        functools.update_wrapper(self, fn)

    def _make_binder(self) -> Callable:
        """A function with the kernel's own signature returning (runtime args, constexprs).

        Python's own argument binding is far cheaper than inspect.Signature.bind, and its
        errors (missing or unexpected arguments) already read right; run() adds the kernel name.
        """
        defaults = {p.name: p.default for p in self.params
                    if p.default is not inspect.Parameter.empty}
        params = ", ".join(p.name + (f"=__defaults[{p.name!r}]" if p.name in defaults else "")
                           for p in self.params)
        runtime = "".join(f"{n}, " for n in self.runtime_names)
        constexprs = "".join(f"{n}, " for n in self.constexpr_names)
        source = f"def {self.__name__}({params}):\n    return ({runtime}), ({constexprs})\n"
        namespace: Dict[str, Any] = {"__defaults": defaults}
        exec(compile(source, f"<tessera binder of {self.__name__}>", "exec"), namespace)
        return namespace[self.__name__]

    @property
    def interpret(self) -> Optional[bool]:
        """True: always run in the interpreter; False: never; None: as the knob says."""
        return self._interpret

    @interpret.setter
    def interpret(self, value: Optional[bool]) -> None:
        self._interpret = value
        self._dispatch_interpret(value)

    # ------------------------------------------------------------------ calling

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__}: a @jit kernel is launched as "
                           f"{self.__name__}[grid](...); @jit functions it calls are inlined")

    def _arguments(self, args: Sequence[Any], kwargs: Dict[str, Any]):
        """(runtime values, constexpr values, specialization key of the runtime values)."""
        try:
            values, constexprs = self._bind(*args, **kwargs)
        except TypeError as e:  # missing, unexpected or repeated arguments
            raise TypeError(f"{self.__name__}: {e} (signature: {self.__name__}"
                            f"{self.signature})") from None
        try:
            return values, constexprs, tuple(map(argument_key, values))
        except TypeError as e:  # an argument of a kind no kernel can take
            raise TypeError(f"{self.__name__}: argument '{self._failing_argument(values)}': "
                            f"{e}") from None

    def _failing_argument(self, values) -> str:
        for name, value in zip(self.runtime_names, values):
            try:
                argument_key(value)
            except TypeError:
                return name
        return "?"

    def _specialization(self, keys) -> Tuple[Dict[str, str], set, set]:
        """The type strings and divisibility sets that the compiler sees (on a cache miss)."""
        described = []
        for name, key in zip(self.runtime_names, keys):
            try:
                described.append(describe(key))
            except TypeError as e:  # e.g. an array of an unsupported dtype
                raise TypeError(f"{self.__name__}: argument '{name}': {e}") from None
        signature = {n: d[0] for n, d in zip(self.runtime_names, described)}
        div16 = {n for n, d in zip(self.runtime_names, described) if d[1]}
        eq1 = {n for n, d in zip(self.runtime_names, described) if d[2]}
        return signature, div16, eq1

    def run(self, *args, grid: Grid, num_warps: int = 4, num_stages: int = 1, **kwargs) -> None:
        """The Python path of ``kernel[grid](*args, **kwargs)`` (see the module docstring)."""
        values, constexprs, keys = self._arguments(args, kwargs)
        key = (keys, constexprs, num_warps, num_stages)
        try:
            hash(key)
        except TypeError:
            raise TypeError(f"{self.__name__}: constexpr values must be hashable") from None
        if callable(grid):
            grid = grid(dict(zip(self.runtime_names, values),
                             **dict(zip(self.constexpr_names, constexprs))))
        interpret = knobs.interpret if self.interpret is None else self.interpret
        if interpret:
            return self._run_interpreted(key, values, constexprs, grid, num_warps)
        if self._generation != _jit_generation:
            self._check_redefinitions()
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self._prepare(key, values, constexprs, num_warps, num_stages)
        kernel.launch(grid, values)
        # The next calls of this specialization launch from C++ (when it can take their
        # arguments: else they keep coming here).
        self._dispatch_register(values, constexprs, num_warps, num_stages, kernel)

    def _check_redefinitions(self) -> None:
        """Drops compiled kernels when a @jit function this kernel calls has changed."""
        self._generation = _jit_generation
        self._dispatch_validate()
        if self._source_key is None:
            return
        from .frontend import kernel_source_key
        try:
            source = kernel_source_key(self.fn)
        except OSError:
            return
        if source != self._source_key:
            self._source_key = source
            self._kernels.clear()
            self._dispatch_clear()

    def _constexpr_dict(self, constexprs) -> Dict[str, Any]:
        return dict(zip(self.constexpr_names, constexprs))

    def _prepare(self, key, values, constexprs, num_warps, num_stages, built=None):
        """Loads the kernel of ``key``; ``built`` = (metadata, image) when compiled already
        (the autotuner compiles configs in parallel, then installs each one here)."""
        from .runtime import launcher
        try:
            hash(key)
        except TypeError:
            raise TypeError(f"{self.__name__}: constexpr values must be hashable") from None
        kernel = launcher.prepare(self, values, self._specialization(key[0]),
                                  self._constexpr_dict(constexprs), num_warps, num_stages,
                                  built)
        self._kernels[key] = kernel
        return kernel

    def _run_interpreted(self, key, values, constexprs, grid, num_warps):
        from . import interpreter
        from .compiler import build_tile_ir
        from .frontend import kernel_source_key
        # A @jit helper or a tl.constexpr global redefined since (a notebook cell run again)
        # must take effect: check the sources on every interpreted launch (~0.5 ms, small next
        # to interpreting), and rebuild when they changed.
        try:
            source: Optional[str] = kernel_source_key(self.fn)
        except OSError:  # no source: the front end below says so, naming the kernel
            source = None
        if source != self._tile_ir_source:
            self._tile_ir.clear()
            self._tile_ir_source = source
        module = self._tile_ir.get(key)
        if module is None:
            signature, div16, eq1 = self._specialization(key[0])
            module = build_tile_ir(self.fn, signature, self._constexpr_dict(constexprs), div16,
                                   eq1, num_warps)
            self._tile_ir[key] = module
        # The grid as given (not padded to 3 dims): error messages show program ids like it.
        interpreter.run(module, grid, list(values), kernel_name=self.__name__,
                        arg_names=self.runtime_names)

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
        _values, constexprs, keys = self._arguments(args, kwargs)
        signature, div16, eq1 = self._specialization(keys)
        options = CompileOptions(num_warps=num_warps, num_stages=num_stages,
                                 arch=arch or launcher.default_arch())
        return compile_kernel(self.fn, signature, self._constexpr_dict(constexprs), div16, eq1,
                              options)

    def asm(self, *args, **kwargs) -> Dict[str, Any]:
        """Every stage of the compiled kernel: "tir", "tgir", "llir", "ptx", "cubin"."""
        return self.compile(*args, **kwargs).asm

    def report(self, *args, **kwargs):
        """Registers, spills, shared memory, occupancy, time and roofline of this kernel for
        these arguments: ``kernel.report(*args, grid=..., bytes=..., flops=...)``, see
        :func:`tessera.report.report`."""
        from .report import report_method
        return report_method(self, *args, **kwargs)


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
