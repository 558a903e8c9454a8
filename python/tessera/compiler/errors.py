"""The compiler's errors under the module path Triton code imports them from
(``triton.compiler.errors.CompilationError``); defined in tessera/errors.py."""
from ..errors import (CompilationError, CompileTimeAssertionFailure, TritonError,
                      UnsupportedLanguageConstruct)

__all__ = ["CompilationError", "CompileTimeAssertionFailure", "TritonError",
           "UnsupportedLanguageConstruct"]
