"""Triton 3.6's public names (``_triton_api_names.txt``) and the error for one Tessera lacks.

The ground floor of the Triton compatibility: the module ``__getattr__`` of tessera,
tessera.language, tessera.runtime, tessera.testing and tessera.backends.compiler raise
:func:`missing_name_error` (a TritonAPINotSupported naming the Triton API, never a bare
AttributeError), and the front end reports the same error at the kernel's source line
(:func:`is_triton_name`). Which of these names Tessera supports is computed on the top floor,
by looking at the package itself (_triton_api.py: ``status``, ``table``).

Example::

    >>> from tessera import _triton_names
    >>> _triton_names.is_triton_name("triton", "next_power_of_2")
    True
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .errors import TritonAPINotSupported

_NAMES_FILE = Path(__file__).with_name("_triton_api_names.txt")

# What a supported name does differently, or what a missing one needs instead.
NOTES: Dict[Tuple[str, str], str] = {
    ("triton", "jit"): "all options accepted; noinline: Tessera inlines every @jit call",
    ("triton", "autotune"): "warmup/rep/use_cuda_graph/do_bench/cache_results as Triton; "
                            "results also kept on disk by default; with the default "
                            "timer, configs within 8% of the fastest are timed again in "
                            "alternating rounds (Triton: one pass)",
    ("triton", "Config"): "num_ctas must be 1; maxnreg honoured",
    ("triton", "compile"): "ASTSource only (no IR files); returns a CompiledKernel to inspect, "
                           "launch through the kernel",
    ("triton", "set_allocator"): "needed for device-side tensor descriptors",
    ("triton", "JITFunction"): "num_ctas launch option must be 1",
    ("triton.runtime", "driver"): "driver.active over Tessera's libcuda runtime; a modeled "
                                  "sm_90 device in interpret mode without a GPU",
    ("triton.testing", "do_bench_cudagraph"): "needs PyTorch with CUDA",
    ("triton.language", "tuple"): "tuple kernel arguments launch through the Python path",
    ("triton.language", "condition"): "disable_licm honoured (licm skips the loop)",
    ("triton.language", "const"): "a tl.const pointer parameter rejects stores and atomics",
    ("triton.language", "target_info"): "the arch compiled for; the modeled sm_90 when "
                                        "interpreting without a GPU",
    ("triton.runtime", "RedisRemoteCacheBackend"): "needs the redis package",
    ("triton.testing", "cuda_memcheck"): "runs compute-sanitizer (else cuda-memcheck)",
    ("triton.language.extra.cuda", "globaltimer"): "GPU only (inline PTX), as in Triton",
    ("triton.language.extra.cuda", "smid"): "GPU only (inline PTX), as in Triton",
    ("triton.language.extra.cuda", "gdc_wait"): "needs sm_90+; a no-op in the interpreter",
    ("triton.language.extra.cuda", "gdc_launch_dependents"): "needs sm_90+; a no-op in the "
                                                             "interpreter",
    ("triton.runtime.cache", "get_dump_manager"): "raises: no dump directory",
    ("triton.runtime.cache", "get_override_manager"): "raises: no override directory",
}


def _load_names() -> Dict[str, List[str]]:
    names: Dict[str, List[str]] = {}
    current: Optional[str] = None
    for line in _NAMES_FILE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            names[current] = []
        elif current is not None:
            names[current].append(line)
    return names


_NAMES: Optional[Dict[str, List[str]]] = None


def names() -> Dict[str, List[str]]:
    """Triton's public names by namespace."""
    global _NAMES
    if _NAMES is None:
        _NAMES = _load_names()
    return _NAMES


def is_triton_name(namespace: str, name: str) -> bool:
    return name in names().get(namespace, ())


def missing_name_error(namespace: str, name: str, module_name: str) -> AttributeError:
    """The error for ``module.name`` that does not exist: TritonAPINotSupported when Triton
    has that name, else Python's usual AttributeError."""
    if not name.startswith("__") and is_triton_name(namespace, name):
        return TritonAPINotSupported(f"{namespace}.{name}", NOTES.get((namespace, name), ""))
    return AttributeError(f"module '{module_name}' has no attribute '{name}'")
