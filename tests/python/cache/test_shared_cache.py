"""One cache directory shared by many processes (ranks of a job on one file system): eight
writers of the same and of different keys leave no damaged entry, the first complete entry
wins and readers never see another, a kernel missing from the cache is compiled once however
many processes want it (the key's lock file), and Triton's file cache manager stays whole."""
import json
import multiprocessing
import time

import pytest
import tessera
import tessera.language as tl
from tessera.compiler import CompileOptions
from tessera.config import knobs
from tessera.runtime import kernel_cache, launcher
from tessera.runtime.cache import get_cache_manager
from tessera.runtime.kernel_cache import KernelCache

SAME = "5a" + "0123456789abcdef" * 3 + "cdef"
PROCESSES = 8
FORK = multiprocessing.get_context("fork")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path):
    knobs.cache_dir = str(tmp_path)
    yield tmp_path
    knobs.reset()


def payload(tag: str, size: int = 48 * 1024):
    body = (tag.encode() * (size // len(tag) + 1))[:size]
    return {"kernel.cubin": body, "metadata.json": json.dumps({"tag": tag}).encode()}


def own_key(index: int) -> str:
    return f"{index:02x}" + "fedcba9876543210" * 3 + "0000"


def _write(directory, index, rounds, start):
    start.wait()
    cache = KernelCache(directory)
    for _ in range(rounds):
        cache.put(SAME, payload(f"writer{index}"))
        cache.put(own_key(index), payload(f"own{index}"))


def _read(directory, rounds, start, torn, tags):
    start.wait()
    cache = KernelCache(directory)
    seen = set()
    for _ in range(rounds):
        files = cache.get(SAME)
        if files is None:
            continue
        tag = json.loads(files["metadata.json"])["tag"]
        seen.add(tag)
        if files != payload(tag):
            torn.value += 1
    tags.put(sorted(seen))


def test_eight_writers_of_same_and_different_keys(cache_dir):
    start = FORK.Barrier(PROCESSES + 2)
    torn, tags = FORK.Value("i", 0), FORK.Queue()
    processes = [FORK.Process(target=_write, args=(str(cache_dir), i, 15, start))
                 for i in range(PROCESSES)]
    processes += [FORK.Process(target=_read, args=(str(cache_dir), 400, start, torn, tags))
                  for _ in range(2)]
    for process in processes:
        process.start()
    seen = [tags.get(timeout=120) for _ in range(2)]
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    assert torn.value == 0
    cache = KernelCache(str(cache_dir))
    winner = json.loads(cache.get(SAME)["metadata.json"])["tag"]
    assert cache.get(SAME) == payload(winner)
    for observed in seen:                    # one writer won; no reader saw another's entry
        assert observed in ([], [winner])
    for index in range(PROCESSES):
        assert cache.get(own_key(index)) == payload(f"own{index}")
    leftovers = [p.name for shard in (cache_dir / "kernels").iterdir()
                 for p in shard.iterdir() if p.name.startswith((".tmp-", ".trash-"))]
    assert leftovers == []


@tessera.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, FACTOR: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * FACTOR, mask=mask)


SPEC = ({"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"x_ptr", "out_ptr"}, set(), set())
OPTIONS = CompileOptions(num_warps=4, num_stages=1, arch="sm_90a")


def _build(directory, factor, start, results):
    knobs.cache_dir = directory
    start.wait()
    metadata, image = launcher.build(scale_kernel, SPEC, {"BLOCK": 128, "FACTOR": factor},
                                     OPTIONS)
    results.put((factor, json.dumps(metadata, sort_keys=True), len(image)))


def test_a_missing_kernel_is_compiled_once_by_many_processes(cache_dir, monkeypatch):
    compiles = FORK.Value("i", 0)
    real = launcher.compile_and_store

    def counted(*args, **kwargs):
        with compiles.get_lock():
            compiles.value += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(launcher, "compile_and_store", counted)  # inherited by the forks
    factors = [2.0] * 6 + [3.0] * 2              # two kernels, wanted by 6 and 2 processes
    start, results = FORK.Barrier(len(factors)), FORK.Queue()
    processes = [FORK.Process(target=_build, args=(str(cache_dir), f, start, results))
                 for f in factors]
    for process in processes:
        process.start()
    built = [results.get(timeout=300) for _ in factors]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert compiles.value == 2                   # one compile per kernel, not one per process
    for factor in (2.0, 3.0):
        forms = {(meta, size) for f, meta, size in built if f == factor}
        assert len(forms) == 1                   # every process got the same kernel
        key = launcher.kernel_cache_key(scale_kernel, SPEC, {"BLOCK": 128, "FACTOR": factor},
                                        OPTIONS)
        assert KernelCache().get(key) is not None


def test_the_lock_gives_up_after_its_wait_instead_of_hanging(monkeypatch):
    monkeypatch.setattr(kernel_cache, "LOCK_WAIT_SECONDS", 0.1)
    cache = KernelCache()
    with cache.lock(SAME) as held:
        assert held
        began = time.monotonic()
        with cache.lock(SAME) as second:         # another open file: flock conflicts
            assert not second
        assert 0.1 <= time.monotonic() - began < 5
    with cache.lock(SAME) as again:              # released on leaving the block
        assert again


def _manager_write(index, rounds, start):
    start.wait()
    manager = get_cache_manager(SAME)
    for _ in range(rounds):
        manager.put(payload(f"m{index}")["kernel.cubin"], "blob.bin")


def _manager_read(rounds, start, torn):
    start.wait()
    manager = get_cache_manager(SAME)
    whole = {payload(f"m{i}")["kernel.cubin"] for i in range(PROCESSES)}
    for _ in range(rounds):
        path = manager.get_file("blob.bin")
        if path is not None:
            with open(path, "rb") as f:
                if f.read() not in whole:
                    torn.value += 1


def test_triton_file_cache_manager_files_are_always_whole(cache_dir):
    start, torn = FORK.Barrier(PROCESSES + 2), FORK.Value("i", 0)
    processes = [FORK.Process(target=_manager_write, args=(i, 15, start))
                 for i in range(PROCESSES)]
    processes += [FORK.Process(target=_manager_read, args=(300, start, torn)) for _ in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    assert torn.value == 0
