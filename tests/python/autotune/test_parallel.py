"""The compile pool (autotuner/parallel.py): results in order, several processes, a crashing
job fails alone, and the inline and thread fallbacks."""
import os
import time

import pytest
from tessera.autotuner import parallel


def square_with_pid(job):
    time.sleep(0.05)              # long enough for the jobs to spread over the workers
    return job * job, os.getpid()


def crash_on_three(job):
    if job == 3:
        os._exit(7)               # a native crash, as far as the pool can tell
    return job + 100


def test_results_in_order_from_several_processes():
    done = []
    results = parallel.run_jobs(list(range(10)), square_with_pid,
                                on_done=lambda i, r: done.append(i))
    assert [r[0] for r in results] == [i * i for i in range(10)]
    assert sorted(done) == list(range(10))
    pids = {r[1] for r in results}
    assert os.getpid() not in pids
    if parallel.cpu_count() >= 2:
        assert len(pids) >= 2


def test_a_job_that_kills_its_worker_fails_alone():
    done = {}
    results = parallel.run_jobs(list(range(6)), crash_on_three,
                                on_done=lambda i, r: done.setdefault(i, r), workers=2)
    assert isinstance(results[3], parallel.WorkerDied)
    assert [r for i, r in enumerate(results) if i != 3] == [100, 101, 102, 104, 105]
    assert sorted(done) == list(range(6))


def test_one_worker_runs_inline():
    results = parallel.run_jobs([1, 2, 3], square_with_pid, workers=1)
    assert [r for r, _ in results] == [1, 4, 9] and {p for _, p in results} == {os.getpid()}


def test_threads_where_fork_is_missing(monkeypatch):
    monkeypatch.setattr(parallel, "fork_available", lambda: False)
    results = parallel.run_jobs(list(range(4)), square_with_pid, workers=2)
    assert [r for r, _ in results] == [0, 1, 4, 9] and {p for _, p in results} == {os.getpid()}


def test_nothing_to_do():
    assert parallel.run_jobs([], square_with_pid) == []


@pytest.mark.skipif(parallel.cpu_count() < 2, reason="one CPU")
def test_parallel_is_faster_than_one_after_another():
    def sleeper(job):
        time.sleep(0.2)
        return job
    start = time.perf_counter()
    parallel.run_jobs(list(range(4)), sleeper, workers=4)
    assert time.perf_counter() - start < 0.6        # 4 x 0.2 s one after another


def sleep_for(job):
    time.sleep(job)               # seconds: the job's "compile time"
    return job


@pytest.mark.parametrize("fork", [True, False])
def test_on_idle_runs_here_while_the_jobs_run_and_rests_when_it_has_nothing(monkeypatch, fork):
    """on_idle is called in this process between results, as long as it says it has work;
    once it says no, the pool blocks until the next result (no busy wait)."""
    if not fork:
        monkeypatch.setattr(parallel, "fork_available", lambda: False)
    events = []
    budget = {"calls": 0}

    def on_done(index, result):
        events.append(("done", index))

    def on_idle():
        assert not events or events[-1][0] in ("done", "idle")
        budget["calls"] += 1
        events.append(("idle", os.getpid()))
        time.sleep(0.01)
        return budget["calls"] < 5   # work for five calls, then none until a new result

    results = parallel.run_jobs([0.05, 0.6], sleep_for, on_done=on_done, on_idle=on_idle,
                                workers=2)
    assert results == [0.05, 0.6]
    assert sorted(i for kind, i in events if kind == "done") == [0, 1]
    idles = [i for kind, i in events if kind == "idle"]
    assert idles and set(idles) == {os.getpid()}
    # Five calls while job 1 runs, at most once more per result: not a busy loop.
    assert 5 <= len(idles) <= 5 + 2 + 1
    assert events[-1] == ("done", 1)
