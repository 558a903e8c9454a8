"""The source index (frontend/source_index.py): a fresh process whose kernels were seen before
computes the same source key (and an autotuned kernel's tuning key, heuristics included)
without tokenizing or parsing anything, also when the file was written again with the same
text (tests/gpu/test_warm_start.py writes its script before each run); an edited file is read
anew; an index that no longer matches its file is not trusted."""
import json
import os
import subprocess
import sys
import textwrap

from tessera.testing.environment import child_env

KERNELS = '''
import tessera
import tessera.language as tl

SCALE = tl.constexpr({scale})


@tessera.jit
def helper(x):
    return x * SCALE


@tessera.jit
def kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, helper(tl.load(x_ptr + offs, mask=offs < n)),
             mask=offs < n)
    # a comment after the last statement


tuned = tessera.autotune(configs=[tessera.Config({{"BLOCK": 16}})], key=["n"])(
    tessera.heuristics({{"EVEN": lambda args: args["n"] % 2 == 0,
                        "BIG": lambda args: (args["n"]
                                             > 4096)}})(kernel))
'''

CHILD = textwrap.dedent('''
    import ast, inspect, json, sys
    sys.path.insert(0, sys.argv[1])
    import kernels
    from tessera.frontend import kernel_source_key
    if sys.argv[2] == "forbid":  # the index must answer: no tokenizing, no parsing
        def refuse(*args, **kwargs):
            raise AssertionError("the source index should have answered")
        inspect.getsourcelines = ast.parse = refuse
    print(json.dumps([kernel_source_key(kernels.kernel), kernels.tuned._source()]))
''')


def key_in_child(tmp_path, mode: str, **env) -> str:
    return keys_in_child(tmp_path, mode, **env)[0]


def keys_in_child(tmp_path, mode: str, **env):
    """(the kernel's source key, the autotuned kernel's source with its heuristics)."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "src"), mode],
                          env=child_env(TESSERA_CACHE_DIR=str(tmp_path / "cache"), **env),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def write_kernels(tmp_path, scale: float, extra: str = "") -> None:
    (tmp_path / "src").mkdir(exist_ok=True)
    path = tmp_path / "src" / "kernels.py"
    path.write_text(KERNELS.format(scale=scale) + extra)


def test_a_fresh_process_reads_its_sources_from_the_index(tmp_path):
    write_kernels(tmp_path, 2.0)
    first = key_in_child(tmp_path, "normal")
    assert "def helper(x):" in first and "def kernel(" in first and "SCALE = 2.0" in first
    assert (tmp_path / "cache" / "sources").is_dir()
    assert key_in_child(tmp_path, "forbid") == first
    # Without the index (always_compile makes every cache read a miss) the key is the same.
    assert key_in_child(tmp_path, "normal", TESSERA_ALWAYS_COMPILE="1") == first


def test_an_edited_file_is_read_again(tmp_path):
    write_kernels(tmp_path, 2.0)
    before = key_in_child(tmp_path, "normal")
    write_kernels(tmp_path, 3.0, extra="\n\n@tessera.jit\ndef unused(x):\n    return x\n")
    after = key_in_child(tmp_path, "normal")
    assert after != before and "SCALE = 3.0" in after
    assert key_in_child(tmp_path, "forbid") == after


def test_an_entry_that_does_not_fit_its_file_is_not_trusted(tmp_path):
    write_kernels(tmp_path, 2.0)
    expected = key_in_child(tmp_path, "normal")
    # Damage the lengths the index holds (its checksums kept valid: a stale, not a torn,
    # entry); the block check refuses them and the sources are read again.
    from tessera.runtime.kernel_cache import KernelCache
    (entry,) = (tmp_path / "cache" / "sources").rglob("index.json")
    key = entry.parent.name
    functions = json.loads(entry.read_text())
    for value in functions.values():
        value["lines"] += 1
    KernelCache(str(tmp_path / "cache"), namespace="sources").put(
        key, {"index.json": json.dumps(functions).encode()})
    assert key_in_child(tmp_path, "normal") == expected
    assert os.path.exists(entry.parent)


def test_a_file_written_again_with_the_same_text_keeps_its_index(tmp_path):
    write_kernels(tmp_path, 2.0)
    first = keys_in_child(tmp_path, "normal")
    path = tmp_path / "src" / "kernels.py"
    stat = path.stat()
    write_kernels(tmp_path, 2.0)  # the same text, written again: a new modification time
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert keys_in_child(tmp_path, "forbid") == first


def test_heuristics_come_from_the_index_too(tmp_path):
    write_kernels(tmp_path, 2.0)
    _, tuned = keys_in_child(tmp_path, "normal")
    # The rules' text, as inspect gives a lambda: the rest of its statement.
    assert '# heuristic EVEN\n    tessera.heuristics({"EVEN": lambda' in tuned
    assert '# heuristic BIG\n                        "BIG": lambda args: (args["n"]\n' in tuned
    assert "> 4096)})(kernel))" in tuned
    assert keys_in_child(tmp_path, "forbid")[1] == tuned
