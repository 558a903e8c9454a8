"""The one table of Triton 3.6's public API and Tessera's status for each name.

The names live in ``_triton_api_names.txt`` (by namespace: ``triton``, ``triton.language``,
tensor methods, dtype attributes, ``tl.math``, libdevice, ``triton.testing``,
``triton.runtime``). A name's status is *computed*: it is supported when the matching Tessera
object has it (``tessera.language.foo``, ``tl.tensor.foo``, ...), so names other modules add
show up without editing this file; ``NOTES`` adds what a plain yes/no cannot say.

It stands on the top floor, since it looks at the whole package (by module name); the names
themselves, their notes and the error for a missing one (the module ``__getattr__`` of
tessera, tessera.language and tessera.runtime raise it, the front end at the kernel's source
line) are on the ground floor, in _triton_names.py. scripts/gen_triton_compat.py writes
docs/triton-compat.md from :func:`table`.

Example::

    >>> from tessera import _triton_api
    >>> _triton_api.status("triton", "next_power_of_2")
    'supported'
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, List, Optional, Tuple

# The names, their notes and the error for a missing one live a floor below (_triton_names.py),
# where every module's __getattr__ reaches them; here for the callers of this table.
from ._triton_names import NOTES, is_triton_name, missing_name_error, names

__all__ = ["NOTES", "is_triton_name", "missing_name_error", "names", "status", "table"]

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
        from .language.tensor_methods import TENSOR_ATTRIBUTES
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
