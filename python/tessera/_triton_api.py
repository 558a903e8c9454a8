"""The one table of Triton 3.6's public API and Tessera's status for each name.

The names live in ``_triton_api_names.txt`` (by namespace: ``triton``, ``triton.language``,
tensor methods, dtype attributes, ``tl.math``, libdevice, ``triton.testing``,
``triton.runtime``). A name's status is *computed*: it is supported when the matching Tessera
object has it (``tessera.language.foo``, ``tl.tensor.foo``, ...), so names other modules add
show up without editing this file; ``NOTES`` adds what a plain yes/no cannot say.

Uses: the module ``__getattr__`` of tessera, tessera.language and tessera.runtime raise
:func:`missing_name_error` (a TritonAPINotSupported naming the Triton API, never a bare
AttributeError); the front end reports the same error at the kernel's source line; and
scripts/gen_triton_compat.py writes docs/triton-compat.md from :func:`table`.

Example::

    >>> from tessera import _triton_api
    >>> _triton_api.status("triton", "next_power_of_2")
    'supported'
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .errors import TritonAPINotSupported

_NAMES_FILE = Path(__file__).with_name("_triton_api_names.txt")

# Namespace -> (Tessera module, attribute of it holding the names, or None for the module).
_TESSERA_OBJECTS: Dict[str, Tuple[str, Optional[str]]] = {
    "triton": ("tessera", None),
    "triton.language": ("tessera.language", None),
    "triton.language.tensor": ("tessera.language", "tensor"),
    "triton.language.dtype": ("tessera.language", "dtype"),
    "triton.language.math": ("tessera.language.math", None),
    "triton.language.extra.libdevice": ("tessera.language.extra.libdevice", None),
    "triton.testing": ("tessera.testing", None),
    "triton.runtime": ("tessera.runtime", None),
    "triton.language.extra.cuda": ("tessera.language.extra.cuda", None),
    "triton.runtime.cache": ("tessera.runtime.cache", None),
    "triton.backends.compiler": ("tessera.backends.compiler", None),
}

# What a supported name does differently, or what a missing one needs instead.
NOTES: Dict[Tuple[str, str], str] = {
    ("triton", "jit"): "all options accepted; noinline: Tessera inlines every @jit call",
    ("triton", "autotune"): "warmup/rep/use_cuda_graph/do_bench/cache_results as Triton; "
                            "results also kept on disk by default",
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


def _tessera_object(namespace: str) -> Any:
    module_name, attribute = _TESSERA_OBJECTS[namespace]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    return getattr(module, attribute) if attribute else module


def _instance_attributes(namespace: str) -> Tuple[str, ...]:
    """Names that exist on instances only (a kernel's tensors, dtype objects)."""
    if namespace == "triton.language.tensor":
        from .frontend.ast_to_ir import TENSOR_ATTRIBUTES
        return TENSOR_ATTRIBUTES + ("T",)  # `.T`: the front end's transpose
    if namespace == "triton.language.dtype":
        from .language import core
        names: set = set()
        for example in (core.dtype("fp32"), core.dtype("int32")):
            names.update(vars(example))
        return tuple(names)
    return ()


def status(namespace: str, name: str) -> str:
    """"supported" when Tessera's counterpart object has ``name``, else "not yet"."""
    owner = _tessera_object(namespace)
    if owner is None:
        return "not yet"
    if name in _instance_attributes(namespace):
        return "supported"
    try:
        getattr(owner, name)
    except AttributeError:  # TritonAPINotSupported included
        return "not yet"
    return "supported"


def table() -> List[Tuple[str, str, str, str]]:
    """(namespace, name, status, note) for every Triton name, in the names file's order."""
    return [(namespace, name, status(namespace, name), NOTES.get((namespace, name), ""))
            for namespace, listed in names().items() for name in listed]


def missing_name_error(namespace: str, name: str, module_name: str) -> AttributeError:
    """The error for ``module.name`` that does not exist: TritonAPINotSupported when Triton
    has that name, else Python's usual AttributeError."""
    if not name.startswith("__") and is_triton_name(namespace, name):
        return TritonAPINotSupported(f"{namespace}.{name}", NOTES.get((namespace, name), ""))
    return AttributeError(f"module '{module_name}' has no attribute '{name}'")
