"""Benchmark tables and plots for tutorials, as ``triton.testing.perf_report``.

A :class:`Benchmark` names the x axis (``x_names`` swept over ``x_vals``) and the lines
(``line_arg`` swept over ``line_vals``); the decorated function returns one number (or
(value, min, max)) per (x, line). ``run`` prints the table, saves it as CSV, and plots it with
matplotlib when that is installed (the table needs nothing but NumPy).

    @perf_report(Benchmark(x_names=["n"], x_vals=[2**i for i in range(12, 25)],
                           line_arg="provider", line_vals=["tessera", "torch"],
                           line_names=["Tessera", "PyTorch"], ylabel="GB/s",
                           plot_name="vector-add", args={}))
    def bench(n, provider):
        ...
        return gbps(do_bench(fn, return_mode="median"))

    bench.run(print_data=True, save_path="results/")
"""
from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union


@dataclass
class Benchmark:
    """One table/plot: x values by rows, one column (line) per value of ``line_arg``."""
    x_names: List[str]
    x_vals: List[Any]
    line_arg: str
    line_vals: List[Any]
    line_names: List[str]
    plot_name: str
    args: Dict[str, Any] = field(default_factory=dict)
    xlabel: str = ""
    ylabel: str = ""
    x_log: bool = False
    y_log: bool = False
    styles: Optional[List[Tuple[str, str]]] = None   # (color, line style) per line

    def __post_init__(self) -> None:
        if len(self.line_names) != len(self.line_vals):
            raise ValueError(f"{self.plot_name}: {len(self.line_vals)} line_vals but "
                             f"{len(self.line_names)} line_names")


class Table:
    """Rows of numbers with named columns (a pandas DataFrame is returned instead when pandas
    is installed and ``return_df`` is asked)."""

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.columns = list(columns)
        self.rows = [list(r) for r in rows]

    def column(self, name: str) -> List[Any]:
        index = self.columns.index(name)
        return [row[index] for row in self.rows]

    def to_string(self, precision: int = 6) -> str:
        def cell(value: Any) -> str:
            if isinstance(value, float):
                return "nan" if math.isnan(value) else f"{value:.{precision}g}"
            return str(value)
        cells = [self.columns] + [[cell(v) for v in row] for row in self.rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells)

    def to_csv(self, path: str) -> None:
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(self.columns)
            writer.writerows(self.rows)

    def to_dataframe(self):
        import pandas
        return pandas.DataFrame(self.rows, columns=self.columns)

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        # A notebook cell ending in a table shows its numbers, not an object address.
        return f"Table({len(self.rows)} rows)\n{self.to_string()}"


def _measure(fn: Callable, bench: Benchmark, extra: Dict[str, Any]):
    """(table, {line name: (ys, mins, maxs)}) with one row per x value."""
    series: Dict[str, Tuple[List[float], List[float], List[float]]]
    rows, series = [], {name: ([], [], []) for name in bench.line_names}
    for x in bench.x_vals:
        xs = list(x) if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
        if len(xs) != len(bench.x_names):
            raise ValueError(f"{bench.plot_name}: x value {x!r} does not match {bench.x_names}")
        x_args = dict(zip(bench.x_names, xs))
        row: List[Any] = list(xs)
        for value, name in zip(bench.line_vals, bench.line_names):
            result = fn(**x_args, **{bench.line_arg: value}, **bench.args, **extra)
            if isinstance(result, (tuple, list)):
                y, y_min, y_max = (float(v) for v in result)
            else:
                y, y_min, y_max = float(result), math.nan, math.nan
            row.append(y)
            for values, v in zip(series[name], (y, y_min, y_max)):
                values.append(v)
        rows.append(row)
    return Table(bench.x_names + list(bench.line_names), rows), series


def _plot(bench: Benchmark, table: Table, series, save_path: str, show: bool) -> None:
    # Never matplotlib.use(): switching the backend would silently turn off a notebook's
    # inline plots for the rest of the session. A saved-only plot is a standalone Figure
    # (its own canvas, outside pyplot's figure list); a shown one goes through pyplot, which
    # draws it with the session's backend (inline in Jupyter).
    if show:
        import matplotlib.pyplot as plt
        figure, axes = plt.subplots(figsize=(6, 4))
    else:
        from matplotlib.figure import Figure
        figure = Figure(figsize=(6, 4))
        axes = figure.subplots()
    xs = table.column(bench.x_names[0])
    for i, name in enumerate(bench.line_names):
        ys, mins, maxs = series[name]
        color, style = bench.styles[i] if bench.styles else (None, "-")
        axes.plot(xs, ys, label=name, color=color, linestyle=style, marker="o")
        if not any(math.isnan(v) for v in mins + maxs):
            axes.fill_between(xs, mins, maxs, alpha=0.15, color=color)
    axes.set_xlabel(bench.xlabel or bench.x_names[0])
    axes.set_ylabel(bench.ylabel)
    axes.set_title(bench.plot_name)
    if bench.x_log:
        axes.set_xscale("log")
    if bench.y_log:
        axes.set_yscale("log")
    axes.legend()
    figure.tight_layout()
    if save_path:
        figure.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
    if show:
        plt.show()
        plt.close(figure)


class Mark:
    """A function decorated with :func:`perf_report`: call ``run`` to measure and report."""

    def __init__(self, fn: Callable, benchmarks: Union[Benchmark, Sequence[Benchmark]]) -> None:
        self.fn = fn
        self.benchmarks = benchmarks

    def run(self, show_plots: bool = False, print_data: bool = False, save_path: str = "",
            return_df: bool = False, **kwargs):
        """Measures every benchmark; prints (``print_data``), saves CSV + PNG under
        ``save_path``, shows plots; returns the table(s) when ``return_df``."""
        benches = [self.benchmarks] if isinstance(self.benchmarks, Benchmark) \
            else list(self.benchmarks)
        if save_path:
            os.makedirs(save_path, exist_ok=True)
        tables = []
        for bench in benches:
            table, series = _measure(self.fn, bench, kwargs)
            if print_data:
                print(f"{bench.plot_name}:\n{table.to_string()}")
            if save_path:
                table.to_csv(os.path.join(save_path, f"{bench.plot_name}.csv"))
            if save_path or show_plots:
                try:
                    _plot(bench, table, series, save_path, show_plots)
                except ImportError:
                    print(f"{bench.plot_name}: matplotlib is not installed; no plot")
            tables.append(_as_frame(table) if return_df else table)
        if return_df:
            return tables[0] if len(tables) == 1 else tables
        return None


def _as_frame(table: Table):
    try:
        return table.to_dataframe()
    except ImportError:
        return table


def perf_report(benchmarks: Union[Benchmark, Sequence[Benchmark]]) -> Callable[[Callable], Mark]:
    """Decorator: see the module docstring."""
    return lambda fn: Mark(fn, benchmarks)
