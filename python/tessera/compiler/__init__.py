"""The compiler driver: named stages from a @jit function to a cubin (see compiler.py)."""
from .compiler import CompileOptions, CompiledKernel, compile_kernel, build_tile_ir, PIPELINES
from .errors import CompilationError

from ..host_api import ASTSource  # noqa: E402 - Triton's triton.compiler.ASTSource

__all__ = ["ASTSource", "CompileOptions", "CompiledKernel", "compile_kernel", "build_tile_ir",
           "PIPELINES", "CompilationError"]
