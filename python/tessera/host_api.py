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
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from .device.active_driver import GPUTarget

if TYPE_CHECKING:
    from .compiler import ASTSource

__all__ = ["compile", "must_use_result", "AsyncCompileMode", "FutureKernel"]


def __getattr__(name: str):
    # ASTSource lives with the compiler (compiler/ast_source.py, Triton's triton.compiler
    # path), loaded only when used, as compile() loads the compiler.
    if name == "ASTSource":
        from .compiler import ASTSource
        return ASTSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ------------------------------------------------------------------------------- compile

def _arch_of(target: Any) -> str:
    if target is None:
        from .runtime import launcher
        return launcher.default_arch()
    if isinstance(target, str):
        return target
    if not isinstance(target, GPUTarget) or target.backend != "cuda":
        raise TypeError(f"compile: target must be a cuda GPUTarget, got {target!r}")
    return "sm_90a" if target.arch == 90 else f"sm_{target.arch}"


def compile(src: "ASTSource", target: Any = None, options: Optional[Dict[str, Any]] = None,
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
    from .compiler import ASTSource, CompileOptions, compile_kernel
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
