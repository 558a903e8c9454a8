"""``@tessera.jit``: a Python function becomes a kernel launched as ``kernel[grid](args...)``.

Two paths launch a kernel. The fast one is C++ (cpp/bindings/launch.cpp): JITFunction
subclasses its KernelDispatcher, so ``kernel[grid](...)`` binds the arguments, computes their
specialization, finds the loaded kernel in a C++ table, packs the parameters and launches on the
framework's current stream without running any Python. Everything else takes the Python path,
:meth:`JITFunction.run`: it binds, specializes (runtime/specialization.py), finds the compiled
kernel in memory (then on disk, then compiles), launches, raises the errors, and registers the
kernel in the C++ table for the next calls. In interpret mode (``TESSERA_INTERPRET=1`` or
``@jit(interpret=True)``) the Python path runs the tile IR on the CPU through the interpreter.
"""
from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from . import config, errors
from ._tessera import runtime as _runtime
from .config import knobs
from .frontend import source_key as source_key_module
from .frontend.exec_source import remember_exec_source
from .constexpr_functions import ConstexprFunction, constexpr_function, next_power_of_2  # noqa: F401
from .jit_source import KernelTextAndWarmup
from .launch_grid import Grid, as_run_call, call_grid, check_grid, run_keyword_hint
from .launch_options import (CODE_KNOBS, LaunchOptions, fast_path_options, parse_options,
                             specialize_flags, split_launch_kwargs)
from .runtime import descriptor_arguments, tuple_arguments
from .runtime.specialization import argument_key, describe, masked_key
from .tracebacks import api_boundary

def _check_kernel_function(fn: Any) -> None:
    """A kernel is a ``def`` whose source Python can find (the front end parses it)."""
    if getattr(fn, "__name__", None) == "<lambda>":
        raise TypeError("tessera.jit: a kernel must be a def with source, not a lambda "
                        f"(the lambda at {fn.__code__.co_filename}:{fn.__code__.co_firstlineno})")


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

# The fast path reads the interpret knob and the knobs that change the code (CODE_KNOBS) where
# tessera.config keeps them (its override dict and os.environ's raw bytes), without calling
# the knobs' Python properties on every launch.
_runtime.set_interpret_sources(
    knobs._overrides, config._RAW_ENVIRON, os.fsencode(config.KNOBS["interpret"].name),
    tuple((name, os.fsencode(config.KNOBS[name].name)) for name in CODE_KNOBS))


class JITFunction(KernelTextAndWarmup, _runtime.KernelDispatcher):
    """A kernel: call it as ``kernel[grid](*args, **constexprs)``; inspect it with ``asm``.

    ``kernel[grid]`` is implemented by the C++ base class (no ``__getitem__`` here): it launches
    registered kernels from C++ and calls :meth:`run` for everything else.
    """

    __tessera_jit__ = True

    def __init__(self, fn: Callable, *, interpret: Optional[bool] = None,
                 do_not_specialize: Optional[Sequence[Union[int, str]]] = None,
                 do_not_specialize_on_alignment: Optional[Sequence[Union[int, str]]] = None,
                 debug: Optional[bool] = None, noinline: Optional[bool] = None,
                 repr: Optional[Callable] = None, launch_metadata: Optional[Callable] = None,
                 version: Any = None) -> None:
        # The C++ base class bumped its generation when this object was made (tp_new): bump
        # ours first too, so that even a constructor that raises below leaves the two in step
        # (else every kernel's launches would stay off the fast path).
        global _jit_generation
        _jit_generation += 1
        self._generation = _jit_generation
        _check_kernel_function(fn)
        remember_exec_source(fn)  # a kernel defined by exec(text): keep its text while we can
        self.fn = fn
        self.__name__ = fn.__name__
        self.interpret = interpret
        self.signature = inspect.signature(fn)
        self.params = list(self.signature.parameters.values())
        self.arg_names = [p.name for p in self.params]
        self.constexpr_names = [p.name for p in self.params
                                if _is_constexpr_annotation(p.annotation)]
        self.runtime_names = [p.name for p in self.params
                              if p.name not in self.constexpr_names]
        self.constexprs = [i for i, p in enumerate(self.params) if p.name in self.constexpr_names]
        # Triton's @jit options: see jit() for their meaning here.
        self.do_not_specialize = list(do_not_specialize or ())
        self.do_not_specialize_on_alignment = list(do_not_specialize_on_alignment or ())
        self.debug = debug
        self.noinline = noinline
        self._repr = repr
        self.launch_metadata = launch_metadata
        self.version = version
        self.hash: Optional[str] = None  # as Triton's; callers of _unsafe_update_src reset it
        flags = specialize_flags(self.arg_names, self.do_not_specialize,
                                 self.do_not_specialize_on_alignment)
        runtime_flags = tuple(f for p, f in zip(self.params, flags)
                              if p.name not in self.constexpr_names)
        self._runtime_flags = runtime_flags if any(runtime_flags) else None
        self._parameter_names = frozenset(self.arg_names)
        self._bind = self._make_binder()
        self._dispatch_configure(
            tuple(p.name for p in self.params),
            tuple(p.name in self.constexpr_names for p in self.params),
            {p.name: p.default for p in self.params if p.default is not inspect.Parameter.empty},
            flags)
        self._kernels: Dict[Any, Any] = {}      # specialization key -> launchable kernel
        self._tile_ir: Dict[Any, Any] = {}      # specialization key -> module (interpreter)
        self._tile_ir_source: Optional[str] = None  # the source key _tile_ir was built from
        self._source_key: Optional[str] = None
        # (namespace, name, value) the source key was read from: see _refresh_sources.
        self._watched: tuple = ()
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

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: tl.constexpr" if p.name in self.constexpr_names
                           else p.name for p in self.params)
        return f"<tessera kernel {self.fn.__module__}.{self.fn.__qualname__}({params})>"

    def __get__(self, instance: Any, owner: Any = None) -> "JITFunction":
        # A kernel stored on a class stays the kernel (never a bound method); defining this
        # also makes inspect see a routine, so help(kernel) and pydoc show the kernel's own
        # signature and docstring rather than JITFunction's.
        return self

    def repr(self, specialization: Any) -> str:
        """The kernel's name in profiles and launch hooks: @jit(repr=f)'s f(specialization),
        else the function's full name (as Triton)."""
        if self._repr is None:
            return f"{self.fn.__module__}.{self.fn.__qualname__}"
        return self._repr(specialization)

    def _arguments(self, args: Sequence[Any], kwargs: Dict[str, Any]):
        """(runtime values, constexpr values, specialization key of the runtime values)."""
        try:
            values, constexprs = self._bind(*args, **kwargs)
        except TypeError as e:  # missing, unexpected or repeated arguments
            raise TypeError(f"{self.__name__}: {e} (signature: {self.__name__}"
                            f"{self.signature}){run_keyword_hint(self.__name__, self.arg_names, e)}"
                            ) from None
        try:
            keys = tuple(map(argument_key, values))
        except TypeError as e:  # an argument of a kind no kernel can take
            raise TypeError(f"{self.__name__}: argument '{self._failing_argument(values)}': "
                            f"{e}") from None
        except OverflowError as e:  # an int no kernel parameter type holds
            raise OverflowError(f"{self.__name__}: argument '{self._failing_argument(values)}': "
                                f"{e} (a kernel's int parameters are int32, int64 or uint64)"
                                ) from None
        if self._runtime_flags is not None:  # do_not_specialize parameters
            keys = tuple(map(masked_key, keys, self._runtime_flags))
        return values, constexprs, keys

    def _failing_argument(self, values) -> str:
        for name, value in zip(self.runtime_names, values):
            try:
                argument_key(value)
            except (TypeError, OverflowError):
                return name
        return "?"

    def _specialization(self, keys) -> Tuple[Dict[str, str], set, set, set]:
        """The type strings and the sets of parameters divisible by 16, equal to 1 and
        addressing 2**31 elements or more that the compiler sees (on a cache miss). Runtime
        parameters passed None are left out: they are constexpr None (:meth:`_constexpr_dict`
        gives them)."""
        signature: Dict[str, str] = {}
        div16, eq1, large = set(), set(), set()
        for name, key in self._leaf_keys(keys):
            if tuple_arguments.is_compile_time(key):
                continue
            try:
                described = describe(key)
            except TypeError as e:  # e.g. an array of an unsupported dtype
                raise TypeError(f"{self.__name__}: argument '{name}': {e}") from None
            signature[name] = described.type
            if described.divisible:
                div16.add(name)
            if described.one:
                eq1.add(name)
            if described.large:
                large.add(name)
        return signature, div16, eq1, large

    def _split_launch(self, kwargs: Dict[str, Any]) -> Tuple[LaunchOptions, Dict[str, Any], tuple]:
        """(launch options, kernel keyword arguments, options as given for the C++ table)."""
        interpreting = bool(knobs.interpret if self.interpret is None else self.interpret)
        given, kwargs = split_launch_kwargs(self.__name__, self._parameter_names, kwargs,
                                            interpreting)
        return parse_options(self.__name__, given, self.debug), kwargs, fast_path_options(given)

    def _present(self, keys, values) -> Tuple[tuple, list]:
        """The runtime values and names the compiled kernel takes (those passed None are
        constexprs in it)."""
        if not any(key[0] in ("none", "tuple", "constexpr") for key in keys):
            return values, self.runtime_names
        # Tuples expand to their runtime elements (runtime/tuple_arguments.py).
        names, launched = tuple_arguments.flatten(self.runtime_names, keys, values)
        return tuple(launched), names

    @api_boundary  # the top Tessera frame of a launch: errors show no frame below it
    def _launch_bracket(self, grid: Grid, args: tuple, kwargs: Dict[str, Any]):
        """``kernel[grid](*args, **kwargs)`` when the C++ fast path leaves it to Python
        (cpp/bindings/launch.cpp). The grid came in the brackets, so every keyword is the
        kernel's: a parameter named ``grid`` or ``warmup`` given by keyword works (Triton's
        launch says "got multiple values for keyword argument 'grid'")."""
        args, kwargs = self._as_run_call(args, kwargs)
        return self.run(*args, grid=grid, **kwargs)

    def _as_run_call(self, args: tuple, kwargs: Dict[str, Any]) -> Tuple[tuple, Dict[str, Any]]:
        """(args, kwargs) for :meth:`run` from a call whose keywords are all the kernel's
        (launch_grid.as_run_call)."""
        return as_run_call(self.__name__, self.signature, args, kwargs)

    @api_boundary
    def run(self, *args, grid: Grid = None, warmup: bool = False, **kwargs):
        """The Python path of ``kernel[grid](*args, **kwargs)`` (see the module docstring).
        ``warmup=True`` compiles and loads without launching (see :meth:`warmup`)."""
        options, kwargs, given = self._split_launch(kwargs)
        values, constexprs, keys = self._arguments(args, kwargs)
        key = (keys, constexprs, options)
        try:
            hash(key)
        except TypeError:
            self._unhashable_constexpr(constexprs)
        if warmup:
            return self._warmup(keys, constexprs, options)
        if grid is None:
            raise TypeError(f"{self.__name__}: a launch needs a grid: "
                            f"{self.__name__}[grid](...)")
        if callable(grid):
            grid = call_grid(self.__name__, grid,
                             dict(zip(self.runtime_names, values),
                                  **dict(zip(self.constexpr_names, constexprs))))
            check_grid(self.__name__, grid, "the grid callable returned")
        else:
            check_grid(self.__name__, grid, "got")
        interpret = knobs.interpret if self.interpret is None else self.interpret
        if interpret:
            return self._run_interpreted(key, values, constexprs, grid, options.num_warps,
                                         options.debug)
        self._refresh_sources()
        kernel = self._kernels.get(key)
        launched, _ = self._present(keys, values)
        if kernel is None:
            kernel = self._prepare(key, values, constexprs, options)
        kernel.launch(grid, launched)
        if any(k[0] in ("tuple", "constexpr") for k in keys):
            return  # the C++ fast path takes neither tuples nor functions: they stay here
        # The next calls of this specialization launch from C++ (when it can take their
        # arguments: else they keep coming here).
        self._dispatch_register(values, constexprs, options.num_warps, options.num_stages,
                                kernel, given)

    def _refresh_sources(self) -> None:
        """Drops the compiled kernels when what the source key was read from changed: a
        @jit function was created since (it may redefine a helper: one integer compare), or
        a name the key read (a ``tl.constexpr`` global, a @jit helper, a closure variable,
        ...: frontend/source_key.py) is no longer bound to the same object. The C++ fast
        path makes the same checks before each launch and leaves such launches here."""
        if self._generation != _jit_generation or (self._watched and
                                                     source_key_module.changed(self._watched)):
            self._check_redefinitions()

    def _unhashable_constexpr(self, constexprs) -> None:
        """Raises the TypeError of a constexpr argument that cannot be hashed (the kernel
        cache is keyed by constexpr values), naming the parameter."""
        for name, value in zip(self.constexpr_names, constexprs):
            try:
                hash(value)
            except TypeError:
                raise TypeError(f"{self.__name__}: constexpr parameter '{name}' got "
                                f"{type(value).__name__} {value!r}, which is not hashable; "
                                "constexpr values key the kernel cache (pass a tuple instead "
                                "of a list)") from None
        raise TypeError(f"{self.__name__}: constexpr values must be hashable")

    def _check_redefinitions(self) -> None:
        """Drops compiled kernels when a @jit function this kernel calls, or a tl.constexpr
        global it reads (``FACT = tl.constexpr(7.0)`` run again), has changed."""
        self._generation = _jit_generation
        self._dispatch_validate()
        if self._source_key is None:
            return
        try:
            source = self._read_source_key()
        except OSError:
            return
        if source != self._source_key:
            self._source_key = source
            self._kernels.clear()
            self._dispatch_clear()

    def _read_source_key(self) -> str:
        """Reads the source key and the globals it came from; the fast path watches them."""
        source, self._watched = source_key_module.kernel_source_and_globals(self.fn)
        self._dispatch_watch(self._watched)
        return source

    def _constexpr_dict(self, constexprs, keys=()) -> Dict[str, Any]:
        """Constexpr values by name, plus the runtime parameters passed None (``keys``)."""
        named = dict(zip(self.constexpr_names, constexprs))
        for name, key in self._leaf_keys(keys):
            if tuple_arguments.is_compile_time(key):
                named[name] = tuple_arguments.compile_time_value(key)
        for name, key in zip(self.runtime_names, keys):  # namedtuples keep their class
            for path, cls in tuple_arguments.classes(name, key):
                named[path + tuple_arguments.CLASS_SUFFIX] = cls
        return named

    def _leaf_keys(self, keys):
        """(name, key) per runtime parameter; a tuple's elements by path (``t.0``, ...)."""
        for name, key in zip(self.runtime_names, keys):
            if key[0] == "tuple":
                yield from ((path, k) for path, k, _ in tuple_arguments.leaves(name, key))
            else:
                yield name, key

    def _prepare(self, key, values, constexprs, options: LaunchOptions, built=None):
        """Loads the kernel of ``key`` = (argument keys, constexprs, options); ``built`` =
        (metadata, image) when compiled already (the autotuner compiles configs in parallel,
        then installs each one here)."""
        from .runtime import launcher, prewarm
        prewarm.wait()  # the process's compile set-up, if its thread still runs
        try:
            hash(key)
        except TypeError:
            self._unhashable_constexpr(constexprs)
        # Read the sources (and start watching the globals they read) before compiling, so a
        # rebound tl.constexpr global is noticed even where the cache key is not rebuilt.
        try:
            self.source_key()
        except OSError:  # no source: compiling says so, naming the kernel
            pass
        launched, names = self._present(key[0], values)
        kernel = launcher.prepare(self, launched, self._specialization(key[0]),
                                  self._constexpr_dict(constexprs, key[0]), options, built,
                                  names=names)
        self._kernels[key] = kernel
        return kernel

    def _run_interpreted(self, key, values, constexprs, grid, num_warps, debug):
        from . import interpreter
        from .compiler import build_tile_ir
        # A @jit helper or a tl.constexpr global redefined since (a notebook cell run again)
        # must take effect: check the sources on every interpreted launch (~0.5 ms, small next
        # to interpreting), and rebuild when they changed.
        try:
            source: Optional[str] = source_key_module.kernel_source_key(self.fn)
        except OSError:  # no source: the front end below says so, naming the kernel
            source = None
        if source != self._tile_ir_source:
            self._tile_ir.clear()
            self._tile_ir_source = source
        module = self._tile_ir.get(key)  # the key holds the launch options, debug included
        if module is None:
            signature, div16, eq1, large = self._specialization(key[0])
            from .language.target_info import interpreting
            with interpreting():  # tl.target_info: the device the interpreter stands for
                try:
                    module = build_tile_ir(self.fn, signature,
                                           self._constexpr_dict(constexprs, key[0]), div16,
                                           eq1, num_warps, debug, interpreter=True,
                                           large_tensors=large)
                except errors.CompilationError as error:  # as Triton's: an InterpreterError
                    raise errors.interpreted(error) from error.__cause__
            self._tile_ir[key] = module
        launched, names = self._present(key[0], values)
        # TensorDescriptor arguments expand to their parts (runtime/descriptor_arguments.py).
        names, launched = descriptor_arguments.flatten(names, launched)
        # The grid as given (not padded to 3 dims): error messages show program ids like it.
        interpreter.run(module, grid, list(launched), kernel_name=self.__name__,
                        arg_names=names)

    # ------------------------------------------------------------------ inspection

    def source_key(self) -> str:
        """Source of the kernel and every @jit function it calls, and the values of the
        globals they read (part of the cache key). Every caller gets the key of the globals
        as they are now (warmup, the autotuner and the disk cache key included): one that
        was rebound since it was read makes it read again (and drops the compiled kernels)."""
        if self._source_key is None:
            self._source_key = self._read_source_key()
        else:
            self._refresh_sources()
        return self._source_key

    @api_boundary
    def compile(self, *args, arch: Optional[str] = None, **kwargs):
        """Compiles for these arguments without launching; returns the CompiledKernel.
        Takes the launch options (num_warps, maxnreg, ...) as a launch does."""
        from .compiler import compile_kernel
        from .runtime import launcher
        options, kwargs, _ = self._split_launch(kwargs)
        _values, constexprs, keys = self._arguments(args, kwargs)
        signature, div16, eq1, large = self._specialization(keys)
        return compile_kernel(self.fn, signature, self._constexpr_dict(constexprs, keys), div16,
                              eq1, options.compile_options(arch or launcher.default_arch()),
                              large_tensors=large)

    def asm(self, *args, **kwargs) -> Dict[str, Any]:
        """Every stage of the compiled kernel: "tir", "tgir", "llir", "ptx", "cubin"."""
        return self.compile(*args, **kwargs).asm

    def report(self, *args, **kwargs):
        """Registers, spills, shared memory, occupancy, time and roofline of this kernel for
        these arguments: ``kernel.report(*args, grid=..., bytes=..., flops=...)``, see
        :func:`tessera.report.report`."""
        from .report import report_method
        return report_method(self, *args, **kwargs)


def jit(fn: Optional[Callable] = None, *, interpret: Optional[bool] = None,
        version: Any = None, repr: Optional[Callable] = None,
        launch_metadata: Optional[Callable] = None,
        do_not_specialize: Optional[Sequence[Union[int, str]]] = None,
        do_not_specialize_on_alignment: Optional[Sequence[Union[int, str]]] = None,
        debug: Optional[bool] = None, noinline: Optional[bool] = None):
    """Decorator: compile a Python function as a Tessera kernel.

    Options, as Triton's ``@triton.jit``:

    * ``do_not_specialize``: parameters (names or indices) never specialized on their value:
      an int is not specialized on being 1 or a multiple of 16, a pointer not on 16-byte
      alignment, so new values never compile a new kernel. ``do_not_specialize_on_alignment``
      drops only the divisibility / alignment part.
    * ``debug``: compile ``tl.device_assert`` and ``assert`` in (off by default, as Triton;
      also the launch option ``debug=`` and ``TESSERA_DEBUG``). The interpreter follows the
      same switch, so a kernel behaves alike on both.
    * ``noinline``: kept for Triton code; Tessera inlines every @jit function it calls (its
      IR has no calls), which gives the same results.
    * ``repr``: ``f(specialization) -> str``, the kernel's name for profilers
      (:meth:`JITFunction.repr`); ``launch_metadata``: stored, as Triton's, for profiler
      hooks (Tessera has no launch hooks that call it yet). ``version``: accepted, unused.
    * ``interpret``: True runs on the CPU interpreter, False never, None as TESSERA_INTERPRET.

    Example::

        @tessera.jit(do_not_specialize=["n"])
        def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)

        add_kernel[(tessera.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    """
    def decorate(f: Callable) -> JITFunction:
        return JITFunction(f, interpret=interpret, do_not_specialize=do_not_specialize,
                           do_not_specialize_on_alignment=do_not_specialize_on_alignment,
                           debug=debug, noinline=noinline, repr=repr,
                           launch_metadata=launch_metadata, version=version)

    if fn is None:
        return decorate
    return decorate(fn)
