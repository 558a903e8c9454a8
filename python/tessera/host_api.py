"""Triton's host-side compile API: ``triton.compile`` (with ``ASTSource``),
``triton.must_use_result``, ``triton.AsyncCompileMode`` and ``triton.FutureKernel``.

``compile(ASTSource(kernel, signature, constexprs, attrs), target=, options=)`` compiles one
specialization given as Triton spells it (a type string per parameter, "constexpr" for
compile-time ones; constexprs keyed by name or by path tuple; attrs such as
``{(0,): [["tt.divisibility", 16]]}``) with Tessera's compiler, returning the
CompiledKernel (``asm``, ``metadata``, ``name``, ``n_regs``, ``n_spills``).

``with AsyncCompileMode(executor):`` makes ``kernel.warmup(...)`` submit its compilation to
``executor`` and return a :class:`FutureKernel` at once; leaving the block waits for every
compilation (their results go to the kernel cache, so launches afterwards load them).

Example::

    with tessera.AsyncCompileMode(ThreadPoolExecutor(8)):
        futures = [kernel.warmup(torch.float32, n, BLOCK=b, grid=(1,)) for b in (64, 128)]
    compiled = [f.result() for f in futures]
"""
from __future__ import annotations

from concurrent.futures import Executor, Future, as_completed
from contextvars import ContextVar
from typing import Any, Callable, Dict, List, Optional

from .device.active_driver import GPUTarget

__all__ = ["ASTSource", "compile", "must_use_result", "AsyncCompileMode", "FutureKernel"]


# ------------------------------------------------------------------------------- compile

class ASTSource:
    """A @jit function and one specialization of it, as Triton's ``triton.compiler.ASTSource``.

    ``signature``: parameter name -> type string ("*fp32", "i32", "fp16", ...; "constexpr"
    for compile-time parameters); ``constexprs``: name or path tuple (``(2,)``) -> value;
    ``attrs``: path tuple -> list of ``[name, value]``, of which ``tt.divisibility`` 16 and
    ``tt.equal_to`` 1 are what Tessera specializes on.

    Example::

        src = ASTSource(add_kernel, {"x": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                        constexprs={"BLOCK": 256}, attrs={(0,): [["tt.divisibility", 16]]})
    """

    def __init__(self, fn: Any, signature: Dict[str, str], constexprs: Optional[Dict] = None,
                 attrs: Optional[Dict] = None) -> None:
        from .frontend.source import is_jit
        if not is_jit(fn):
            raise TypeError(f"ASTSource: expected a @jit function, got {fn!r}")
        self.fn = fn
        self.name = fn.__name__
        self.ext = "ttir"
        for key in signature:
            if not isinstance(key, str):
                raise TypeError("ASTSource: signature keys must be parameter names (str)")
        self.signature = dict(signature)
        self.constants: Dict[tuple, Any] = {}
        for key, value in (constexprs or {}).items():
            self.constants[(self._index(key),) if isinstance(key, str) else tuple(key)] = value
        self.attrs = dict(attrs or {})

    def _index(self, name: str) -> int:
        if name not in self.fn.arg_names:
            raise TypeError(f"ASTSource: '{name}' is not a parameter of {self.name}")
        return self.fn.arg_names.index(name)

    def path_name(self, path: tuple) -> str:
        """A path tuple as Tessera names it: ``(1,)`` -> "y", ``(1, 0)`` -> "y.0"."""
        return ".".join([self.fn.arg_names[path[0]], *map(str, path[1:])])

    def specialization(self):
        """(signature, constexprs, divisible by 16, equal to 1) in Tessera's form."""
        signature = {name: ty for name, ty in self.signature.items() if ty != "constexpr"}
        constexprs = {self.path_name(path): value for path, value in self.constants.items()}
        for name in list(signature):
            if name in constexprs:  # a value given for a typed parameter specializes it
                del signature[name]
        div16, eq1 = set(), set()
        for path, pairs in self.attrs.items():
            name = self.path_name(tuple(path))
            for attr, value in pairs:
                if attr == "tt.divisibility" and value % 16 == 0:
                    div16.add(name)
                elif attr == "tt.equal_to" and value == 1:
                    eq1.add(name)
        return signature, constexprs, div16, eq1


def _arch_of(target: Any) -> str:
    if target is None:
        from .runtime import launcher
        return launcher.default_arch()
    if isinstance(target, str):
        return target
    if not isinstance(target, GPUTarget) or target.backend != "cuda":
        raise TypeError(f"compile: target must be a cuda GPUTarget, got {target!r}")
    return "sm_90a" if target.arch == 90 else f"sm_{target.arch}"


def compile(src: ASTSource, target: Any = None, options: Optional[Dict[str, Any]] = None,
            _env_vars: Any = None):
    """Compiles ``src`` for ``target`` (a GPUTarget, e.g. ``GPUTarget("cuda", 80, 32)``, or
    an arch string; default: the current device's) with ``options`` (num_warps, num_stages,
    maxnreg, enable_fp_fusion, debug); returns the CompiledKernel. As Triton's
    ``triton.compile`` for an ASTSource; IR files as sources are not supported.

    Example::

        compiled = tessera.compile(ASTSource(kernel, {"x": "*fp32", "B": "constexpr"},
                                             {"B": 128}), target=GPUTarget("cuda", 80, 32))
        print(compiled.asm["ptx"])
    """
    from .compiler import CompileOptions, compile_kernel
    if isinstance(src, str):
        raise TypeError("compile: IR files as sources (IRSource) are not supported by Tessera; "
                        "pass an ASTSource of a @jit function")
    if not isinstance(src, ASTSource):
        raise TypeError(f"compile: expected an ASTSource, got {type(src).__name__}")
    options = dict(options or {})
    allowed = {"num_warps", "num_stages", "maxnreg", "enable_fp_fusion", "debug", "num_ctas"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise TypeError(f"compile: unknown options {unknown} (Tessera takes {sorted(allowed)})")
    if options.pop("num_ctas", 1) != 1:
        raise ValueError("compile: num_ctas must be 1 (Tessera has no thread-block clusters)")
    if options.get("debug") is None:
        options.pop("debug", None)
    signature, constexprs, div16, eq1 = src.specialization()
    return compile_kernel(src.fn.fn, signature, constexprs, div16, eq1,
                          CompileOptions(arch=_arch_of(target), **options))


# ----------------------------------------------------------------------- must_use_result

def must_use_result(x: Any, s: Any = True) -> Any:
    """Marks a @jit function (or a builtin) whose result must be used: a kernel calling it as
    a statement fails to compile, naming the call (and the message, if given), as Triton.

    Example::

        @tessera.must_use_result("the new state is returned")
        @tessera.jit
        def advance_state(state): ...
    """
    if isinstance(x, str):
        return lambda fn: must_use_result(fn, x)
    x._must_use_result = s
    return x


# ------------------------------------------------------------------------- async compile

active_mode: ContextVar[Optional["AsyncCompileMode"]] = ContextVar(
    "tessera_async_compile_mode", default=None)


class FutureKernel:
    """A compilation running in an AsyncCompileMode's executor; :meth:`result` waits for the
    CompiledKernel (``ignore_errors=True``: None if it failed)."""

    def __init__(self, finalize_compile: Callable[[Any], None], future: Future) -> None:
        self.finalize_compile = finalize_compile
        self.kernel = None
        self.future = future

    def result(self, ignore_errors: bool = False) -> Any:
        if self.kernel is not None:
            return self.kernel
        try:
            kernel = self.future.result()
        except Exception:  # noqa: BLE001 - the compilation's own error, re-raised below
            if ignore_errors:
                return None
            raise
        self.finalize_compile(kernel)
        self.kernel = kernel
        return kernel


class AsyncCompileMode:
    """Within ``with AsyncCompileMode(executor):``, ``kernel.warmup`` compiles in
    ``executor`` and returns a FutureKernel; one compilation per distinct specialization.
    Leaving the block waits for all of them (``ignore_errors``: failed ones are dropped)."""

    def __init__(self, executor: Executor, *, ignore_errors: bool = False) -> None:
        self.executor = executor
        self.ignore_errors = ignore_errors
        self.raw_futures: List[Future] = []
        self.future_kernels: Dict[Any, FutureKernel] = {}

    def submit(self, key: Any, compile_fn: Callable[[], Any],
               finalize_fn: Callable[[Any], None]) -> FutureKernel:
        existing = self.future_kernels.get(key)
        if existing is not None:
            return existing
        future = self.executor.submit(compile_fn)
        future._tessera_key = key  # type: ignore[attr-defined]
        self.raw_futures.append(future)
        kernel = FutureKernel(finalize_fn, future)
        self.future_kernels[key] = kernel
        return kernel

    def __enter__(self) -> "AsyncCompileMode":
        if active_mode.get() is not None:
            raise RuntimeError("Another AsyncCompileMode is already active")
        self._token = active_mode.set(self)
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        try:
            for future in as_completed(self.raw_futures):
                self.future_kernels[future._tessera_key].result(self.ignore_errors)
        finally:
            active_mode.reset(self._token)
