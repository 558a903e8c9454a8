"""``tessera.knobs``: Triton's ``triton.knobs`` namespaces, mapped onto tessera.config.

Triton code reads and sets settings such as ``triton.knobs.runtime.interpret`` or
``triton.knobs.cache.dir``; with ``import tessera as triton`` these read and set the matching
Tessera knob (docs/config.md). A Triton knob with no Tessera equivalent reads as Triton's
default; setting it to anything else raises an error that names it as not supported yet
(rather than being silently ignored).

Example::

    import tessera as triton
    triton.knobs.runtime.interpret = True      # same as tessera.config.knobs.interpret = True
    print(triton.knobs.cache.dir)              # tessera.config.knobs.cache_dir
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Tuple

from .config import knobs as _config
from .errors import TritonAPINotSupported

# namespace -> {Triton knob: Tessera knob}
_MAPPED: Dict[str, Dict[str, str]] = {
    "runtime": {"interpret": "interpret", "debug": "debug"},
    "cache": {"dir": "cache_dir"},
    "compilation": {"always_compile": "always_compile"},
}

# namespace -> {Triton knob: its default}: readable, settable only to this value.
_DEFAULT_ONLY: Dict[str, Dict[str, Any]] = {
    "runtime": {"launch_enter_hook": None, "launch_exit_hook": None, "jit_cache_hook": None,
                "jit_post_compile_hook": None, "override_arch": None, "add_stages_inspection_hook":
                None},
    "cache": {"dump_dir": None, "override_dir": None},
    "compilation": {"dump_ir": False, "disable_line_info": False, "front_end_debugging": False,
                    "instrumentation_mode": ""},
    "autotuning": {"cache": False, "print": False},
    "language": {"default_fp_fusion": True, "fp32_default": None},
}


class _Namespace:
    """One of Triton's knob namespaces (``knobs.runtime``, ``knobs.cache``, ...)."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _lookup(self, key: str) -> Tuple[str, Any]:
        mapped = _MAPPED.get(self._name, {})
        if key in mapped:
            return "mapped", mapped[key]
        defaults = _DEFAULT_ONLY.get(self._name, {})
        if key in defaults:
            return "default", defaults[key]
        raise TritonAPINotSupported(f"triton.knobs.{self._name}.{key}")

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)
        kind, target = self._lookup(key)
        return getattr(_config, target) if kind == "mapped" else target

    def __setattr__(self, key: str, value: Any) -> None:
        kind, target = self._lookup(key)
        if kind == "mapped":
            setattr(_config, target, value)
        elif value != target:
            raise TritonAPINotSupported(f"triton.knobs.{self._name}.{key}",
                                        f"only its default {target!r} is accepted")

    def __dir__(self):
        return sorted(set(_MAPPED.get(self._name, {})) | set(_DEFAULT_ONLY.get(self._name, {})))

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """As Triton's ``knobs.<namespace>.scope()``: inside the block the namespace's knobs
        may be set; on leaving, each is back to what it was (an earlier setting, or the
        environment's value). Example: ``with triton.knobs.cache.scope(): ...``"""
        missing = object()
        keys = list(_MAPPED.get(self._name, {}).values())
        saved = {key: _config._overrides.get(key, missing) for key in keys}
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is missing:
                    _config.reset(key)
                else:
                    setattr(_config, key, value)


class _TritonKnobs:
    """``triton.knobs``: attribute namespaces, see the module docstring."""

    def __getattr__(self, name: str) -> _Namespace:
        if name in _MAPPED or name in _DEFAULT_ONLY:
            namespace = _Namespace(name)
            object.__setattr__(self, name, namespace)  # cached
            return namespace
        if name.startswith("__"):
            raise AttributeError(name)
        raise TritonAPINotSupported(f"triton.knobs.{name}")


knobs = _TritonKnobs()
