"""``triton.runtime.cache``: Triton's file cache manager API over Tessera's cache directory.

Code written for Triton stores its own artefacts (autotuning results, generated launchers) with
``get_cache_manager(key).put(data, filename)`` and reads them back with ``get_file``. Here the
files live under ``knobs.cache_dir``/``triton``/<key>, beside (never inside) the compiled-kernel
entries of kernel_cache.py; ``TESSERA_CACHE_DIR`` moves both.
Triton's dump and override directories are not modelled (its ``knobs.cache.dump_dir`` and
``override_dir`` stay None), so ``get_dump_manager`` / ``get_override_manager`` say so.

Example::

    from tessera.runtime.cache import get_cache_manager
    manager = get_cache_manager(hashlib.sha256(b"my-tuning").hexdigest())
    path = manager.put(json.dumps(best), "best.json", binary=False)
    assert manager.get_file("best.json") == path
"""
from __future__ import annotations

import base64
import json
import os
import uuid
from abc import ABC, abstractmethod
from typing import Dict, Optional

from ..config import knobs
from ..errors import TritonAPINotSupported
from ..store.remote_cache import RedisRemoteCacheBackend, RemoteCacheBackend  # noqa: F401 (re-exported)

__all__ = ["CacheManager", "FileCacheManager", "RemoteCacheBackend", "RedisRemoteCacheBackend",
           "get_cache_manager", "get_override_manager", "get_dump_manager", "default_cache_dir"]

_SUBDIRECTORY = "triton"  # keeps these files apart from compiled-kernel entries


def default_cache_dir() -> str:
    """Where ``FileCacheManager`` keeps its files (older Triton's name for the cache root):
    ``knobs.cache_dir``/triton. Example: ``os.listdir(default_cache_dir())``."""
    return os.path.join(knobs.cache_dir, _SUBDIRECTORY)


class CacheManager(ABC):
    """Triton's cache manager interface: named files (or groups of them) under one key."""

    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        pass

    @abstractmethod
    def get_file(self, filename: str) -> Optional[str]:
        """The path of ``filename`` when it was put, else None."""

    @abstractmethod
    def put(self, data, filename: str, binary: bool = True) -> str:
        """Stores ``data`` (bytes, else its ``str``) as ``filename``; returns its path."""

    @abstractmethod
    def get_group(self, filename: str) -> Optional[Dict[str, str]]:
        """The existing files of the group ``filename`` by child name, or None."""

    @abstractmethod
    def put_group(self, filename: str, group: Dict[str, str]) -> str:
        """Records ``group`` (child name -> path) under ``filename``."""


class FileCacheManager(CacheManager):
    """Files in ``default_cache_dir()/<key>``; each ``put`` is atomic (written beside, then
    renamed), so a concurrent reader sees a whole file or none."""

    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        if override or dump:
            raise TritonAPINotSupported(
                "triton.runtime.cache." + ("get_dump_manager" if dump else "get_override_manager"),
                "Tessera has no dump or override cache directory (knobs.cache.dump_dir and "
                "override_dir are None)")
        self.key = key
        self.cache_dir = os.path.join(default_cache_dir(), key)
        os.makedirs(self.cache_dir, exist_ok=True)

    def _make_path(self, filename: str) -> str:
        return os.path.join(self.cache_dir, filename)

    def has_file(self, filename: str) -> bool:
        return os.path.exists(self._make_path(filename))

    def get_file(self, filename: str) -> Optional[str]:
        return self._make_path(filename) if self.has_file(filename) else None

    def get_group(self, filename: str) -> Optional[Dict[str, str]]:
        path = self.get_file(f"__grp__{filename}")
        if path is None:
            return None
        with open(path) as f:
            children = json.load(f).get("child_paths")
        if children is None:
            return None
        # As Triton: children whose files have gone are left out.
        return {name: child for name, child in children.items() if os.path.exists(child)}

    def put_group(self, filename: str, group: Dict[str, str]) -> str:
        return self.put(json.dumps({"child_paths": group}), f"__grp__{filename}", binary=False)

    def put(self, data, filename: str, binary: bool = True) -> str:
        binary = isinstance(data, bytes)  # as Triton: the data's type decides, not the flag
        path = self._make_path(filename)
        temp_dir = os.path.join(self.cache_dir, f"tmp.pid_{os.getpid()}_{uuid.uuid4()}")
        os.makedirs(temp_dir, exist_ok=True)
        temp_path = os.path.join(temp_dir, filename)
        with open(temp_path, "wb" if binary else "w") as f:
            f.write(data if binary else str(data))
        os.replace(temp_path, path)
        os.removedirs(temp_dir)
        return path


def _base32(key: str) -> str:
    # Triton's directory name for a hex key: base32 of its bytes, without padding.
    return base64.b32encode(bytes.fromhex(key)).decode("utf-8").rstrip("=")


def get_cache_manager(key: str) -> CacheManager:
    """The manager of hex digest ``key`` (its directory is the key in base32, as Triton's).
    Example: ``get_cache_manager(hashlib.sha256(b"x").hexdigest()).get_file("a.json")``."""
    return FileCacheManager(_base32(key))


def get_override_manager(key: str) -> CacheManager:
    """Triton's override-directory manager: not modelled, raises TritonAPINotSupported."""
    return FileCacheManager(_base32(key), override=True)


def get_dump_manager(key: str) -> CacheManager:
    """Triton's dump-directory manager: not modelled, raises TritonAPINotSupported."""
    return FileCacheManager(_base32(key), dump=True)


def __getattr__(name: str):
    # Triton's other names here (triton_key, ...) say they are not supported yet.
    from .._triton_names import missing_name_error
    raise missing_name_error("triton.runtime.cache", name, __name__)
