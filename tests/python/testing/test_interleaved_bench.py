"""do_bench_interleaved: rounds alternate between the functions (so drift of the GPU's clocks
falls on all of them alike), each round starting one function later (no function always
first), each function's context is entered around its rounds, and the
result is the median of each function's round medians. do_bench itself (CUDA events) runs on
the GPU machine; here it is replaced by a clock that drifts, to pin the schedule."""
import contextlib

from tessera.testing import bench


def test_rounds_alternate_and_the_median_of_rounds_is_returned(monkeypatch):
    calls, entered = [], []
    clock = {"t": 0.0}

    def drifting_do_bench(fn, **kwargs):
        assert kwargs["return_mode"] == "median"
        clock["t"] += 1.0  # every later measurement reads 1 ms slower: the drift
        calls.append(fn())
        return {"a": 10.0, "b": 20.0}[calls[-1]] + clock["t"]

    @contextlib.contextmanager
    def knob_scope():
        entered.append(len(calls))
        yield

    monkeypatch.setattr(bench, "do_bench", drifting_do_bench)
    times = bench.do_bench_interleaved({"a": lambda: "a", "b": lambda: "b"}, rounds=5,
                                       contexts={"b": knob_scope})
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]
    assert entered == [1, 2, 5, 6, 9]  # around each of b's rounds, not once, not per call
    # a's rounds read 11, 14, 15, 18, 19; b's 22, 23, 26, 27, 30: the drift is shared (1 ms
    # apart), where timing a then b in one block each would put b's whole block later.
    assert times == {"a": 15.0, "b": 26.0}
