"""The kernel cache with real compiles (runtime/launcher.py build + store/kernel_cache.py):
several processes compiling one kernel into one directory at once, damaged metadata/PTX/cubin files
rebuilt, the exact arch in the key. (Entry-level cache tests: tests/python/runtime/.)"""
import json
import multiprocessing

import pytest
import tessera
import tessera.compiler
import tessera.language as tl
from tessera.compiler import CompileOptions
from tessera.config import knobs
from tessera.runtime import launcher
from tessera.runtime.kernel_cache import KernelCache


@tessera.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, FACTOR: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * FACTOR, mask=mask)


@tessera.jit
def other_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, FACTOR: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + FACTOR, mask=offs < n)


# (signature, divisible by 16, equal to 1, tensors of 2**31 elements or more)
SPEC = ({"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"x_ptr", "out_ptr"}, set(), set())
CONSTEXPRS = {"BLOCK": 256, "FACTOR": 3.0}
OPTIONS = CompileOptions(num_warps=4, num_stages=1, arch="sm_90a")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path):
    knobs.cache_dir = str(tmp_path)
    yield tmp_path
    knobs.reset()


def entry_files():
    key = launcher.kernel_cache_key(scale_kernel, SPEC, CONSTEXPRS, OPTIONS)
    return key, KernelCache().get(key)


def _compile_repeatedly(directory, rounds, failures):
    knobs.cache_dir = directory
    knobs.always_compile = True            # every round compiles and writes the entry anew
    try:
        for _ in range(rounds):
            launcher.build(scale_kernel, SPEC, CONSTEXPRS, OPTIONS)
    except Exception:                       # noqa: BLE001 - reported to the parent
        failures.value += 1


def _read_repeatedly(directory, rounds, expected, torn):
    knobs.cache_dir = directory
    key = launcher.kernel_cache_key(scale_kernel, SPEC, CONSTEXPRS, OPTIONS)
    for _ in range(rounds):
        files = KernelCache().get(key)
        if files is not None and files != expected:
            torn.value += 1


def test_processes_compiling_one_kernel_at_once_never_tear_it(cache_dir):
    launcher.build(scale_kernel, SPEC, CONSTEXPRS, OPTIONS)
    key, expected = entry_files()
    assert expected is not None
    context = multiprocessing.get_context("fork")
    failures, torn = context.Value("i", 0), context.Value("i", 0)
    writers = [context.Process(target=_compile_repeatedly, args=(str(cache_dir), 3, failures))
               for _ in range(4)]
    readers = [context.Process(target=_read_repeatedly,
                               args=(str(cache_dir), 300, expected, torn)) for _ in range(2)]
    for process in writers + readers:
        process.start()
    for process in writers + readers:
        process.join(timeout=300)
        assert process.exitcode == 0
    assert failures.value == 0 and torn.value == 0
    assert entry_files()[1] == expected
    shard = cache_dir / "kernels" / key[:2]
    # No staging or trash left; the compile's lock file stays (cache clear removes old ones).
    assert sorted(p.name for p in shard.iterdir()) == sorted([key, f".lock-{key}"])


@pytest.mark.parametrize("name", ["metadata.json", "kernel.ptx", "kernel.cubin"])
@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_file_is_rebuilt(monkeypatch, name, damage):
    launcher.build(scale_kernel, SPEC, CONSTEXPRS, OPTIONS)
    key, files = entry_files()
    if name not in files:
        pytest.skip(f"no {name} without ptxas")
    path = KernelCache().entry_path(key) / name
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x01
    else:
        del data[len(data) // 3:]
    path.write_bytes(bytes(data))
    compiles = []
    original = tessera.compiler.compile_kernel
    monkeypatch.setattr(tessera.compiler, "compile_kernel",
                        lambda *a, **k: compiles.append(1) or original(*a, **k))
    metadata, image = launcher.build(scale_kernel, SPEC, CONSTEXPRS, OPTIONS)
    assert compiles == [1]
    assert entry_files()[1] == files                        # the same, whole entry again
    assert metadata == json.loads(files["metadata.json"])
    launcher.build(scale_kernel, SPEC, CONSTEXPRS, OPTIONS)
    assert compiles == [1]                                  # and now a hit


def test_the_key_holds_the_exact_arch_and_everything_else(monkeypatch):
    base = launcher.kernel_cache_key(scale_kernel, SPEC, CONSTEXPRS, OPTIONS)
    assert base == launcher.kernel_cache_key(scale_kernel, SPEC, dict(CONSTEXPRS), OPTIONS)
    other_spec = ({**SPEC[0], "x_ptr": "*fp16"}, SPEC[1], SPEC[2], SPEC[3])
    variants = {
        "sm_90 vs sm_90a": launcher.kernel_cache_key(
            scale_kernel, SPEC, CONSTEXPRS, CompileOptions(4, 1, "sm_90")),
        "sm_80": launcher.kernel_cache_key(
            scale_kernel, SPEC, CONSTEXPRS, CompileOptions(4, 1, "sm_80")),
        "num_warps": launcher.kernel_cache_key(
            scale_kernel, SPEC, CONSTEXPRS, CompileOptions(8, 1, "sm_90a")),
        "num_stages": launcher.kernel_cache_key(
            scale_kernel, SPEC, CONSTEXPRS, CompileOptions(4, 2, "sm_90a")),
        "constexpr": launcher.kernel_cache_key(
            scale_kernel, SPEC, {"BLOCK": 256, "FACTOR": 3}, OPTIONS),   # int 3 is not 3.0
        "dtype": launcher.kernel_cache_key(scale_kernel, other_spec, CONSTEXPRS, OPTIONS),
        "divisibility": launcher.kernel_cache_key(
            scale_kernel, (SPEC[0], {"x_ptr"}, set(), set()), CONSTEXPRS, OPTIONS),
        "equal to 1": launcher.kernel_cache_key(
            scale_kernel, (SPEC[0], SPEC[1], {"n"}, set()), CONSTEXPRS, OPTIONS),
        "large tensor": launcher.kernel_cache_key(
            scale_kernel, (SPEC[0], SPEC[1], set(), {"x_ptr"}), CONSTEXPRS, OPTIONS),
        "source": launcher.kernel_cache_key(other_kernel, SPEC, CONSTEXPRS, OPTIONS),
    }
    monkeypatch.setattr(launcher, "compiler_build_id", lambda: "another build")
    variants["compiler build"] = launcher.kernel_cache_key(scale_kernel, SPEC, CONSTEXPRS,
                                                           OPTIONS)
    for what, key in variants.items():
        assert key != base, what
    assert len(set(variants.values())) == len(variants)
