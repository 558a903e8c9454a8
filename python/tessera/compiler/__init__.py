"""The compiler driver: named stages from a @jit function to a cubin (see compiler.py)."""
from .ast_source import ASTSource  # Triton's triton.compiler.ASTSource
from .compiler import CompileOptions, CompiledKernel, compile_kernel, build_tile_ir, PIPELINES
from .errors import CompilationError

__all__ = ["ASTSource", "CompileOptions", "CompiledKernel", "compile_kernel", "build_tile_ir",
           "PIPELINES", "CompilationError"]
