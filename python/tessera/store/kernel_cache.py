"""The on-disk cache of compiled kernels: a directory of entries, one per cache key.

An entry is a set of named files (``kernel.cubin``, ``kernel.ptx``, ``metadata.json``, ...) in
``<cache_dir>/<namespace>/<key[:2]>/<key>/``, plus ``__entry__.json``: the SHA-256 and size of
every file. Guarantees:

* Writes are atomic: an entry is written complete into a temporary directory beside its final
  place, then renamed into place; readers see a whole entry or none.
* One writer wins per entry: a writer that finds a complete entry (its checksums hold) already
  in place keeps it and drops its own (``put(..., replace=True)``, used for tuning records, a
  newer decision, replaces it instead). Several processes writing one key at once never leave
  a torn entry, and once an entry is there readers never see it vanish.
* ``with cache.lock(key):`` takes an exclusive ``fcntl.flock`` lock file per key, so that ranks
  and processes sharing the directory compile a missing kernel once: the others wait, then
  find it (runtime/launcher.py ``build``). A lock is released when its holder exits, however
  it exits; where locking is impossible (no fcntl, a read-only directory) it is a no-op.
* A read verifies every checksum; a missing, truncated or corrupted file is a miss (the caller
  compiles again and writes the entry anew), never bad data.
* The cache is an optimisation: when it cannot be written (a read-only directory, a cache
  directory that is a file, no space left), ``put`` warns once per directory and returns None;
  the caller goes on with what it compiled.

``knobs.cache_dir`` chooses the directory; ``knobs.always_compile`` turns every read into a miss.

Example::

    key = cache_key(build_id=BUILD_ID, source=src, specialization=spec, options=opts,
                    arch="sm_90a")
    cache = KernelCache()
    files = cache.get(key)
    if files is None:
        files = {"kernel.cubin": cubin, "metadata.json": json.dumps(meta).encode()}
        cache.put(key, files)
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import re
import shutil
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Mapping, Optional

from ..config import knobs

_MANIFEST = "__entry__.json"
_FORMAT = 1
_KEY = re.compile(r"^[0-9a-f]{16,128}$")
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# How long `lock` waits for another process's compile of the same key before compiling anyway
# (a duplicate compile is only wasted time; a wait without end would be a hang).
LOCK_WAIT_SECONDS = 600.0


def _canonical(value: Any) -> Any:
    """A JSON-able, deterministic form of key material (no reprs holding addresses)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, bytes):
        return {"bytes": hashlib.sha256(value).hexdigest()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted(json.dumps(_canonical(v), sort_keys=True) for v in value)}
    if isinstance(value, Mapping):
        items = [(str(k), _canonical(v)) for k, v in value.items()]
        return {"dict": sorted(items, key=lambda item: item[0])}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {type(value).__name__: _canonical(dataclasses.asdict(value))}
    raise TypeError(f"cache key material of type {type(value).__name__} has no canonical form; "
                    f"pass str, int, float, bool, bytes, None, or lists/dicts/dataclasses of them")


def cache_key(*, build_id: str, source: str, specialization: Any, options: Any,
              arch: str) -> str:
    """SHA-256 (hex) of everything the compiled code depends on.

    ``build_id`` identifies the compiler build, ``source`` the kernel and its @jit callees,
    ``specialization`` the argument kinds/dtypes/divisibility and constexpr values, ``options``
    num_warps, num_stages and the like, ``arch`` the exact target such as "sm_90a".
    """
    material = {"build_id": build_id, "source": source, "specialization": specialization,
                "options": options, "arch": arch}
    text = json.dumps(_canonical(material), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class KernelCache:
    """Entries of named files under one directory; see the module docstring for guarantees."""

    def __init__(self, directory: Optional[str] = None, namespace: str = "kernels") -> None:
        self._directory = directory  # None: knobs.cache_dir, read at each call
        self._namespace = namespace

    @property
    def root(self) -> Path:
        return Path(self._directory or knobs.cache_dir) / self._namespace

    def entry_path(self, key: str) -> Path:
        if not _KEY.match(key):
            raise ValueError(f"cache key must be 16-128 lowercase hex digits, got {key!r}")
        return self.root / key[:2] / key

    def get(self, key: str) -> Optional[Dict[str, bytes]]:
        """The entry's files by name, or None (absent, incomplete, corrupted, always_compile).
        An entry missing here comes from the remote backend when one is configured
        (remote_cache.py), and is then kept on disk."""
        if knobs.always_compile:
            return None
        files = self._get_local(key)
        if files is None:
            from . import remote_cache
            files = remote_cache.get(key)
            if files is not None:
                self._put_local(key, files)
        return files

    def _get_local(self, key: str) -> Optional[Dict[str, bytes]]:
        entry = self.entry_path(key)
        try:
            manifest = json.loads((entry / _MANIFEST).read_bytes())
            if manifest.get("format") != _FORMAT or manifest.get("key") != key:
                return None
            files: Dict[str, bytes] = {}
            for name, expected in manifest["files"].items():
                data = (entry / name).read_bytes()
                if len(data) != expected["size"] or _sha256(data) != expected["sha256"]:
                    return None
                files[name] = data
            return files
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # missing or unreadable: a miss, and the caller rewrites the entry

    def put(self, key: str, files: Mapping[str, bytes], replace: bool = False) -> Optional[Path]:
        """Writes the entry atomically and returns its path, or None (with a warning, once per
        directory) when the cache cannot be written. A complete entry already there is kept
        (the first writer wins: the same key compiles to the same files) unless ``replace``;
        a damaged one is always replaced. The remote backend, when one is configured, gets
        the entry too."""
        path = self._put_local(key, files, replace)
        from . import remote_cache
        remote_cache.put(key, files)
        return path

    def _put_local(self, key: str, files: Mapping[str, bytes],
                   replace: bool = False) -> Optional[Path]:
        entry = self.entry_path(key)
        for name, data in files.items():
            if not _FILE_NAME.match(name) or name == _MANIFEST:
                raise ValueError(f"invalid cache file name {name!r}")
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise TypeError(f"cache file {name!r} must be bytes, got {type(data).__name__}")
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            draft = entry.parent / f".tmp-{key}-{os.getpid()}-{uuid.uuid4().hex}"
            draft.mkdir()
        except OSError as error:
            _warn_unwritable(self.root, error)
            return None
        try:
            manifest: Dict[str, Any] = {"format": _FORMAT, "key": key, "files": {}}
            for name, data in files.items():
                data = bytes(data)
                _write_file(draft / name, data)
                manifest["files"][name] = {"sha256": _sha256(data), "size": len(data)}
            # The manifest goes in last: an entry without it is never read.
            _write_file(draft / _MANIFEST, json.dumps(manifest, indent=1).encode())
            _install(draft, entry,
                     keep_existing=lambda: not replace and self._get_local(key) is not None)
        except OSError as error:
            _warn_unwritable(self.root, error)
            return None
        finally:
            shutil.rmtree(draft, ignore_errors=True)  # absent when it was installed
        return entry

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[bool]:
        """Holds an exclusive lock on ``key`` across processes (``fcntl.flock`` on
        ``<shard>/.lock-<key>``) for a block; yields whether it is held (False: no locking
        here, or LOCK_WAIT_SECONDS passed). Callers check the cache again inside the block:
        the process they waited for may have written the entry."""
        try:
            import fcntl
        except ImportError:  # not POSIX
            yield False
            return
        path = self.entry_path(key).parent / f".lock-{key}"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:  # a read-only cache: compile without the lock
            yield False
            return
        try:
            held = _acquire(handle, fcntl)
            yield held
        finally:
            os.close(handle)  # closing releases the lock

    def remove(self, key: str) -> bool:
        """Deletes the entry if present (atomically: it is renamed away first). Returns whether
        an entry was removed; raises OSError when one is there but cannot be removed."""
        entry = self.entry_path(key)
        trash = entry.parent / f".trash-{key}-{os.getpid()}-{uuid.uuid4().hex}"
        try:
            os.rename(entry, trash)
        except FileNotFoundError:
            return False
        if trash.is_dir():
            shutil.rmtree(trash)
        else:
            trash.unlink()
        return True


_warned_directories: set = set()


def _warn_unwritable(root: Path, error: OSError) -> None:
    if str(root) in _warned_directories:
        return
    _warned_directories.add(str(root))
    warnings.warn(f"Tessera's cache at {root} cannot be written ({error.strerror or error}); "
                  "kernels are compiled and run without it. Set TESSERA_CACHE_DIR to a "
                  "writable directory to keep compiled kernels between runs.",
                  RuntimeWarning, stacklevel=3)


def _write_file(path: Path, data: bytes) -> None:
    # No fsync: after a crash the checksums turn a half-written file into a miss.
    with open(path, "wb") as f:
        f.write(data)


def _acquire(handle: int, fcntl: Any) -> bool:
    """flock(LOCK_EX) on ``handle``, polled so that it gives up after LOCK_WAIT_SECONDS."""
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    pause = 0.002
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        except OSError:  # a file system without flock (some network mounts)
            return False


def _install(draft: Path, entry: Path, keep_existing: Callable[[], bool]) -> None:
    """Renames the complete draft directory to ``entry``; an entry already there is kept when
    ``keep_existing()`` says so (a complete entry: the first writer wins), else replaced.

    rename(2) of a directory onto a non-empty one fails, so an entry to replace is first renamed
    to a trash name (atomic) and deleted; between the two renames readers see a miss. When two
    writers race, each one's rename either lands or finds the other's entry in place, which is
    then kept or replaced in the same way.
    """
    for _ in range(16):
        try:
            os.rename(draft, entry)
            return
        except OSError as error:
            if error.errno == errno.ENOTDIR and not entry.is_dir():
                entry.unlink()  # a file where the entry belongs: damage, not an entry
                continue
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        if keep_existing():
            return  # the draft is deleted by the caller
        trash = entry.parent / f".trash-{entry.name}-{os.getpid()}-{uuid.uuid4().hex}"
        try:
            os.rename(entry, trash)
        except FileNotFoundError:
            continue  # another writer moved it first
        shutil.rmtree(trash, ignore_errors=True)
    # Other writers kept landing entries in between: theirs are complete, keep the last one.
