"""Benchmark helpers without a GPU: do_bench's statistics and repetition counts, and
perf_report tables, CSV files and plots (testing/bench.py, testing/perf_report.py)."""
import csv

import numpy as np
import pytest
from tessera.testing import Benchmark, Table, perf_report
from tessera.testing.bench import repetitions, summarize

TIMES = [4.0, 1.0, 3.0, 2.0, 10.0]


@pytest.mark.parametrize("mode, expected", [("min", 1.0), ("max", 10.0), ("mean", 4.0),
                                            ("median", 3.0), ("all", TIMES)])
def test_summarize_return_modes(mode, expected):
    assert summarize(TIMES, return_mode=mode) == expected


def test_summarize_quantiles():
    assert summarize(TIMES, quantiles=[0.5]) == 3.0                  # one quantile: a float
    assert summarize(TIMES, quantiles=[0.0, 0.25, 1.0]) == [1.0, 2.0, 10.0]
    assert summarize(TIMES, quantiles=[0.5, 0.2, 0.8]) == \
        [float(q) for q in np.quantile(TIMES, [0.5, 0.2, 0.8])]
    with pytest.raises(ValueError):
        summarize(TIMES, return_mode="average")
    with pytest.raises(ValueError):
        summarize([])


def test_repetitions_fill_the_budgets():
    assert repetitions(0.01, 25, 100) == (2500, 10000)
    assert repetitions(2.0, 25, 100) == (12, 50)
    assert repetitions(500.0, 25, 100) == (1, 1)      # always at least one run of each
    assert repetitions(0.0, 25, 100)[1] >= 1


def bandwidth(n, provider, scale):
    return {"a": n * scale, "b": (n * 2 * scale, n * scale, n * 3 * scale)}[provider]


BENCH = Benchmark(x_names=["n"], x_vals=[1, 2, 4], line_arg="provider", line_vals=["a", "b"],
                  line_names=["A", "B"], plot_name="demo", args={"scale": 10.0},
                  xlabel="size", ylabel="GB/s", x_log=True, styles=[("red", "-"), ("blue", "--")])


def test_table_printed_and_saved(tmp_path, capsys):
    mark = perf_report(BENCH)(bandwidth)
    table = mark.run(print_data=True, save_path=str(tmp_path), return_df=True)
    printed = capsys.readouterr().out
    assert printed.startswith("demo:")
    assert printed.splitlines()[1].split() == ["n", "A", "B"]
    assert printed.splitlines()[4].split() == ["4", "40", "80"]
    with open(tmp_path / "demo.csv") as f:
        rows = list(csv.reader(f))
    assert rows == [["n", "A", "B"], ["1", "10.0", "20.0"], ["2", "20.0", "40.0"],
                    ["4", "40.0", "80.0"]]
    values = table.column("B") if isinstance(table, Table) else list(table["B"])
    assert values == [20.0, 40.0, 80.0]


def test_plot_is_saved(tmp_path):
    pytest.importorskip("matplotlib")
    perf_report(BENCH)(bandwidth).run(save_path=str(tmp_path))
    png = (tmp_path / "demo.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000


def test_several_x_names_and_several_benchmarks():
    two = Benchmark(x_names=["m", "k"], x_vals=[(1, 2), 3], line_arg="p", line_vals=[1],
                    line_names=["one"], plot_name="grid")
    tables = perf_report([two, two])(lambda m, k, p: m * 10 + k).run(return_df=True)
    for table in tables:
        rows = table.rows if isinstance(table, Table) else table.values.tolist()
        assert [list(r) for r in rows] == [[1, 2, 12.0], [3, 3, 33.0]]


def test_mismatched_names_are_an_error():
    with pytest.raises(ValueError, match="line_names"):
        Benchmark(x_names=["n"], x_vals=[1], line_arg="p", line_vals=[1, 2], line_names=["a"],
                  plot_name="bad")


def test_saving_a_plot_keeps_the_session_backend_and_figures(tmp_path):
    # A notebook's inline backend must survive: saving uses a standalone Figure.
    matplotlib = pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    previous = matplotlib.get_backend()
    matplotlib.use("svg")
    try:
        open_figures = plt.get_fignums()
        perf_report(BENCH)(bandwidth).run(save_path=str(tmp_path))
        assert matplotlib.get_backend() == "svg"
        assert plt.get_fignums() == open_figures
        assert (tmp_path / "demo.png").read_bytes()[:4] == b"\x89PNG"
    finally:
        matplotlib.use(previous)


def test_show_plots_draws_through_pyplot(monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    shown = []
    monkeypatch.setattr(plt, "show", lambda: shown.append(
        [line.get_ydata().tolist() for line in plt.gcf().axes[0].get_lines()]))
    perf_report(BENCH)(bandwidth).run(show_plots=True)
    assert shown == [[[10.0, 20.0, 40.0], [20.0, 40.0, 80.0]]]


def test_do_bench_without_a_gpu_is_a_clear_tessera_error(monkeypatch):
    import tessera
    from tessera.testing import GPUUnavailableError, do_bench
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    calls = []
    with pytest.raises(GPUUnavailableError, match=r"do_bench times on a CUDA GPU.*"
                                                  r"torch.cuda.is_available\(\) is False"):
        do_bench(lambda: calls.append(1))
    assert calls == []  # nothing ran
    assert issubclass(GPUUnavailableError, tessera.errors.TesseraError)


def test_table_repr_shows_the_numbers():
    table = Table(["n", "ms"], [[1, 2.0], [16, 4.5]])
    assert repr(table) == "Table(2 rows)\n n   ms\n 1    2\n16  4.5"
