"""Run-time errors under the module path Triton code imports them from
(``triton.runtime.errors.OutOfResources``, ...); defined in tessera/errors.py."""
from ..errors import AutotunerError, InterpreterError, OutOfResources, PTXASError

__all__ = ["AutotunerError", "InterpreterError", "OutOfResources", "PTXASError"]
