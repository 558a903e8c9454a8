"""The autotuner compiles its configs in parallel and says where its time went: warmup()
compiles every config at once in worker processes, with the same kernels as one after
another; a tuning reports the seconds spent compiling and timing, on its summary line and in
the record it stores."""
import json
import os
import warnings

import numpy as np
import pytest
import tessera
import tessera.language as tl
from fakes import FakeBackend
from tessera.autotuner import parallel
from tessera.compiler import ptxas
from tessera.config import knobs

needs_ptxas = pytest.mark.skipif(ptxas.find_ptxas() is None, reason="ptxas not installed")


@tessera.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr, SQUARE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if SQUARE:
        x = x * x
    tl.store(out_ptr + offs, x * alpha, mask=mask)


@tessera.jit
def broken_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.static_assert(BLOCK < 512, "BLOCK must be below 512")
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


CONFIGS = [tessera.Config({"BLOCK": b, "SQUARE": s}, num_warps=w)
           for b in (128, 256, 1024) for w in (2, 4) for s in (False, True)]


def autotuned(fn, configs=CONFIGS):
    return tessera.autotune(configs=configs, key=["n"])(fn)


def summary_of(compiled):
    return [(c.name, c.asm["ptx"], c.asm["cubin"], dict(c.metadata)) for c in compiled]


@needs_ptxas
def test_parallel_warmup_compiles_the_same_kernels_as_one_after_another(monkeypatch, tmp_path):
    if parallel.cpu_count() < 2:
        pytest.skip("one CPU")
    args = ("*fp32", "*fp32", 1000, 0.5)
    knobs.cache_dir = str(tmp_path / "parallel")
    kernel = autotuned(scale_kernel)
    in_parallel = kernel.warmup(*args)
    assert kernel.compile_workers >= 2 and kernel.compile_time > 0
    knobs.cache_dir = str(tmp_path / "serial")
    monkeypatch.setattr(parallel, "cpu_count", lambda: 1)
    serial = autotuned(scale_kernel)
    one_by_one = serial.warmup(*args)
    assert serial.compile_workers == 1
    assert len(in_parallel) == len(CONFIGS)
    assert summary_of(in_parallel) == summary_of(one_by_one)
    # In the configs' order: each kernel was compiled for its own config.
    for config, compiled in zip(CONFIGS, in_parallel):
        assert compiled.metadata["num_warps"] == config.num_warps
    assert len({c.asm["ptx"] for c in in_parallel}) == len(CONFIGS)
    # The workers stored their cubins: the jit kernel's warmup finds them on disk.
    knobs.cache_dir = str(tmp_path / "parallel")
    assert len(list((tmp_path / "parallel" / "kernels").rglob("kernel.cubin"))) == len(CONFIGS)


@needs_ptxas
def test_a_config_failing_in_a_worker_raises_its_own_error():
    if parallel.cpu_count() < 2:
        pytest.skip("one CPU")
    kernel = autotuned(broken_kernel, [tessera.Config({"BLOCK": b}) for b in (128, 1024)])
    with pytest.raises(Exception, match="BLOCK must be below 512"):
        kernel.warmup("*fp32", 100)


@tessera.jit(interpret=True)
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def test_a_tuning_reports_compile_and_benchmark_time(capsys, isolated_cache, monkeypatch):
    knobs.autotune_progress = True
    configs = [tessera.Config({"BLOCK": b}, num_warps=w) for b in (128, 256, 512) for w in (1, 4)]
    kernel = tessera.autotune(configs=configs, key=["n"])(add_kernel)
    kernel.backend = FakeBackend(lambda c: c.kwargs["BLOCK"] / 100 + c.num_warps)
    rng = np.random.default_rng(7)
    n = 777
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    np.testing.assert_array_equal(out, x + y)
    assert kernel.best_config == configs[0]  # BLOCK 128, 1 warp: the fake's fastest
    assert kernel.compile_time > 0 and kernel.benchmark_time > 0
    assert kernel.compile_time + kernel.benchmark_time <= kernel.bench_time
    expected_workers = min(len(configs), parallel.cpu_count())
    assert kernel.compile_workers == len(set(kernel.backend.workers)) <= expected_workers
    summary = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"compiling {kernel.compile_time:.2f}s on {kernel.compile_workers} process" in summary
    assert f"timing {kernel.benchmark_time:.2f}s" in summary
    (record_file,) = (isolated_cache / "tuning").rglob("tuning.json")
    record = json.loads(record_file.read_text())
    assert record["compile_seconds"] == pytest.approx(kernel.compile_time)
    assert record["benchmark_seconds"] == pytest.approx(kernel.benchmark_time)
    assert record["compile_workers"] == kernel.compile_workers
    assert record["compile_seconds"] + record["benchmark_seconds"] <= record["tuning_seconds"]
    # A stored result is used without tuning: nothing compiled or timed in this process, and
    # its best config is loaded from the kernel cache without the tile-IR estimate.
    from tessera.autotuner import resources

    def no_estimate(*args, **kwargs):
        raise AssertionError("a warm start ran the tile-IR estimate")

    monkeypatch.setattr(resources, "why_not_fit_before_compile", no_estimate)
    again = tessera.autotune(configs=configs, key=["n"])(add_kernel)
    again.backend = FakeBackend(lambda c: 0.0)
    with warnings.catch_warnings():  # "the stored best no longer compiles" would be an error
        warnings.simplefilter("error", RuntimeWarning)
        again[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    assert again.best_config == configs[0] and again.backend.benched == []
    assert again.compile_time == again.benchmark_time == 0.0
    assert os.getpid() not in kernel.backend.workers or kernel.compile_workers == 1
