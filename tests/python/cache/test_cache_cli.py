"""``python -m tessera.cache`` (python/tessera/cache.py): list, size and clear, per kind."""
import io
import json
import os
import subprocess
import sys
import time

import pytest
from tessera import cache as cli
from tessera.runtime.kernel_cache import KernelCache
from tessera.testing.environment import child_env

KERNEL_KEY = "aa" + "1" * 62
DAMAGED_KEY = "ab" + "2" * 62
TUNING_KEY = "cd" + "3" * 62


@pytest.fixture
def directory(tmp_path):
    kernels = KernelCache(str(tmp_path), "kernels")
    meta = {"name": "add_kernel", "arch": "sm_90a", "num_warps": 4, "registers": 32}
    kernels.put(KERNEL_KEY, {"metadata.json": json.dumps(meta).encode(),
                             "kernel.cubin": b"\x7fELF" + bytes(2000)})
    path = kernels.put(DAMAGED_KEY, {"metadata.json": json.dumps(meta).encode(),
                                     "kernel.cubin": bytes(500)})
    (path / "kernel.cubin").write_bytes(bytes(499))
    record = {"format": 1, "best": {"kwargs": {"BLOCK": 512}, "num_warps": 4, "num_stages": 3},
              "key": {"kernel": "add_kernel", "device": "NVIDIA H100", "arch": "sm_90a",
                      "key_values": [4096]}}
    KernelCache(str(tmp_path), "tuning").put(TUNING_KEY,
                                             {"tuning.json": json.dumps(record).encode()})
    shard = tmp_path / "kernels" / "aa"
    for name in (".tmp-old", ".tmp-new", ".trash-x"):
        (shard / name).mkdir()
        (shard / name / "kernel.cubin").write_bytes(b"partial")
    old = time.time() - 2 * 3600
    os.utime(shard / ".tmp-old", (old, old))
    return tmp_path


def run(*argv):
    out = io.StringIO()
    assert cli.main(list(argv), out=out) == 0
    return out.getvalue()


def test_list(directory):
    text = run("list", "--dir", str(directory))
    lines = {line.split()[1]: line for line in text.splitlines()[:-1]}
    assert "add_kernel sm_90a num_warps=4 registers=32" in lines[KERNEL_KEY[:16]]
    assert " ok " in lines[KERNEL_KEY[:16]]
    assert "DAMAGED" in lines[DAMAGED_KEY[:16]]
    tuning = lines[TUNING_KEY[:16]]
    assert tuning.startswith("tuning") and "add_kernel on NVIDIA H100 sm_90a key=[4096]" in tuning
    assert "BLOCK=512, num_warps=4, num_stages=3" in tuning
    assert text.splitlines()[-1] == f"3 entries in {directory}"
    only = run("list", "--kind", "tuning", "--dir", str(directory))
    assert only.splitlines()[-1].startswith("1 entries")


def test_size(directory):
    text = run("size", "--dir", str(directory))
    kernels = next(line for line in text.splitlines() if line.startswith("kernels"))
    assert "2 entries" in kernels and "(1 damaged)" in kernels
    assert "debris        3 staging/trash directories" in text
    assert text.splitlines()[-1].startswith("total")


def test_clear_by_kind_then_all(directory):
    assert run("clear", "--kind", "tuning", "--dir", str(directory)).startswith("removed 1 ")
    assert KernelCache(str(directory), "tuning").get(TUNING_KEY) is None
    assert KernelCache(str(directory), "kernels").get(KERNEL_KEY) is not None
    text = run("clear", "--dir", str(directory))
    assert text.strip() == "removed 2 entries and 2 leftover directories"
    shard = directory / "kernels" / "aa"
    # A young staging directory may belong to a live writer: it stays.
    assert sorted(p.name for p in shard.iterdir()) == [".tmp-new"]
    assert run("list", "--dir", str(directory)).splitlines()[-1].startswith("0 entries")


def test_module_entry_point(directory):
    env = child_env(TESSERA_CACHE_DIR=str(directory))
    done = subprocess.run([sys.executable, "-m", "tessera.cache", "size"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "2 entries" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "tessera.cache", "shrink"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
