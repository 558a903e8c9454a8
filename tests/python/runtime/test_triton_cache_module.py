"""``triton.runtime.cache`` (tessera.runtime.cache): Triton's file cache manager API over
Tessera's cache directory. Files round-trip byte for byte, the directory name is the key in
base32 (checked against Python's base64), groups drop children whose files have gone."""
import base64
import hashlib
import os

import numpy as np
import pytest

import tessera
from tessera.config import knobs
from tessera.errors import TritonAPINotSupported
from tessera.runtime import cache


@pytest.fixture
def cache_dir(tmp_path):
    knobs.cache_dir = str(tmp_path)
    yield tmp_path
    knobs.reset("cache_dir")


def test_module_path_and_names():
    assert tessera.runtime.cache is cache
    assert cache.RemoteCacheBackend is tessera.runtime.RemoteCacheBackend
    assert issubclass(cache.FileCacheManager, cache.CacheManager)


def test_put_and_get_round_trip(cache_dir):
    rng = np.random.default_rng()
    key = hashlib.sha256(rng.bytes(16)).hexdigest()
    manager = cache.get_cache_manager(key)
    expected_dir = base64.b32encode(bytes.fromhex(key)).decode().rstrip("=")
    assert manager.cache_dir == os.path.join(str(cache_dir), "triton", expected_dir)
    assert cache.default_cache_dir() == os.path.join(str(cache_dir), "triton")
    assert manager.get_file("blob.bin") is None
    blob = rng.bytes(int(rng.integers(1, 5000)))
    path = manager.put(blob, "blob.bin")
    assert manager.get_file("blob.bin") == path and open(path, "rb").read() == blob
    text_path = manager.put(12.5, "value.txt", binary=True)  # not bytes: written as str
    assert open(text_path).read() == "12.5"
    # Another manager for the same key sees the files; no temporary directories are left.
    assert cache.get_cache_manager(key).get_file("blob.bin") == path
    assert sorted(os.listdir(manager.cache_dir)) == ["blob.bin", "value.txt"]


def test_groups_drop_missing_children(cache_dir):
    manager = cache.get_cache_manager(hashlib.sha256(b"group").hexdigest())
    assert manager.get_group("g") is None
    a = manager.put(b"a", "a.bin")
    b = manager.put(b"b", "b.bin")
    manager.put_group("g", {"a": a, "b": b})
    assert manager.get_group("g") == {"a": a, "b": b}
    os.remove(b)
    assert manager.get_group("g") == {"a": a}


def test_dump_and_override_managers_are_not_modelled(cache_dir):
    key = hashlib.sha256(b"k").hexdigest()
    for get in (cache.get_dump_manager, cache.get_override_manager):
        with pytest.raises(TritonAPINotSupported, match=get.__name__):
            get(key)
