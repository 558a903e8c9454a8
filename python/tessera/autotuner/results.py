"""Tuning results on disk: a new process (or a notebook restart) picks the best config without
tuning again.

One entry of the kernel cache (store/kernel_cache.py, namespace "tuning": atomic, checksummed) per
tuning key, holding ``tuning.json``. The key hashes everything the choice depends on: the
kernel's source and its @jit callees, the values of the ``key`` arguments, every argument's
dtype, the device name and its exact arch (sm_90a is not sm_90), the compiler build, the
ptxas release, and the list of candidate configs (a changed list means a new tuning).

    key = tuning_key(jit_fn, key_values, dtypes, target, configs)   # None: not persistable
    record = load(key)             # None: absent, damaged or unreadable
    store(key, record)
"""
from __future__ import annotations

import json
import logging
from typing import Any, Dict, Optional, Sequence

from ..store.kernel_cache import KernelCache, cache_key

NAMESPACE = "tuning"
FILE = "tuning.json"
_log = logging.getLogger("tessera.autotune")


class NotPersistable(TypeError):
    """A key value with no stable on-disk form (tuned again in every process)."""


def canonical_value(value: Any) -> Any:
    """A JSON form of a key argument's value: numbers, strings, tensors by shape and dtype."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, (list, tuple)):
        return [canonical_value(v) for v in value]
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return canonical_value(value.item())   # a NumPy scalar such as np.int64(4096)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return {"shape": [int(s) for s in value.shape], "dtype": str(value.dtype)}
    raise NotPersistable(f"a key argument of type {type(value).__name__} has no stable form")


def _ptxas_release() -> str:
    from ..compiler import ptxas
    try:
        path = ptxas.find_ptxas()
    except ptxas.PtxasError:
        return "invalid"
    return ptxas.version(path) if path else "driver-jit"


def key_material(jit_fn, key_values: Sequence[Any], dtypes: Sequence[Any], target,
                 configs: Sequence[Any]) -> Dict[str, Any]:
    """Everything the tuning key hashes, readable (stored beside the result)."""
    from ..runtime import launcher

    config_forms = [c.to_json() for c in configs]
    if any(form is None for form in config_forms):
        raise NotPersistable("a config's meta-parameters have no JSON form")
    return {
        "kernel": jit_fn.__name__,
        "key_values": [canonical_value(v) for v in key_values],
        "dtypes": [None if d is None else str(d) for d in dtypes],
        "device": target.name,
        "arch": target.arch,
        "compiler": launcher.compiler_build_id(),
        "ptxas": _ptxas_release(),
        "configs": config_forms,
    }


def tuning_key(material: Dict[str, Any], source: str) -> str:
    """The cache key of one tuning (SHA-256 hex), from :func:`key_material` and the source."""
    return cache_key(build_id=material["compiler"] + "/" + material["ptxas"], source=source,
                     specialization={"key_values": material["key_values"],
                                     "dtypes": material["dtypes"], "device": material["device"],
                                     "kernel": material["kernel"]},
                     options={"kind": "tuning", "configs": material["configs"],
                              **({"spills": material["spills"]} if "spills" in material
                                 else {})},
                     arch=material["arch"])


def load(key: str) -> Optional[Dict[str, Any]]:
    """The stored record, or None (absent, damaged: the checksum failed, or not a record)."""
    files = KernelCache(namespace=NAMESPACE).get(key)
    if files is None or FILE not in files:
        return None
    try:
        record = json.loads(files[FILE])
        if record.get("format") != 1 or not isinstance(record["best"], dict):
            raise ValueError("not a tuning record")
        return record
    except (ValueError, KeyError, TypeError, AttributeError):
        _log.warning("ignoring an unreadable tuning record %s", key)
        return None


def store(key: str, record: Dict[str, Any]) -> None:
    try:
        # A new tuning replaces an older record (forced, or its best config stopped compiling).
        KernelCache(namespace=NAMESPACE).put(key, {FILE: json.dumps(record, indent=1).encode()},
                                             replace=True)
    except OSError as error:  # a read-only or full cache directory must not fail the launch
        _log.warning("could not store the tuning result: %s", error)


def make_record(material: Dict[str, Any], best, timings: Dict[Any, float],
                failures: Dict[Any, str], seconds: float, compile_seconds: float = 0.0,
                benchmark_seconds: float = 0.0, compile_workers: int = 0,
                ranks: int = 1) -> Dict[str, Any]:
    """The JSON record of one tuning (configs by their JSON form): ``tuning_seconds`` in all,
    of which ``compile_seconds`` compiling the configs (in parallel, on ``compile_workers``
    processes) and ``benchmark_seconds`` timing them; ``ranks``: the torch.distributed ranks
    that shared the tuning (each timed its share of the configs)."""
    return {"format": 1, "best": best.to_json(), "key": material,
            "timings_ms": [[c.to_json(), t] for c, t in timings.items()],
            "failures": [[c.to_json(), r] for c, r in failures.items()],
            "tuning_seconds": seconds, "compile_seconds": compile_seconds,
            "benchmark_seconds": benchmark_seconds, "compile_workers": compile_workers,
            "ranks": ranks}


def _config_of(form: Any, configs: Sequence[Any]):
    """The config of ``configs`` with this JSON form (None when there is none)."""
    for config in configs:
        if config.to_json() == form:
            return config
    return None


def best_of(record: Dict[str, Any], configs: Sequence[Any]):
    """The stored best config: one of ``configs``, or rebuilt from its JSON form (a config
    that ``early_config_prune`` made); None when the form is not a config's."""
    from .configs import Config

    form = record.get("best")
    config = _config_of(form, configs)
    if config is not None:
        return config
    try:
        return Config(dict(form["kwargs"]), num_warps=form["num_warps"],
                      num_stages=form["num_stages"])
    except (KeyError, TypeError, ValueError):
        return None


def stored_timings(record: Dict[str, Any], configs: Sequence[Any]) -> Dict[Any, float]:
    timings = {}
    for form, ms in record.get("timings_ms", []):
        config = _config_of(form, configs)
        if config is not None:
            timings[config] = float(ms)
    return timings
