"""The on-disk kernel cache (python/tessera/store/kernel_cache.py): atomic entries, checksums,
concurrent writers."""
import json
import multiprocessing
import os

import pytest
from tessera.config import knobs
from tessera.runtime.kernel_cache import KernelCache, cache_key

KEY = "ab" + "0123456789abcdef" * 3 + "cdef"


@pytest.fixture
def cache(tmp_path):
    knobs.cache_dir = str(tmp_path)
    yield KernelCache()
    knobs.reset()


def _files(tag: str, size: int = 4096):
    payload = (tag.encode() * (size // len(tag) + 1))[:size]
    return {"kernel.cubin": payload, "kernel.ptx": tag.encode() + b" ptx",
            "metadata.json": json.dumps({"tag": tag}).encode()}


def test_round_trip_and_layout(cache, tmp_path):
    files = _files("a")
    path = cache.put(KEY, files)
    assert path == tmp_path / "kernels" / KEY[:2] / KEY
    assert cache.get(KEY) == files
    manifest = json.loads((path / "__entry__.json").read_text())
    assert set(manifest["files"]) == set(files)
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no leftovers


def test_absent_key_is_a_miss(cache):
    assert cache.get(KEY) is None


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "manifest", "extend"])
def test_damaged_entry_is_a_miss_and_rewrite_repairs_it(cache, damage):
    files = _files("b")
    path = cache.put(KEY, files)
    cubin = path / "kernel.cubin"
    if damage == "truncate":
        cubin.write_bytes(files["kernel.cubin"][:100])
    elif damage == "flip":
        data = bytearray(files["kernel.cubin"])
        data[1234] ^= 0x40
        cubin.write_bytes(bytes(data))
    elif damage == "delete":
        cubin.unlink()
    elif damage == "manifest":
        (path / "__entry__.json").write_text("{not json")
    elif damage == "extend":
        cubin.write_bytes(files["kernel.cubin"] + b"\0")
    assert cache.get(KEY) is None
    cache.put(KEY, files)
    assert cache.get(KEY) == files


def test_draft_directory_without_manifest_is_never_read(cache, tmp_path):
    # A writer that died before installing leaves only a .tmp-* directory: not an entry.
    draft = tmp_path / "kernels" / KEY[:2] / f".tmp-{KEY}-1-dead"
    draft.mkdir(parents=True)
    (draft / "kernel.cubin").write_bytes(b"partial")
    assert cache.get(KEY) is None


def test_always_compile_bypasses_reads_only(cache):
    knobs.always_compile = True
    try:
        assert cache.put(KEY, _files("c")) is not None  # writes still land
        assert cache.get(KEY) is None
    finally:
        knobs.reset("always_compile")
    assert cache.get(KEY) == _files("c")


def test_the_first_complete_entry_wins_unless_replaced(cache):
    cache.put(KEY, _files("c"))
    cache.put(KEY, _files("d"))                     # a second writer keeps the first entry
    assert cache.get(KEY) == _files("c")
    cache.put(KEY, _files("d"), replace=True)       # a newer decision (tuning records)
    assert cache.get(KEY) == _files("d")


def test_invalid_keys_and_names(cache):
    with pytest.raises(ValueError):
        cache.get("../../etc")
    with pytest.raises(ValueError):
        cache.put(KEY, {"../escape": b""})
    with pytest.raises(ValueError):
        cache.put(KEY, {"__entry__.json": b""})
    with pytest.raises(TypeError):
        cache.put(KEY, {"kernel.ptx": "text, not bytes"})


def test_remove(cache):
    cache.put(KEY, _files("e"))
    cache.remove(KEY)
    assert cache.get(KEY) is None
    cache.remove(KEY)  # absent: no error


def test_cache_key_is_deterministic_and_sensitive():
    base = dict(build_id="build-1", source="def k(x): pass",
                specialization=(("*fp32", True, False), ("i32", False, True)),
                options={"num_warps": 4, "num_stages": 2}, arch="sm_90a")
    key = cache_key(**base)
    assert len(key) == 64 and key == cache_key(**base)
    assert key == cache_key(**{**base, "options": {"num_stages": 2, "num_warps": 4}})
    for field, value in [("build_id", "build-2"), ("source", "def k(y): pass"),
                         ("specialization", (("*fp16", True, False), ("i32", False, True))),
                         ("options", {"num_warps": 8, "num_stages": 2}), ("arch", "sm_80")]:
        assert cache_key(**{**base, field: value}) != key, field
    with pytest.raises(TypeError):
        cache_key(**{**base, "options": object()})


# -------------------------------------------------------------------- concurrent processes

def _writer(directory: str, tag: str, rounds: int) -> None:
    cache = KernelCache(directory)
    for _ in range(rounds):
        cache.put(KEY, _files(tag, size=64 * 1024))


def _reader(directory: str, rounds: int, torn) -> None:
    cache = KernelCache(directory)
    for _ in range(rounds):
        files = cache.get(KEY)
        if files is not None:
            tag = json.loads(files["metadata.json"])["tag"]
            if files != _files(tag, size=64 * 1024):
                torn.value += 1


def test_concurrent_writers_never_tear_an_entry(tmp_path):
    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    torn = context.Value("i", 0)
    writers = [context.Process(target=_writer, args=(str(tmp_path), f"writer{i}", 40))
               for i in range(6)]
    readers = [context.Process(target=_reader, args=(str(tmp_path), 400, torn))
               for _ in range(2)]
    for process in writers + readers:
        process.start()
    for process in writers + readers:
        process.join(timeout=120)
        assert process.exitcode == 0
    assert torn.value == 0
    files = KernelCache(str(tmp_path)).get(KEY)
    assert files is not None
    tag = json.loads(files["metadata.json"])["tag"]
    assert files == _files(tag, size=64 * 1024)
    leftovers = [p.name for p in (tmp_path / "kernels" / KEY[:2]).iterdir() if p.name != KEY]
    assert leftovers == []
