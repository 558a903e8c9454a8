"""autotune's Triton options: Config(maxnreg=) reaches the compiler (a capped config compiles
to PTX with .maxnreg and ptxas keeps its registers under it), warmup/rep/use_cuda_graph choose
the benchmarker as Triton, do_bench= is used as given, and Autotuner.warmup compiles every
config without launching. Compiles through the real compiler on the CPU (ptxas when present)."""
import functools
import os
import sys
import warnings

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes import FakeBackend  # noqa: E402

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera import testing  # noqa: E402
from tessera.compiler import ptxas  # noqa: E402


@tessera.jit(interpret=True)
def axpy(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask) +
             tl.load(y_ptr + offs, mask=mask), mask=mask)


def test_config_maxnreg_reaches_the_compile_options_and_the_launch():
    configs = [tessera.Config({"BLOCK": 128}, num_warps=4, maxnreg=32),
               tessera.Config({"BLOCK": 256}, num_warps=4)]
    kernel = tessera.autotune(configs=configs, key=["n"], cache_results=False)(axpy)
    kernel.backend = FakeBackend(lambda c: 1.0 if c.maxnreg else 2.0)
    seen = []
    original = kernel.backend.compile

    def compile(jobs, on_done=None):
        seen.extend(job.options.maxnreg for job in jobs)
        return original(jobs, on_done)

    kernel.backend.compile = compile
    rng = np.random.default_rng()
    n = int(rng.integers(300, 900))
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    assert sorted(seen, key=str) == [32, None]
    assert kernel.best_config.maxnreg == 32
    np.testing.assert_allclose(out, 2.0 * x.astype(np.float64) + y, rtol=1e-6)
    assert configs[0].all_kwargs()["maxnreg"] == 32 and "maxnreg" not in configs[1].all_kwargs()
    assert configs[0] != tessera.Config({"BLOCK": 128}, num_warps=4)


@pytest.mark.skipif(ptxas.find_ptxas() is None, reason="ptxas not installed")
def test_autotuner_warmup_compiles_every_config_with_its_maxnreg():
    @tessera.autotune(configs=[tessera.Config({"BLOCK": 4096}, num_warps=4, maxnreg=40),
                               tessera.Config({"BLOCK": 4096}, num_warps=4)], key=["n"])
    @tessera.jit
    def heavy(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        a = tl.load(a_ptr + offs, mask=m)
        b = tl.load(b_ptr + offs, mask=m)
        c = tl.load(a_ptr + n + offs, mask=m)
        d = tl.load(b_ptr + n + offs, mask=m)
        tl.store(out_ptr + offs, a * b + c * d + a * d, mask=m)

    capped, free = heavy.warmup("*fp32", "*fp32", "*fp32", 4096, grid=(1,))
    assert ".maxnreg 40" in capped.asm["ptx"] and ".maxnreg" not in free.asm["ptx"]
    assert capped.n_regs <= 40 < free.n_regs


def test_warmup_rep_and_cuda_graph_choose_the_benchmarker():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        timed = tessera.autotune(configs=[tessera.Config({"BLOCK": 64})], key=["n"],
                                 warmup=5, rep=7)(axpy)
        graphed = tessera.autotune(configs=[tessera.Config({"BLOCK": 64})], key=["n"],
                                   use_cuda_graph=True, rep=9)(axpy)
    assert sum(issubclass(w.category, DeprecationWarning) for w in caught) == 2
    assert timed.do_bench.func is testing.do_bench
    assert timed.do_bench.keywords == {"warmup": 5, "rep": 7}
    assert graphed.do_bench.func is testing.do_bench_cudagraph
    assert graphed.do_bench.keywords == {"rep": 9}
    assert (timed.num_warmups, timed.num_reps, graphed.use_cuda_graph) == (5, 7, True)


def test_do_bench_is_used_as_given():
    calls = []

    def my_bench(fn, quantiles):
        calls.append(quantiles)
        fn()
        return [1.0, 0.5, 1.5]

    configs = [tessera.Config({"BLOCK": 64}), tessera.Config({"BLOCK": 128})]
    kernel = tessera.autotune(configs=configs, key=["n"], do_bench=my_bench,
                              cache_results=False)(axpy)
    assert kernel.do_bench is my_bench
    backend = FakeBackend(lambda c: 1.0)
    backend.bench = functools.partial(type(backend).__bases__[0].bench, backend)  # real bench
    kernel.backend = backend
    n = 200
    x = np.ones(n, np.float32)
    out = np.zeros(n, np.float32)
    kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, x, out, n)
    assert len(calls) == 2 and all(tuple(q) == (0.5, 0.2, 0.8) for q in calls)
    np.testing.assert_array_equal(out, np.full(n, 3.0, np.float32))


@pytest.mark.skipif(ptxas.find_ptxas() is None, reason="ptxas not installed")
def test_heuristics_warmup_fills_in_its_values():
    @tessera.heuristics({"BLOCK": lambda args: tessera.next_power_of_2(args["n"])})
    @tessera.jit
    def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    compiled = copy.warmup("*fp32", "*fp32", 100, grid=(1,))
    assert "<128x" in compiled.asm["tir"] and "<256x" not in compiled.asm["tir"]
    assert compiled.name == "copy"
