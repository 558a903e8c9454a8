"""The cache is an optimisation: a cache directory that cannot be written (a file in its place,
a file where an entry belongs, removal refused) never fails a compile, and `cache clear` says
what it could not remove instead of claiming success."""
import errno
import io
import os
import warnings

import pytest
import tessera
import tessera.language as tl
from tessera import cache as cli
from tessera.compiler import CompileOptions
from tessera.config import knobs
from tessera.runtime import kernel_cache as cache_module
from tessera.runtime import launcher
from tessera.runtime.kernel_cache import KernelCache


@tessera.jit
def triple_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3, mask=offs < n)


SPEC = ({"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"x_ptr", "out_ptr"}, set(), set())
OPTIONS = CompileOptions(num_warps=4, num_stages=1, arch="sm_90a")


@pytest.fixture(autouse=True)
def fresh_warnings():
    cache_module._warned_directories.clear()
    yield
    knobs.reset()


def test_cache_dir_that_is_a_file_compiles_anyway_and_warns_once(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    knobs.cache_dir = str(blocker)
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        metadata, image = launcher.build(triple_kernel, SPEC, {"BLOCK": 128}, OPTIONS)
    assert metadata["name"] == "triple_kernel" and image
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second miss compiles silently
        launcher.build(triple_kernel, SPEC, {"BLOCK": 256}, OPTIONS)


def test_a_file_where_an_entry_belongs_is_replaced(tmp_path):
    cache = KernelCache(str(tmp_path))
    key = "ab" * 32
    entry = cache.entry_path(key)
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"garbage")
    assert cache.get(key) is None
    assert cache.put(key, {"kernel.ptx": b"ptx"}) == entry
    assert cache.get(key) == {"kernel.ptx": b"ptx"}


def test_clear_reports_entries_it_cannot_remove(tmp_path, monkeypatch):
    cache = KernelCache(str(tmp_path))
    cache.put("cd" * 32, {"kernel.ptx": b"ptx"})
    real_rename = os.rename

    def refuse(src, dst):  # what a read-only directory answers (root ignores chmod)
        if ".trash-" in str(dst):
            raise PermissionError(errno.EACCES, "Permission denied", str(src))
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", refuse)
    out = io.StringIO()
    assert cli.main(["clear", "--dir", str(tmp_path)], out=out) == 1
    assert "removed 0 entries" in out.getvalue()
    assert "could not remove 1" in out.getvalue() and "Permission denied" in out.getvalue()
    monkeypatch.setattr(os, "rename", real_rename)
    assert cache.get("cd" * 32) is not None  # still there, as reported
    out = io.StringIO()
    assert cli.main(["clear", "--dir", str(tmp_path)], out=out) == 0
    assert "removed 1 entries" in out.getvalue() and cache.get("cd" * 32) is None
