"""Autotuning as one program across torch.distributed ranks (autotuner/distributed.py), on 2-4
local gloo ranks (ranks.py) with a fake timer: with timing noise per rank, ranks tuning alone
pick different configs and ranks tuning together agree; each rank times only its share; ties
go to the lower index; group rank 0 alone writes the record and later runs read it; a rank on
another kernel or key, or absent, is a clear error; a rank's failure reaches every rank."""
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from fakes import FakeBackend  # noqa: E402
from ranks import InstantBackend, run_ranks  # noqa: E402
from tessera.autotuner import distributed, noise, ranks, results  # noqa: E402
from tessera.config import knobs  # noqa: E402


@tessera.jit(interpret=True)
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


CONFIGS = [tessera.Config({"BLOCK": b}, num_warps=w) for b in (64, 128, 256, 512)
           for w in (1, 2, 4, 8)]                       # 16 candidates
SIZES = (100, 200, 300, 400, 500, 600)                   # one tuning key each


def index_of(config):
    return CONFIGS.index(config)


def flat(config):
    return 1.0                                            # every config equally fast


def tune_sizes(times=flat, noise_spec=None, shared_cache=False, backend=InstantBackend,
               sizes=SIZES, **options):
    """A scenario: tune add_kernel for each size; what each rank chose, timed and stored."""
    def scenario(rank, world, directory):
        knobs.cache_dir = str(directory / ("cache" if shared_cache else f"cache{rank}"))
        knobs.autotune_progress = False
        if noise_spec is not None:
            knobs.autotune_noise = noise_spec
        stores = []
        real_store = results.store
        results.store = lambda key, record: (stores.append(record["ranks"]),
                                             real_store(key, record))
        kernel = tessera.autotune(configs=CONFIGS, key=["n"], **options)(add_kernel)
        kernel.backend = backend(times)
        chosen, timings = {}, {}
        for n in sizes:
            rng = np.random.default_rng(n)
            x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n)
            y = y.astype(np.float32)
            out = np.full(n, np.nan, np.float32)
            kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
            np.testing.assert_array_equal(out, x + y)
            chosen[str(n)] = index_of(kernel.best_config)
            timings[str(n)] = sorted((index_of(c), ms) for c, ms in kernel.configs_timings.items())
        return {"chosen": chosen, "timings": timings, "stores": stores,
                "benched": [index_of(c) for c in kernel.backend.benched]}
    return scenario


@pytest.mark.parametrize("world", [2, 4])
def test_with_noise_ranks_alone_differ_and_ranks_together_agree(tmp_path, world):
    alone = run_ranks(world, tune_sizes(noise_spec=(3.0, 1), distributed=False), tmp_path / "a")
    differing = [n for n in map(str, SIZES) if len({r["chosen"][n] for r in alone}) > 1]
    assert differing, "the noise should make ranks tuning alone disagree"
    for result in alone:    # alone, each rank times everything (close finalists again: _refine)
        assert set(result["benched"]) == set(range(16))
        assert len(result["benched"]) >= 16 * len(SIZES)
    together = run_ranks(world, tune_sizes(noise_spec=(3.0, 1)), tmp_path / "t")
    for n in map(str, SIZES):
        assert len({r["chosen"][n] for r in together}) == 1, n
        timings = together[0]["timings"][n]                # every rank has all 16 timings
        assert all(r["timings"][n] == timings for r in together) and len(timings) == 16
        best = min(timings, key=lambda item: (item[1], item[0]))[0]
        assert together[0]["chosen"][n] == best            # the fastest of the gathered times
    for rank, result in enumerate(together):               # each rank timed only its share
        assert set(result["benched"]) == {i for i in range(16) if i % world == rank}


def test_the_fastest_wins_and_ties_go_to_the_lower_index(tmp_path):
    def times(config):          # indices 5 and 13 tie for the fastest; 5 is on rank 1
        return 0.5 if index_of(config) in (5, 13) else 1.0 + index_of(config) / 100
    results_ = run_ranks(2, tune_sizes(times=times, sizes=(100,)), tmp_path)
    assert [r["chosen"]["100"] for r in results_] == [5, 5]
    flat_results = run_ranks(2, tune_sizes(sizes=(100,)), tmp_path / "flat")
    assert [r["chosen"]["100"] for r in flat_results] == [0, 0]


def pass_then_rounds(pass_ms, round_ms, default=2.0):
    """A timer whose first timing of a config (the pass) reads ``pass_ms`` and later ones
    (the refinement rounds) ``round_ms``: drift that only alternating rounds undo."""
    seen = set()

    def times(config):
        index = index_of(config)
        first = index not in seen
        seen.add(index)
        table = pass_ms if first else round_ms
        return table.get(index, pass_ms.get(index, default))
    return times


@pytest.mark.parametrize("world", [2, 4])
def test_the_group_refines_its_global_finalists_each_rank_its_own(tmp_path, world):
    from tessera.autotuner import refine
    # Five configs within 8% of the fastest in the pass; the four fastest are the finalists
    # (13 is not); in alternating rounds 9 is the fastest (0.98), and wins on every rank.
    pass_ms = {3: 0.95, 6: 1.00, 9: 1.02, 12: 1.01, 13: 1.02}
    round_ms = {3: 1.10, 6: 1.05, 9: 0.98, 12: 1.01, 13: 0.5}
    finalists = [3, 6, 12, 9]                              # by pass time, then index
    out = run_ranks(world, tune_sizes(times=pass_then_rounds(pass_ms, round_ms),
                                      sizes=(100,)), tmp_path)
    assert [r["chosen"]["100"] for r in out] == [9] * world
    timings = dict(out[0]["timings"]["100"])
    assert all(dict(r["timings"]["100"]) == timings for r in out)
    assert {i: timings[i] for i in finalists} == {i: round_ms[i] for i in finalists}
    assert timings[13] == pass_ms[13]                      # not a finalist: its pass time
    for rank, result in enumerate(out):                    # the pass, then its own rounds
        share = [i for i in range(16) if i % world == rank]
        own = [i for i in finalists if i % world == rank]
        assert result["benched"] == share + own * refine.REFINE_ROUNDS, rank
    assert sum(len(r["benched"]) for r in out) == 16 + 4 * refine.REFINE_ROUNDS


def test_ranks_without_finalists_still_meet_for_the_refined_times(tmp_path):
    from tessera.autotuner import refine
    pass_ms = {4: 1.00, 8: 1.01}                           # both on rank 0 of 4
    round_ms = {4: 1.02, 8: 0.99}
    out = run_ranks(4, tune_sizes(times=pass_then_rounds(pass_ms, round_ms), sizes=(100,)),
                    tmp_path)
    assert [r["chosen"]["100"] for r in out] == [8] * 4
    assert out[0]["benched"] == [0, 4, 8, 12] + [4, 8] * refine.REFINE_ROUNDS
    for rank in (1, 2, 3):                                 # their share, no rounds
        assert out[rank]["benched"] == [i for i in range(16) if i % 4 == rank]


def test_a_rank_failing_in_its_rounds_fails_every_rank_not_hangs(tmp_path):
    class FailsInRounds(InstantBackend):
        def bench(self, call, config, do_bench):
            from tessera.autotuner.distributed import global_rank
            if global_rank() == 1 and index_of(config) in self.benched_once:
                raise RuntimeError("the GPU fell off the bus")
            self.benched_once = getattr(self, "benched_once", set()) | {index_of(config)}
            return super().bench(call, config, do_bench)
        benched_once: set = set()
    out = run_ranks(2, tune_sizes(sizes=(100,), backend=FailsInRounds), tmp_path, raises=False)
    for result in out:                   # flat times: finalists 0-3, rank 1 owns 1 and 3
        assert result["error"] == "RuntimeError"
        assert "group rank 1 failed" in result["message"] and "off the bus" in result["message"]


def test_a_kernel_given_its_own_timer_is_not_refined_over_the_group(tmp_path):
    pass_ms = {3: 0.95, 6: 1.00}
    round_ms = {3: 1.10, 6: 0.90}
    out = run_ranks(2, tune_sizes(times=pass_then_rounds(pass_ms, round_ms), sizes=(100,),
                                  do_bench=lambda fn, quantiles=None: 1.0), tmp_path)
    assert [r["chosen"]["100"] for r in out] == [3, 3]
    for rank, result in enumerate(out):
        assert result["benched"] == [i for i in range(16) if i % 2 == rank]


def test_rank_zero_alone_stores_and_later_runs_take_its_record(tmp_path):
    first = run_ranks(2, tune_sizes(noise_spec=(3.0, 2), sizes=(100, 200)), tmp_path / "1")
    assert first[0]["stores"] == [2, 2] and first[1]["stores"] == []
    assert (tmp_path / "1" / "cache0" / "tuning").is_dir()
    assert not (tmp_path / "1" / "cache1" / "tuning").exists()   # rank 1 stored no record
    # Again, in new processes: rank 0 reads its record and every rank takes it, untimed
    # (rank 1 has no record of its own: its cache directory is empty).
    second = run_ranks(2, tune_sizes(noise_spec=(3.0, 2), sizes=(100, 200)), tmp_path / "1")
    assert [r["chosen"] for r in second] == [first[0]["chosen"]] * 2
    assert second[0]["benched"] == second[1]["benched"] == []
    assert second[0]["stores"] == second[1]["stores"] == []


def test_opting_out_by_knob_tunes_each_rank_alone(tmp_path):
    def scenario(rank, world, directory):
        knobs.autotune_distributed = False
        return tune_sizes(sizes=(100,))(rank, world, directory)
    for result in run_ranks(2, scenario, tmp_path):
        assert set(result["benched"]) == set(range(16))


def test_a_subgroup_tunes_apart_from_the_other_ranks(tmp_path):
    def scenario(rank, world, directory):
        import torch.distributed as dist
        pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        group = pairs[rank // 2]
        return tune_sizes(sizes=(100,), process_group=group)(rank, world, directory)
    out = run_ranks(4, scenario, tmp_path)
    for rank, result in enumerate(out):                      # shares within each pair
        assert set(result["benched"]) == {i for i in range(16) if i % 2 == rank % 2}


def test_ranks_on_different_keys_get_a_clear_error(tmp_path):
    def scenario(rank, world, directory):
        return tune_sizes(sizes=(100 + rank,))(rank, world, directory)
    out = run_ranks(2, scenario, tmp_path, raises=False)
    for result in out:
        assert result["error"] == "AutotuneSyncError", result
        assert "add_kernel[100," in result["message"] and "add_kernel[101," in result["message"]
        assert "same order" in result["message"]


def test_an_absent_rank_is_an_error_after_the_timeout_not_a_hang(tmp_path):
    def scenario(rank, world, directory):
        knobs.autotune_sync_timeout = 1.0
        if rank == 1:
            return "skipped the tuning"                      # e.g. took another branch
        return tune_sizes(sizes=(100,))(rank, world, directory)
    out = run_ranks(2, scenario, tmp_path, raises=False)
    assert out[1] == "skipped the tuning"
    assert out[0]["error"] == "AutotuneSyncError"
    assert "rank(s) [1] did not reach" in out[0]["message"]
    assert "TESSERA_AUTOTUNE_SYNC_TIMEOUT" in out[0]["message"]


def test_a_rank_failing_outside_a_config_fails_every_rank(tmp_path):
    class Broken(InstantBackend):
        def compile(self, jobs, on_done=None):
            from tessera.autotuner.distributed import global_rank
            if global_rank() == 1:
                raise MemoryError("the compiler ran out of memory")
            return super().compile(jobs, on_done)
    out = run_ranks(2, tune_sizes(sizes=(100,), backend=Broken), tmp_path, raises=False)
    for result in out:
        assert result["error"] == "RuntimeError"
        assert "group rank 1 failed" in result["message"] and "out of memory" in result["message"]


def test_the_real_compiler_and_interpreter_on_two_ranks(tmp_path):
    """Real compiles (each rank compiles only its share, into one shared cache) and real
    interpreted launches: correct results and one config on both ranks."""
    def times(config):
        return 1.0 + abs(config.kwargs["BLOCK"] - 256) / 256 + abs(config.num_warps - 4) / 8
    out = run_ranks(2, tune_sizes(times=times, sizes=(300,), shared_cache=True,
                                  backend=FakeBackend), tmp_path)
    best = index_of(tessera.Config({"BLOCK": 256}, num_warps=4))
    assert [r["chosen"]["300"] for r in out] == [best, best]
    assert sorted(out[0]["benched"] + out[1]["benched"]) == list(range(16))


def test_noise_is_seeded_per_rank_and_off_by_default(monkeypatch):
    assert knobs.autotune_noise is None and noise.perturb(2.0, "k", 3) == 2.0
    knobs.autotune_noise = (1.0, 7)
    once = noise.perturb(2.0, "k", 3)
    assert once == noise.perturb(2.0, "k", 3) and 2.0 <= once < 4.0
    assert once != noise.perturb(2.0, "k", 4)
    monkeypatch.setattr(ranks, "global_rank", lambda: 1)
    assert once != noise.perturb(2.0, "k", 3)


@pytest.mark.parametrize("text, value", [("2.5", (2.5, 0)), ("0.5:9", (0.5, 9)), ("0", None),
                                         ("off", None)])
def test_noise_knob_parsing(monkeypatch, text, value):
    monkeypatch.setenv("TESSERA_AUTOTUNE_NOISE", text)
    assert knobs.autotune_noise == value


def test_noise_knob_rejects_nonsense(monkeypatch):
    monkeypatch.setenv("TESSERA_AUTOTUNE_NOISE", "loud")
    with pytest.raises(ValueError, match="TESSERA_AUTOTUNE_NOISE"):
        _ = knobs.autotune_noise


def test_without_torch_imported_tuning_imports_nothing_of_it():
    code = ("import sys, tessera\n"
            "from tessera.autotuner import distributed\n"
            "assert distributed.tuning_group(None, None) is None\n"
            "assert distributed.global_rank() == 0\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_an_initialized_group_nothing_changes():
    assert not torch.distributed.is_initialized()
    assert distributed.tuning_group(None, None) is None
    assert distributed.tuning_group(True, None) is None
