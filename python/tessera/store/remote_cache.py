"""A remote store behind the on-disk kernel cache (Triton's ``RemoteCacheBackend``).

A backend class is built with an entry's key and offers ``get(filenames) -> {name: bytes}``
(the files it has) and ``put(filename, data)``. When one is configured
(``TESSERA_REMOTE_CACHE_BACKEND=module:Class``, or :func:`set_backend`), the disk cache
(cache.py) reads an entry missing on disk from it (checked, then kept on disk) and writes new
entries to it too, so machines sharing the store compile each kernel once. An entry is its
files plus ``__entry__.json`` (names, sizes, SHA-256), written last and read first, so a
reader never takes a partial or corrupted entry. The remote store is an optimisation: a
backend that fails warns once and the cache goes on without it.

``RedisRemoteCacheBackend`` keeps files in Redis (``TESSERA_REDIS_HOST``/``_PORT``/
``_KEY_FORMAT``; needs the ``redis`` package).

Example::

    class DictBackend(tessera.runtime.RemoteCacheBackend):
        store = {}
        def __init__(self, key): self.key = key
        def get(self, filenames):
            return {f: self.store[self.key, f] for f in filenames if (self.key, f) in self.store}
        def put(self, filename, data): self.store[self.key, filename] = data

    tessera.runtime.remote_cache.set_backend(DictBackend)
"""
from __future__ import annotations

import hashlib
import importlib
import json
import warnings
from abc import abstractmethod
from typing import Dict, List, Mapping, Optional, Type

from ..config import knobs

__all__ = ["RemoteCacheBackend", "RedisRemoteCacheBackend", "set_backend", "backend_class"]

_MANIFEST = "__entry__.json"


class RemoteCacheBackend:
    """One entry (``key``) of a remote/distributed cache: subclass and implement get/put."""

    def __init__(self, key: str) -> None:
        self.key = key

    @abstractmethod
    def get(self, filenames: List[str]) -> Dict[str, bytes]:
        """The files among ``filenames`` the store has."""

    @abstractmethod
    def put(self, filename: str, data: bytes) -> None:
        """Stores one file of the entry."""


class RedisRemoteCacheBackend(RemoteCacheBackend):
    """Files in Redis under ``TESSERA_REDIS_KEY_FORMAT`` keys (needs ``pip install redis``)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        try:
            import redis
        except ImportError:
            raise RuntimeError("RedisRemoteCacheBackend needs the redis package "
                               "(pip install redis)") from None
        self._key_format = knobs.redis_key_format
        self._redis = redis.Redis(host=knobs.redis_host, port=knobs.redis_port)

    def _redis_key(self, filename: str) -> str:
        return self._key_format.format(key=self.key, filename=filename)

    def get(self, filenames: List[str]) -> Dict[str, bytes]:
        values = self._redis.mget([self._redis_key(f) for f in filenames])
        return {f: v for f, v in zip(filenames, values) if v is not None}

    def put(self, filename: str, data: bytes) -> None:
        self._redis.set(self._redis_key(filename), data)


_override: Optional[Type[RemoteCacheBackend]] = None
_warned: set = set()


def set_backend(cls: Optional[Type[RemoteCacheBackend]]) -> None:
    """Uses ``cls`` as the remote backend (None: back to TESSERA_REMOTE_CACHE_BACKEND)."""
    global _override
    if cls is not None and not (isinstance(cls, type) and callable(getattr(cls, "get", None))):
        raise TypeError(f"set_backend needs a RemoteCacheBackend class, got {cls!r}")
    _override = cls


def backend_class() -> Optional[Type[RemoteCacheBackend]]:
    """The configured backend class, or None."""
    if _override is not None:
        return _override
    spec = knobs.remote_cache_backend
    if not spec:
        return None
    module_name, _, class_name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as error:
        raise RuntimeError(f"TESSERA_REMOTE_CACHE_BACKEND={spec!r}: cannot load the class "
                           f"({error}); write it as module:Class") from None


def _warn(cls: type, error: Exception) -> None:
    if cls not in _warned:
        _warned.add(cls)
        warnings.warn(f"remote kernel cache {cls.__name__} failed ({type(error).__name__}: "
                      f"{error}); going on without it", RuntimeWarning, stacklevel=3)


def get(key: str) -> Optional[Dict[str, bytes]]:
    """The entry's files from the remote store, when it has all of them intact; else None."""
    cls = backend_class()
    if cls is None:
        return None
    try:
        backend = cls(key)
        manifest_data = backend.get([_MANIFEST]).get(_MANIFEST)
        if manifest_data is None:
            return None
        manifest = json.loads(manifest_data)
        names = list(manifest["files"])
        files = backend.get(names)
    except Exception as error:  # noqa: BLE001 - any backend's failure: the store is optional
        _warn(cls, error)
        return None
    for name in names:
        data = files.get(name)
        expected = manifest["files"][name]
        if data is None or len(data) != expected["size"] or \
                hashlib.sha256(data).hexdigest() != expected["sha256"]:
            return None
    return {name: bytes(files[name]) for name in names}


def put(key: str, files: Mapping[str, bytes]) -> None:
    """Writes the entry to the remote store (files first, the manifest last)."""
    cls = backend_class()
    if cls is None:
        return
    manifest = {"files": {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                          for name, data in files.items()}}
    try:
        backend = cls(key)
        for name, data in files.items():
            backend.put(name, bytes(data))
        backend.put(_MANIFEST, json.dumps(manifest).encode())
    except Exception as error:  # noqa: BLE001 - the store is optional
        _warn(cls, error)
