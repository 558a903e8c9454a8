"""The cache directory knob: TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera (absolute paths
only, as the XDG base directory spec says), else ~/.cache/tessera; read on every access."""
import os

from tessera.config import knobs
from tessera.runtime.kernel_cache import KernelCache


def test_xdg_cache_home_is_honoured(monkeypatch, tmp_path):
    monkeypatch.delenv("TESSERA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert knobs.cache_dir == str(tmp_path / "xdg" / "tessera")
    # Read again on each access: a change after the first read takes effect.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "other"))
    assert knobs.cache_dir == str(tmp_path / "other" / "tessera")


def test_tessera_cache_dir_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "mine"))
    assert knobs.cache_dir == str(tmp_path / "mine")


def test_home_cache_without_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("TESSERA_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for value in (None, "", "relative/cache"):  # unset, empty and relative are ignored
        if value is None:
            monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_CACHE_HOME", value)
        assert knobs.cache_dir == os.path.join(str(tmp_path / "home"), ".cache", "tessera")


def test_the_kernel_cache_writes_under_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("TESSERA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = KernelCache()
    key = "ab" * 16
    cache.put(key, {"kernel.ptx": b"// ptx"})
    assert cache.get(key) == {"kernel.ptx": b"// ptx"}
    assert any((tmp_path / "tessera").rglob("kernel.ptx"))
