"""Autotuning on the GPU: an 8-config vector add tuned correctly (fastest measured config,
every config correct, result persisted for a fresh process), CUDA-graph capture and replay of
Tessera kernels, do_bench sanity, and parallel tuning at least 3x faster in wall time than
compiling the same configs one after another.

Skipped (visibly) without a GPU. ``python tests/gpu/test_autotune.py`` prints the timings.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() and __name__ != "__main__":
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.compiler import CompileOptions, compile_kernel  # noqa: E402
from tessera.config import knobs  # noqa: E402
from tessera.runtime import launcher  # noqa: E402
from tessera.testing import do_bench  # noqa: E402
from tessera.testing.environment import child_env  # noqa: E402


# 8 configs; BLOCK 128..4096, num_warps 1..8.
EIGHT = [tessera.Config({"BLOCK": b}, num_warps=w, num_stages=1)
         for b, w in [(128, 1), (256, 2), (512, 4), (1024, 4), (1024, 8), (2048, 8),
                      (4096, 4), (4096, 8)]]


@tessera.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@tessera.jit
def mix_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    # Slow to compile on purpose: STEPS unrolled steps of an area-preserving recurrence (a
    # symplectic Euler rotation: the values stay of order 1, so the result can be checked).
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    for _ in tl.static_range(STEPS):
        x = x + y * 0.25
        y = y - x * 0.25
    tl.store(out_ptr + offs, x + y, mask=mask)


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path):
    knobs.cache_dir = str(tmp_path / "cache")
    yield tmp_path
    knobs.reset()


def grid(n):
    return lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)


def inputs(n, dtype=torch.float32, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(n, device="cuda", generator=gen).to(dtype)
    y = torch.randn(n, device="cuda", generator=gen).to(dtype)
    return x, y, torch.full((n,), float("nan"), device="cuda", dtype=dtype)


def test_eight_configs_tuned_correctly():
    kernel = tessera.autotune(configs=EIGHT, key=["n"])(add_kernel)
    n = (1 << 22) + 17
    x, y, out = inputs(n)
    kernel[grid(n)](x, y, out, n)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    assert kernel.failed_configs == []
    assert set(kernel.configs_timings) == set(EIGHT)
    assert all(t > 0 for t in kernel.configs_timings.values())
    assert kernel.best_config == min(kernel.configs_timings, key=kernel.configs_timings.get)
    for config in EIGHT:                            # every candidate computes the right thing
        out.fill_(float("nan"))
        add_kernel[grid(n)](x, y, out, n, **config.all_kwargs())
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    tuned_for = dict(kernel.cache)
    kernel[grid(n)](x, y, out, n)                   # same key: no tuning
    assert kernel.cache == tuned_for
    h = inputs(n, torch.float16, seed=1)
    kernel[grid(n)](*h, n)                          # same n, new dtype: tuned for it
    torch.testing.assert_close(h[2], h[0] + h[1], rtol=0, atol=0)
    assert len(kernel.cache) == 2


CHILD = """
import sys, torch, tessera, tessera.language as tl
from tessera.autotuner import TuningBackend

class Counting(TuningBackend):
    compiled = 0
    benched = set()  # the configs timed (close finalists are timed again in rounds)
    def compile(self, jobs, on_done=None):
        Counting.compiled += len(jobs)
        return super().compile(jobs, on_done)
    def bench(self, call, config, do_bench):
        Counting.benched.add(str(config))
        return super().bench(call, config, do_bench)

@tessera.autotune(configs=[tessera.Config({"BLOCK": b}, num_warps=w, num_stages=1)
                           for b, w in [(128, 1), (256, 2), (512, 4), (1024, 4), (1024, 8),
                                        (2048, 8), (4096, 4), (4096, 8)]], key=["n"])
@tessera.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, total, mask=mask)

add_kernel.backend = Counting()
n = 1 << 20
x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda")
out = torch.full_like(x, float("nan"))
add_kernel[lambda m: (tessera.cdiv(n, m["BLOCK"]),)](x, y, out, n)
assert torch.equal(out, x + y)
print("best", add_kernel.best_config)
print("benched", len(Counting.benched), "compiled", Counting.compiled)
"""


def test_a_fresh_process_reuses_the_tuning(tmp_path):
    script = tmp_path / "child_autotune.py"
    script.write_text(textwrap.dedent(CHILD))
    env = child_env(TESSERA_CACHE_DIR=str(tmp_path / "child-cache"))

    def run():
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    first = run()
    assert first[1] == "benched 8 compiled 8"
    second = run()
    assert second == [first[0], "benched 0 compiled 0"]


@pytest.mark.parametrize("autotuned", [False, True])
def test_cuda_graph_capture_and_replay(autotuned):
    kernel = tessera.autotune(configs=EIGHT[:4], key=["n"])(add_kernel) if autotuned \
        else add_kernel
    n = 100_003
    x, y, out = inputs(n, seed=2)
    launch = (lambda: kernel[grid(n)](x, y, out, n)) if autotuned \
        else (lambda: kernel[grid(n)](x, y, out, n, BLOCK=1024))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):                 # warm up (and tune) outside the capture
        launch()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    for seed in (3, 4, 5):
        new_x, new_y, _ = inputs(n, seed=seed)
        x.copy_(new_x)
        y.copy_(new_y)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, new_x + new_y, rtol=0, atol=0)


def test_do_bench_statistics():
    def sleep():
        torch.cuda._sleep(1_000_000)              # ~0.5 ms at 2 GHz
    low, median, high = do_bench(sleep, warmup=5, rep=20, quantiles=[0.0, 0.5, 1.0])
    assert 0.05 < low <= median <= high < 20
    assert do_bench(sleep, rep=10, return_mode="min") == pytest.approx(low, rel=0.5)
    assert len(do_bench(sleep, rep=10, return_mode="all")) >= 1
    assert do_bench(lambda: None, rep=5, return_mode="median") < 0.05


MIX_SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
# Compile time grows with the elements per thread (BLOCK / (32 num_warps)): mostly 8 each, so
# that no single config dominates the parallel wall time (ptxas takes most of it).
MIX_STEPS = 1024
MIX_CONFIGS = [tessera.Config({"BLOCK": b, "STEPS": MIX_STEPS}, num_warps=w, num_stages=1)
               for b, w in [(256, 1), (512, 2), (1024, 4), (2048, 8), (4096, 16), (8192, 32),
                            (128, 1), (512, 4)]]


def sequential_compile_seconds(arch: str) -> float:
    start = time.perf_counter()
    for config in MIX_CONFIGS:
        compile_kernel(mix_kernel.fn, MIX_SIGNATURE, dict(config.kwargs),
                       {"x_ptr", "y_ptr", "out_ptr", "n"}, set(),   # as the tuned launch
                       CompileOptions(num_warps=config.num_warps, num_stages=1, arch=arch))
    return time.perf_counter() - start


def parallel_tuning_seconds(n: int = 1 << 20):
    knobs.always_compile = True                     # compile for real, not from the disk cache
    knobs.autotune = "force"
    kernel = tessera.autotune(configs=MIX_CONFIGS, key=["n"])(mix_kernel)
    x, y, out = inputs(n, seed=6)
    torch.cuda.synchronize()
    start = time.perf_counter()
    kernel[grid(n)](x, y, out, n)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    ref_x, ref_y = x.double(), y.double()
    for _ in range(MIX_STEPS):
        ref_x = ref_x + ref_y * 0.25
        ref_y = ref_y - ref_x * 0.25
    # fp32 rounding over 1024 steps drifts the phase by ~1e-4: far below any logic error.
    torch.testing.assert_close(out.double(), ref_x + ref_y, rtol=1e-3, atol=1e-3)
    assert kernel.failed_configs == []
    return seconds, kernel


def test_parallel_tuning_tunes_every_config_right():
    # Speed lives in benchmarks (this file's __main__ prints the ratio); the test checks that
    # compiling in forked workers, loading and timing every config gives a right kernel.
    arch = launcher.arch_of(0)
    compile_kernel(mix_kernel.fn, MIX_SIGNATURE, {"BLOCK": 128, "STEPS": 8}, set(), set(),
                   CompileOptions(num_warps=1, num_stages=1, arch=arch))    # warm imports
    sequential = sequential_compile_seconds(arch)
    parallel, kernel = parallel_tuning_seconds()
    print(f"\n8 configs: compiled one after another {sequential:.2f} s; tuned in parallel "
          f"(compile + load + time + launch) {parallel:.2f} s: {sequential / parallel:.1f}x "
          f"faster on {os.cpu_count()} CPUs; best {kernel.best_config}")
    assert set(kernel.configs_timings) == set(MIX_CONFIGS)
    assert kernel.best_config == min(kernel.configs_timings, key=kernel.configs_timings.get)


@tessera.jit
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(out_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, total, mask=mask)


def test_the_gpu_warmed_under_the_compiles_before_the_pass():
    """autotuner/warming.py on the GPU: warm launches (during the compiles, and whatever is
    left before the pass) all come before the first timed launch; a kernel that updates its
    argument (restore_value) still adds exactly once for the caller. Not timing-based."""
    from tessera.autotuner import TuningBackend
    events = []

    class Recording(TuningBackend):
        def warm_up(self, call, config, do_bench):
            events.append("warm")
            return super().warm_up(call, config, do_bench)

        def bench(self, call, config, do_bench):
            events.append("bench")
            return super().bench(call, config, do_bench)

    kernel = tessera.autotune(configs=EIGHT, key=["n"], cache_results=False,
                              restore_value=["out_ptr"])(accumulate_kernel)
    kernel.backend = Recording()
    n = (1 << 20) + 3
    x, out, _ = inputs(n, seed=3)
    expected = out + x
    kernel[grid(n)](x, out, n)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    first_bench = events.index("bench")
    assert first_bench >= 1 and "warm" not in events[first_bench:]
    print(f"\n{first_bench} warm-up launch(es) before the pass, compile "
          f"{kernel.compile_time:.2f} s, timing {kernel.benchmark_time:.2f} s")


if __name__ == "__main__":
    import tempfile
    knobs.cache_dir = tempfile.mkdtemp(prefix="tessera-autotune-")
    arch = launcher.arch_of(0)
    sequential = sequential_compile_seconds(arch)
    parallel, kernel = parallel_tuning_seconds()
    print(f"sequential compile of 8 configs: {sequential:.2f} s")
    print(f"parallel tuning of 8 configs:    {parallel:.2f} s ({sequential / parallel:.1f}x)")
    for config, ms in sorted(kernel.configs_timings.items(), key=lambda item: item[1]):
        print(f"  {ms:8.4f} ms  {config}")
