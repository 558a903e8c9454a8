"""The compatibility suite's kernels on Tessera and on Triton 3.6, timed in the same run.

Each kernel of tests/compat/kernels is Triton code whose imports name Tessera; the Triton side
runs the same text with only its import lines changed back (tests/compat/loader.py). Both
sides are first checked against the float64 references (``check``), then timed at the
benchmark size (``bench``) with CUDA events by one timer, in alternating rounds
(``tessera.testing.do_bench_interleaved``: the median of 5 rounds' medians, L2 flushed before
each run), so that the GPU's clock drift falls on both sides alike. The ratio is Triton's time
over Tessera's: above 1 means Tessera is faster. Autotuned kernels are tuned on their first
call, which stays out of the timing; each row names the config each side's autotuner
picked.

    python3 benchmarks/triton_compat.py [--json out.json] [--only name,...]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from compat import loader  # noqa: E402


def prepared(module):
    """The side's benchmark call, compiled (and autotuned) outside the timing."""
    fn, args = module.bench("cuda")
    fn(*args)
    torch.cuda.synchronize()
    return lambda: fn(*args)


def tuned_configs(module) -> list:
    """The config each autotuned kernel of the module picked (its best_config, Triton's
    attribute on both sides), so that a row says whether both sides time the same tile."""
    picked = []
    for name in sorted(vars(module)):
        config = getattr(getattr(module, name), "best_config", None)
        if config is not None:
            picked.append(f"{name}: {config}")
    return picked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--only", help="comma-separated kernel module names")
    options = parser.parse_args()
    names = options.only.split(",") if options.only else loader.module_names()

    from tessera.testing import do_bench_interleaved
    rows = []
    for name in names:
        row, runs = {"kernel": name}, {}
        for side, load in (("tessera", loader.load_tessera), ("triton", loader.load_triton)):
            try:
                module = load(name)
                module.check("cuda")
                runs[side] = prepared(module)
                if tuned_configs(module):
                    row[side + "_configs"] = tuned_configs(module)
            except Exception as error:  # one failing side must not hide the other results
                row[side + "_error"] = f"{type(error).__name__}: {error}".splitlines()[0][:200]
                traceback.print_exc()
        try:
            row.update({f"{side}_ms": ms for side, ms in
                        do_bench_interleaved(runs, rounds=5).items()})
        except Exception as error:
            row["timing_error"] = f"{type(error).__name__}: {error}".splitlines()[0][:200]
            traceback.print_exc()
        if "tessera_ms" in row and "triton_ms" in row:
            row["triton_over_tessera"] = row["triton_ms"] / row["tessera_ms"]
        rows.append(row)
        print(json.dumps(row), flush=True)

    print(f"\n{'kernel':20s} {'tessera ms':>11s} {'triton ms':>10s} {'triton/tessera':>15s}")
    for row in rows:
        def cell(key, width):
            return f"{row[key]:{width}.4f}" if key in row else f"{'error':>{width}s}"
        print(f"{row['kernel']:20s} {cell('tessera_ms', 11)} {cell('triton_ms', 10)} "
              f"{cell('triton_over_tessera', 15)}")
    ratios = {row["kernel"]: row["triton_over_tessera"] for row in rows
              if "triton_over_tessera" in row}
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
        lowest = min(ratios, key=ratios.get)
        print(f"geomean over {len(ratios)} kernels: {geomean:.3f}; lowest "
              f"{ratios[lowest]:.3f} ({lowest})")
    if options.json:
        with open(options.json, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()
