"""The autotuner's choices with a fake device and timer (fakes.py) and the real compiler: the
fastest config wins, user pruning and the resource model, failed configs skipped with their
reason, reset_to_zero/restore_value and hooks, knobs, heuristics, the in-memory tuning key."""
import os

import numpy as np
import pytest
import tessera
import tessera.language as tl
from fakes import FAKE_H100, FakeBackend
from tessera.autotuner import parallel, tuner
from tessera.compiler import ptxas
from tessera.config import knobs


@tessera.jit(interpret=True)
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 2048, "BLOCK too large")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@tessera.jit(interpret=True)
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(out_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, total, mask=mask)


@tessera.jit(interpret=True)
def double_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


@tessera.jit(interpret=True)
def row_sum_kernel(x_ptr, out_ptr, n, rows, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], tl.float32)
    for r in range(rows):
        acc += tl.load(x_ptr + r * n + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, acc, mask=mask)


def grid(n):
    return lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)


def configs_of(blocks, warps):
    return [tessera.Config({"BLOCK": b}, num_warps=w) for b in blocks for w in warps]


def by_block_and_warps(table):
    return lambda config: table[config.kwargs["BLOCK"], config.num_warps]


def tuned(jit_fn, configs, times, key=("n",), properties=FAKE_H100, **options):
    kernel = tessera.autotune(configs=configs, key=list(key), **options)(jit_fn)
    kernel.backend = FakeBackend(times, properties)
    return kernel


def vectors(n, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    return x, y, np.full(n, np.nan, dtype=dtype)


# Fake times with one clear minimum at BLOCK=512, num_warps=4.
TABLE = {(b, w): 1.0 + abs(b - 512) / 256 + abs(w - 4) / 2
         for b in (128, 256, 512, 1024) for w in (1, 2, 4, 8)}


def test_fastest_config_wins_and_each_key_is_tuned_once():
    configs = configs_of((128, 256, 512, 1024), (1, 4))
    kernel = tuned(add_kernel, configs, by_block_and_warps(TABLE))
    fake = kernel.backend
    x, y, out = vectors(3000)
    kernel[grid(3000)](x, y, out, 3000)
    np.testing.assert_array_equal(out, x + y)
    assert kernel.best_config == tessera.Config({"BLOCK": 512}, num_warps=4)
    assert kernel.configs_timings == {c: TABLE[c.kwargs["BLOCK"], c.num_warps] for c in configs}
    assert sorted(map(repr, fake.benched)) == sorted(map(repr, configs))
    assert len(fake.compiled) == 8 and kernel.failed_configs == []
    kernel[grid(3000)](x, y, out, 3000)            # same key: no tuning
    assert len(fake.benched) == 8
    x2, y2, out2 = vectors(5000, seed=1)
    kernel[grid(5000)](x2, y2, out2, 5000)         # new key value: tuned again
    assert len(fake.benched) == 16
    np.testing.assert_array_equal(out2, x2 + y2)
    x3, y3, out3 = vectors(3000, np.float64, seed=2)
    kernel[grid(3000)](x3, y3, out3, 3000)         # same n, new dtype: tuned again
    assert len(fake.benched) == 24
    np.testing.assert_array_equal(out3, x3 + y3)
    assert len(kernel.cache) == 3


def test_compiles_run_in_several_worker_processes():
    if parallel.cpu_count() < 2:
        pytest.skip("one CPU")
    kernel = tuned(add_kernel, configs_of((128, 256, 512, 1024), (1, 4)),
                   by_block_and_warps(TABLE))
    x, y, out = vectors(1000)
    kernel[grid(1000)](x, y, out, 1000)
    workers = set(kernel.backend.workers)
    assert len(workers) >= 2 and os.getpid() not in workers


def test_user_pruning_early_prune_then_perf_model_top_k():
    seen = {}

    def early(configs, nargs, **kwargs):
        seen["early"] = (len(configs), nargs["n"])
        return [c for c in configs if c.kwargs["BLOCK"] != 128]

    def model(**kwargs):
        seen.setdefault("model", []).append(sorted(kwargs))
        return kwargs["BLOCK"] * kwargs["num_warps"]          # favours small configs

    configs = configs_of((128, 256, 512, 1024), (1, 4))
    kernel = tuned(add_kernel, configs, by_block_and_warps(TABLE),
                   prune_configs_by={"early_config_prune": early, "perf_model": model,
                                     "top_k": 3})
    x, y, out = vectors(777)
    kernel[grid(777)](x, y, out, 777)
    np.testing.assert_array_equal(out, x + y)
    assert seen["early"] == (8, 777)
    assert {"x_ptr", "n", "BLOCK", "num_warps", "num_stages"} <= set(seen["model"][0])
    expected = {(256, 1), (512, 1), (256, 4)}     # the 3 lowest BLOCK * num_warps left
    assert {(c.kwargs["BLOCK"], c.num_warps) for c in kernel.backend.benched} == expected
    assert kernel.best_config == tessera.Config({"BLOCK": 256}, num_warps=4)   # 2.0 ms


def test_top_k_as_a_fraction():
    configs = configs_of((128, 256, 512, 1024), (1, 4))
    kernel = tuned(add_kernel, configs, by_block_and_warps(TABLE),
                   prune_configs_by={"perf_model": lambda **k: -k["BLOCK"], "top_k": 0.25})
    x, y, out = vectors(100)
    kernel[grid(100)](x, y, out, 100)
    assert {(c.kwargs["BLOCK"], c.num_warps) for c in kernel.backend.benched} == \
        {(1024, 1), (1024, 4)}


def test_resource_model_prunes_before_compiling():
    small = FAKE_H100.__class__(**{**FAKE_H100.__dict__, "max_threads_per_block": 128})
    configs = configs_of((256, 512), (2, 4, 8))
    kernel = tuned(add_kernel, configs, by_block_and_warps(TABLE), properties=small)
    x, y, out = vectors(1000)
    kernel[grid(1000)](x, y, out, 1000)
    np.testing.assert_array_equal(out, x + y)
    assert all(entry["num_warps"] <= 4 for entry in kernel.backend.compiled)
    failed = {(c.kwargs["BLOCK"], c.num_warps): reason for c, reason in kernel.failed_configs}
    assert set(failed) == {(256, 8), (512, 8)}
    assert all(r.startswith("pruned before compiling: needs 256 threads per block")
               for r in failed.values())


def test_loop_carried_tiles_too_big_for_registers_are_pruned_in_the_worker():
    configs = [tessera.Config({"BLOCK": 65536}, num_warps=1),
               tessera.Config({"BLOCK": 256}, num_warps=2)]
    kernel = tuned(row_sum_kernel, configs, lambda c: 1.0, key=("n", "rows"))
    rows, n = 3, 500
    x = np.random.default_rng(3).standard_normal(rows * n).astype(np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    kernel[grid(n)](x, out, n, rows)
    np.testing.assert_allclose(out, x.reshape(rows, n).sum(0), rtol=1e-6)
    (config, reason), = kernel.failed_configs
    assert config.kwargs["BLOCK"] == 65536
    assert "pruned before compiling" in reason and "loop-carried" in reason
    assert kernel.best_config.kwargs["BLOCK"] == 256


def test_when_the_estimate_prunes_every_config_the_assembler_decides():
    # 8192 fp32 accumulators on one warp (16384 on two): the tile-IR estimate says 256 registers
    # per thread, more than a thread has; with no config left the tuner compiles them anyway
    # (ptxas spills what does not fit) rather than leaving the kernel with nothing to run.
    configs = [tessera.Config({"BLOCK": 8192}, num_warps=1),
               tessera.Config({"BLOCK": 16384}, num_warps=2)]
    kernel = tuned(row_sum_kernel, configs, lambda c: c.num_warps, key=("n", "rows"))
    rows, n = 2, 300
    x = np.random.default_rng(4).standard_normal(rows * n).astype(np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    kernel[grid(n)](x, out, n, rows)
    np.testing.assert_allclose(out, x.reshape(rows, n).sum(0), rtol=1e-6)
    assert kernel.failed_configs == [] and kernel.best_config.kwargs["BLOCK"] == 8192
    # Both went through the workers twice: pruned on the estimate, then compiled.
    assert sorted(e["BLOCK"] for e in kernel.backend.compiled) == [8192, 8192, 16384, 16384]


def test_a_config_that_fails_to_compile_is_skipped_with_its_reason():
    configs = configs_of((512, 4096), (4,))
    kernel = tuned(add_kernel, configs, lambda c: 0.1 if c.kwargs["BLOCK"] == 4096 else 1.0)
    x, y, out = vectors(1000)
    kernel[grid(1000)](x, y, out, 1000)
    np.testing.assert_array_equal(out, x + y)
    assert kernel.best_config.kwargs["BLOCK"] == 512
    (config, reason), = kernel.failed_configs
    assert config.kwargs["BLOCK"] == 4096
    assert "BLOCK too large" in reason


@pytest.mark.skipif(ptxas.find_ptxas() is None, reason="needs ptxas for register counts")
def test_a_config_whose_registers_cannot_fit_fails_after_compiling():
    tiny = FAKE_H100.__class__(**{**FAKE_H100.__dict__, "max_registers_per_multiprocessor": 4096})
    configs = [tessera.Config({"BLOCK": 1024}, num_warps=32),
               tessera.Config({"BLOCK": 256}, num_warps=1)]
    kernel = tuned(add_kernel, configs, lambda c: 1.0, properties=tiny)
    x, y, out = vectors(1000)
    kernel[grid(1000)](x, y, out, 1000)
    (config, reason), = kernel.failed_configs
    assert config.num_warps == 32
    assert reason.startswith("out of resources: too many registers")
    assert len(kernel.backend.compiled) == 2      # it was compiled: ptxas told the registers


def test_every_config_failing_is_an_error_naming_each_reason():
    configs = configs_of((4096, 8192), (4,))
    kernel = tuned(add_kernel, configs, lambda c: 1.0)
    x, y, out = vectors(100)
    with pytest.raises(RuntimeError, match="no config could run") as error:
        kernel[grid(100)](x, y, out, 100)
    message = str(error.value)
    assert message.count("static_assert failed: BLOCK too large") == 2
    assert "BLOCK: 4096, num_warps: 4" in message and "BLOCK: 8192, num_warps: 4" in message


def test_a_config_that_fails_to_launch_is_skipped():
    def times(config):
        if config.num_warps == 1:
            raise RuntimeError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
        return 1.0
    kernel = tuned(add_kernel, configs_of((256,), (1, 4)), times)
    x, y, out = vectors(100)
    kernel[grid(100)](x, y, out, 100)
    assert kernel.best_config.num_warps == 4
    (config, reason), = kernel.failed_configs
    assert config.num_warps == 1 and "LAUNCH_OUT_OF_RESOURCES" in reason


@pytest.mark.parametrize("reset", [True, False])
def test_reset_to_zero(reset):
    x = np.random.default_rng(4).standard_normal(1000).astype(np.float32)
    out = np.zeros_like(x)
    options = {"reset_to_zero": ["out_ptr"]} if reset else {}
    kernel = tuned(accumulate_kernel, configs_of((128, 256, 512), (4,)), lambda c: 1.0,
                   **options)
    kernel[grid(1000)](x, out, 1000)
    if reset:   # zeroed before each timed launch and before the real one
        np.testing.assert_array_equal(out, x)
    else:       # every timed launch (three, then the tied finalists' rounds) and the real
        timed = len(kernel.backend.benched)  # one all accumulated
        assert timed == 3 + 3 * tuner.REFINE_ROUNDS
        np.testing.assert_allclose(out, (timed + 1) * x, rtol=1e-5)


def test_restore_value():
    x0 = np.random.default_rng(5).standard_normal(1000).astype(np.float32)
    x = x0.copy()
    kernel = tuned(double_kernel, configs_of((128, 256, 512), (4,)), lambda c: 1.0,
                   restore_value=["x_ptr"])
    kernel[grid(1000)](x, 1000)
    np.testing.assert_array_equal(x, 2 * x0)


def test_user_hooks_replace_the_defaults_and_config_pre_hooks_run():
    calls = []
    configs = [tessera.Config({"BLOCK": b}, num_warps=4,
                              pre_hook=lambda args: calls.append(("config", args["BLOCK"])))
               for b in (128, 256)]
    kernel = tuned(add_kernel, configs, lambda c: c.kwargs["BLOCK"],
                   pre_hook=lambda args: calls.append(("pre", args["n"], args["BLOCK"])),
                   post_hook=lambda args, exception: calls.append(("post", exception)))
    x, y, out = vectors(300)
    kernel[grid(300)](x, y, out, 300)
    assert calls == [("config", 128), ("config", 256),  # before each compile (what it
                     # specializes on may depend on the hook, as a launch's does)
                     ("config", 128), ("pre", 300, 128), ("post", None),
                     ("config", 256), ("pre", 300, 256), ("post", None),
                     ("config", 128)]                 # the real launch: the config's hook only


@tessera.jit(interpret=True)
def descriptor_copy_kernel(src_desc, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rows = src_desc.load([0, tl.program_id(0) * BLOCK]).reshape([BLOCK])
    tl.store(out_ptr + offs, rows, mask=offs < n)


def test_config_pre_hooks_run_before_compiling_what_they_specialize():
    # A hook setting a descriptor's block to the config's (Triton's attention tutorial): each
    # compile job specializes on the block its config's launch passes.
    from tessera.tools.tensor_descriptor import TensorDescriptor

    def block_of(args):
        args["src_desc"].block_shape = [1, args["BLOCK"]]
    configs = [tessera.Config({"BLOCK": b}, num_warps=4, pre_hook=block_of) for b in (64, 128)]
    kernel = tuned(descriptor_copy_kernel, configs, lambda c: c.kwargs["BLOCK"])
    signatures = []
    compile_jobs = kernel.backend.compile
    kernel.backend.compile = lambda jobs, on_done=None: (
        signatures.extend(str(job.specialization[0]) for job in jobs)
        or compile_jobs(jobs, on_done))
    x = np.arange(300, dtype=np.float32).reshape(1, 300)
    out = np.full(300, np.nan, np.float32)
    kernel[grid(300)](TensorDescriptor.from_tensor(x, [1, 16]), out, 300)
    np.testing.assert_array_equal(out, x[0])
    assert len(signatures) == 2 and kernel.best_config is configs[0]
    assert "[1, 64]" in signatures[0] and "[1, 128]" in signatures[1], signatures


def test_configs_compiling_to_one_kernel_are_compiled_once():
    configs = [tessera.Config({"BLOCK": 256}, num_warps=4, pre_hook=lambda args: None),
               tessera.Config({"BLOCK": 256}, num_warps=4)]
    kernel = tuned(add_kernel, configs, lambda c: 2.0 if c.pre_hook else 1.0)
    x, y, out = vectors(300)
    kernel[grid(300)](x, y, out, 300)
    assert len(kernel.backend.compiled) == 1 and len(kernel.backend.benched) == 2
    assert kernel.best_config is configs[1]


def test_misuse_is_reported_clearly():
    configs = configs_of((128, 256), (4,))
    kernel = tuned(add_kernel, configs, lambda c: 1.0)
    x, y, out = vectors(10)
    with pytest.raises(ValueError, match="conflicting meta-parameters.*BLOCK"):
        kernel[grid(10)](x, y, out, 10, BLOCK=128)
    with pytest.raises(TypeError, match="key argument 'n' was not given"):
        kernel[grid(10)](x, y, out)
    with pytest.raises(ValueError, match=r"key names \['m'\]"):
        tessera.autotune(configs=configs, key=["m"])(add_kernel)
    with pytest.raises(ValueError, match="unknown fields"):
        tessera.autotune(configs=configs, key=["n"], prune_configs_by={"topk": 2})(add_kernel)
    with pytest.raises(TypeError, match="stacked above another"):
        tessera.autotune(configs=configs, key=["n"])(kernel)
    with pytest.raises(NotImplementedError, match="num_ctas"):
        tessera.Config({"BLOCK": 128}, num_ctas=2)
    with pytest.raises(ValueError, match="maxnreg"):
        tessera.Config({"BLOCK": 128}, maxnreg=0)


def test_knob_off_uses_the_first_config_and_a_bad_value_is_an_error():
    configs = configs_of((256, 512), (4,))
    kernel = tuned(add_kernel, configs, lambda c: 1.0)
    x, y, out = vectors(1000)
    knobs.autotune = "off"
    kernel[grid(1000)](x, y, out, 1000)
    np.testing.assert_array_equal(out, x + y)
    assert kernel.best_config is configs[0]
    assert kernel.backend.compiled == [] and kernel.backend.benched == []
    knobs.autotune = "sometimes"
    with pytest.raises(ValueError, match="TESSERA_AUTOTUNE"):
        kernel[grid(100)](x, y, out, 100)


def test_interpret_mode_with_the_real_backend_uses_the_first_config():
    configs = configs_of((256, 512), (4,))
    kernel = tessera.autotune(configs=configs, key=["n"])(add_kernel)
    x, y, out = vectors(1000)
    kernel[grid(1000)](x, y, out, 1000)
    np.testing.assert_array_equal(out, x + y)
    assert kernel.best_config is configs[0] and kernel.configs_timings == {}


def test_interpret_mode_says_once_that_the_first_config_is_untimed(capsys):
    configs = configs_of((256, 512), (4,))
    kernel = tessera.autotune(configs=configs, key=["n"])(add_kernel)
    for n in (1000, 300):
        x, y, out = vectors(n)
        kernel[grid(n)](x, y, out, n)
        np.testing.assert_array_equal(out, x + y)
    assert capsys.readouterr().err == (
        "autotune add_kernel: interpreted on the CPU, so the 2 configs are not timed; using "
        "the first (BLOCK: 256, num_warps: 4, num_stages: 3)\n")


@tessera.jit(interpret=True)
def halves_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, HALF: tl.constexpr,
                  SCALE: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    for part in tl.static_range(2):
        offs = start + part * HALF + tl.arange(0, HALF)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * SCALE, mask=mask)


def test_heuristics_below_autotune_see_each_config():
    kernel = tessera.autotune(configs=configs_of((128, 512), (4,)), key=["n"])(
        tessera.heuristics({"HALF": lambda a: a["BLOCK"] // 2,
                            "SCALE": lambda a: float(a["HALF"] // 64)})(halves_kernel))
    kernel.backend = FakeBackend(lambda c: 1.0 / c.kwargs["BLOCK"])
    x = np.random.default_rng(6).standard_normal(1000).astype(np.float32)
    out = np.full_like(x, np.nan)
    kernel[grid(1000)](x, out, 1000)
    assert sorted((e["BLOCK"], e["HALF"], e["SCALE"]) for e in kernel.backend.compiled) == \
        [(128, 64, 1.0), (512, 256, 4.0)]
    np.testing.assert_array_equal(out, 4.0 * x)


def test_heuristics_alone():
    kernel = tessera.heuristics({"BLOCK": lambda a: 128 if a["n"] < 500 else 512,
                                 "HALF": lambda a: a["BLOCK"] // 2,
                                 "SCALE": lambda a: 3.0})(halves_kernel)
    for n in (300, 1000):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        out = np.full_like(x, np.nan)
        kernel[grid(n)](x, out, n)
        np.testing.assert_array_equal(out, 3.0 * x)


def test_single_config_is_not_tuned():
    kernel = tuned(add_kernel, configs_of((256,), (4,)), lambda c: 1.0)
    x, y, out = vectors(100)
    kernel[grid(100)](x, y, out, 100)
    assert kernel.backend.compiled == [] and kernel.best_config.kwargs["BLOCK"] == 256


def test_progress_bar_when_the_knob_says_so(capsys):
    knobs.autotune_progress = True
    kernel = tuned(add_kernel, configs_of((128, 256, 512), (4,)), by_block_and_warps(TABLE))
    x, y, out = vectors(100)
    kernel[grid(100)](x, y, out, 100)
    err = capsys.readouterr().err
    assert "autotune add_kernel" in err and "compiled 3/3" in err and "timed 3/3" in err
    assert "best 1.0000 ms (BLOCK: 512, num_warps: 4, num_stages: 3)" in err
    assert err.endswith("autotune add_kernel: best (BLOCK: 512, num_warps: 4, num_stages: 3) "
                        "1.0000 ms of 3 timed configs in " + err.rsplit(" in ", 1)[1])
    knobs.autotune_progress = False
    x, y, out = vectors(200)
    kernel[grid(200)](x, y, out, 200)
    assert capsys.readouterr().err == ""


def test_progress_redraws_one_line_in_a_notebook_stream():
    # ipykernel's OutStream is not a terminal, but its output area honours "\r".
    import io
    from tessera.autotuner.progress import Progress
    stream_type = type("OutStream", (io.StringIO,), {"__module__": "ipykernel.iostream"})
    stream = stream_type()
    with knobs.scope(autotune_progress=None):  # unset: the stream decides
        bar = Progress("k", stream=stream)
        assert bar.enabled and not Progress("k", stream=io.StringIO()).enabled
    bar.update("compiled", 1, 2)
    bar.update("timed", 2, 2, best="1.0 ms (BLOCK: 64)")
    bar.close("best (BLOCK: 64) 1.0 ms")
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.count("\n") == 2
    assert text.endswith("\nautotune k: best (BLOCK: 64) 1.0 ms\n")
