"""Tuning results on disk (autotuner/results.py): reused by a new kernel object and by a fresh
process without tuning, ignored under TESSERA_AUTOTUNE=force, re-tuned when the stored file is
damaged; and what the tuning key contains."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tessera
import tessera.language as tl
from fakes import FakeBackend
from tessera.autotuner import Target, results
from tessera.config import knobs
from tessera.runtime.kernel_cache import KernelCache
from tessera.testing.environment import child_env

HERE = os.path.dirname(os.path.abspath(__file__))


@tessera.jit(interpret=True)
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


CONFIGS = [tessera.Config({"BLOCK": b}, num_warps=w) for b in (128, 256, 512) for w in (1, 4)]
TIMES = {(128, 1): 3.0, (128, 4): 2.5, (256, 1): 2.0, (256, 4): 0.5, (512, 1): 1.5,
         (512, 4): 1.0}


def fresh_kernel(configs=CONFIGS):
    kernel = tessera.autotune(configs=configs, key=["n"])(add_kernel)
    kernel.backend = FakeBackend(lambda c: TIMES[c.kwargs["BLOCK"], c.num_warps])
    return kernel


def launch(kernel, n=1000):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    np.testing.assert_array_equal(out, x + y)


def tuning_files(cache_dir):
    return sorted((cache_dir / "tuning").rglob("tuning.json"))


def test_a_new_kernel_object_reuses_the_stored_result(isolated_cache):
    first = fresh_kernel()
    launch(first)
    assert first.best_config == tessera.Config({"BLOCK": 256}, num_warps=4)
    assert len(tuning_files(isolated_cache)) == 1
    second = fresh_kernel()
    launch(second)
    assert second.backend.compiled == [] and second.backend.benched == []
    assert second.best_config == first.best_config
    assert second.configs_timings == first.configs_timings


def test_force_tunes_again_and_off_uses_the_stored_result(isolated_cache):
    launch(fresh_kernel())
    knobs.autotune = "force"
    forced = fresh_kernel()
    launch(forced)
    assert len(forced.backend.benched) == len(CONFIGS)
    knobs.autotune = "off"
    off = fresh_kernel()
    launch(off)
    assert off.backend.benched == [] and off.best_config.kwargs["BLOCK"] == 256


@pytest.mark.parametrize("damage", ["flip", "truncate", "not-a-record"])
def test_a_damaged_tuning_file_is_detected_and_tuned_again(isolated_cache, damage):
    launch(fresh_kernel())
    path, = tuning_files(isolated_cache)
    data = path.read_bytes()
    if damage == "flip":
        path.write_bytes(data.replace(b'"BLOCK": 256', b'"BLOCK": 128', 1))
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:   # checksums hold, content is not a record
        KernelCache(namespace="tuning").put(path.parent.name, {"tuning.json": b"[1, 2]"},
                                            replace=True)
    again = fresh_kernel()
    launch(again)
    assert len(again.backend.benched) == len(CONFIGS)
    assert again.best_config.kwargs["BLOCK"] == 256
    record = results.load(path.parent.name)          # rewritten whole
    assert record is not None and record["best"]["kwargs"] == {"BLOCK": 256}


def test_a_changed_config_list_is_tuned_again(isolated_cache):
    launch(fresh_kernel())
    changed = fresh_kernel(CONFIGS[:4])
    launch(changed)
    assert len(changed.backend.benched) == 4
    assert len(tuning_files(isolated_cache)) == 2


CHILD = """
import sys
import numpy as np
import tessera
import tessera.language as tl
from fakes import FakeBackend

@tessera.autotune(configs=[tessera.Config({"BLOCK": b}, num_warps=w)
                           for b in (128, 256, 512) for w in (1, 4)], key=["n"])
@tessera.jit(interpret=True)
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)

add_kernel.backend = FakeBackend(lambda c: abs(c.kwargs["BLOCK"] - 512) + c.num_warps)
n = 2000
x = np.arange(n, dtype=np.float32)
out = np.zeros(n, dtype=np.float32)
add_kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, x, out, n)
assert np.array_equal(out, 2 * x)
print("best", add_kernel.best_config)
print("benched", len(add_kernel.backend.benched), "compiled", len(add_kernel.backend.compiled))
"""


def run_child(tmp_path, **env):
    script = tmp_path / "child_kernel.py"            # a file: kernels need readable source
    script.write_text(textwrap.dedent(CHILD))
    environment = child_env([HERE], TESSERA_CACHE_DIR=str(tmp_path / "child-cache"), **env)
    done = subprocess.run([sys.executable, str(script)], env=environment, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_fresh_process_picks_the_best_config_without_tuning(tmp_path):
    best = "best BLOCK: 512, num_warps: 1, num_stages: 3"
    first = run_child(tmp_path)
    assert best in first and "benched 6 compiled 6" in first
    second = run_child(tmp_path)
    assert best in second and "benched 0 compiled 0" in second
    for path in (tmp_path / "child-cache" / "tuning").rglob("tuning.json"):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x20
        path.write_bytes(bytes(data))
    third = run_child(tmp_path)                       # damaged: detected, tuned again
    assert best in third and "benched 6" in third
    forced = run_child(tmp_path, TESSERA_AUTOTUNE="force")
    assert best in forced and "benched 6" in forced


# ------------------------------------------------------------------------ the key's contents

TARGET = Target(0, "NVIDIA H100 80GB HBM3", "sm_90a", None)


def material(**changes):
    base = dict(key_values=[4096, 1.5], dtypes=["float16", None, "float32"], target=TARGET,
                configs=CONFIGS)
    base.update(changes)
    return results.key_material(add_kernel, base["key_values"], base["dtypes"],
                                base["target"], base["configs"])


def test_key_material_holds_every_input_of_the_choice():
    from tessera.runtime import launcher
    m = material()
    assert m["kernel"] == "add_kernel"
    assert m["key_values"] == [4096, {"float": (1.5).hex()}]
    assert m["dtypes"] == ["float16", None, "float32"]
    assert (m["device"], m["arch"]) == ("NVIDIA H100 80GB HBM3", "sm_90a")
    assert m["compiler"] == launcher.compiler_build_id()
    assert m["ptxas"]
    assert m["configs"] == [c.to_json() for c in CONFIGS]


def test_tuning_key_changes_with_each_input():
    source = add_kernel.source_key()
    base = results.tuning_key(material(), source)
    assert base == results.tuning_key(material(), source)
    variants = {
        "key value": results.tuning_key(material(key_values=[8192, 1.5]), source),
        "dtype": results.tuning_key(material(dtypes=["bfloat16", None, "float32"]), source),
        "device": results.tuning_key(material(target=Target(0, "NVIDIA H200", "sm_90a", None)),
                                     source),
        "arch": results.tuning_key(material(target=Target(0, TARGET.name, "sm_90", None)),
                                   source),
        "configs": results.tuning_key(material(configs=CONFIGS[:-1]), source),
        "source": results.tuning_key(material(), source + "\n# edited"),
    }
    for what in ("compiler", "ptxas"):
        changed = dict(material())
        changed[what] = "something else"
        variants[what] = results.tuning_key(changed, source)
    for what, key in variants.items():
        assert key != base, what
    assert len(set(variants.values())) == len(variants)


def test_key_values_without_a_stable_form_are_not_persisted():
    class Shaped:
        shape, dtype = (4, 8), "float16"
    assert results.canonical_value(Shaped()) == {"shape": [4, 8], "dtype": "float16"}
    assert results.canonical_value(np.int64(7)) == 7
    assert results.canonical_value((1, "a", None)) == [1, "a", None]
    with pytest.raises(results.NotPersistable):
        results.canonical_value(object())
    odd = [tessera.Config({"BLOCK": 128, "SHAPE": (1, 2)})]   # a tuple comes back as a list
    with pytest.raises(results.NotPersistable):
        results.key_material(add_kernel, [1], [None], TARGET, odd)
