"""``ptxas --version`` (part of every cache key) is asked once per ptxas executable: the answer
is kept in the disk cache, keyed by the executable's path, size and modification time, so a
fresh process does not start a subprocess; a replaced ptxas is asked again."""
import os
import stat

import pytest
from tessera.compiler import ptxas
from tessera.config import knobs


def fake_ptxas(path, release: str) -> str:
    path.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def asked(monkeypatch, tmp_path):
    knobs.cache_dir = str(tmp_path / "cache")
    calls = []
    real = ptxas._ask_version

    def counting(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(ptxas, "_ask_version", counting)
    ptxas.version.cache_clear()
    yield calls
    ptxas.version.cache_clear()
    knobs.reset()


def test_the_release_is_asked_once_then_read_from_disk(asked, tmp_path):
    path = fake_ptxas(tmp_path / "ptxas", "12.8")
    assert ptxas.version(path) == "12.8"
    ptxas.version.cache_clear()  # as a fresh process
    assert ptxas.version(path) == "12.8"
    assert asked == [path]


def test_a_replaced_ptxas_is_asked_again(asked, tmp_path):
    path = fake_ptxas(tmp_path / "ptxas", "12.8")
    assert ptxas.version(path) == "12.8"
    fake_ptxas(tmp_path / "ptxas", "13.10")  # another size
    os.utime(path, ns=(1, 1))                # and another modification time
    ptxas.version.cache_clear()
    assert ptxas.version(path) == "13.10"
    assert asked == [path, path]


def test_without_a_cache_the_release_is_still_right(asked, tmp_path):
    path = fake_ptxas(tmp_path / "ptxas", "12.4")
    knobs.always_compile = True  # every cache read a miss
    assert ptxas.version(path) == "12.4"
    ptxas.version.cache_clear()
    assert ptxas.version(path) == "12.4"
    assert len(asked) == 2
