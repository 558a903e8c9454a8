#!/usr/bin/env python3
"""Run public Triton kernel files on Tessera's interpreter, only their imports changed.

The kernel files are not part of this repository: point the script at a folder holding them and
a driver file (``drivers.py`` in that folder unless ``--drivers`` names another) that says, per
kernel file, how to call it. The driver file defines ``DRIVERS``, a dict from a kernel file's
name to a dict with

- ``run(mod, torch)``: calls the module's host wrapper (or its kernels) on small random CPU
  tensors and returns a list of ``(label, got, expected)`` triples, ``expected`` computed with
  torch independently of the kernel; optional ``rtol`` / ``atol`` for the comparison;
- ``stubs`` (optional): modules the file imports that are not installed (a library's own
  helpers), as ``{module name: {attribute: value}}`` or ``{module name: "@other_file.py"}`` to
  serve another kernel file of the folder (rewritten the same way) under that name (or
  ``("@other_file.py", {attribute: value})`` to add names a newer version of it has); a name
  that starts with ``.`` is relative to the kernel's package;
- ``skip`` (optional): a reason not to run the file.

Each file runs in a child process (``TESSERA_INTERPRET=1``, the same Tessera as this process):
the folder's ``.py`` files are copied to a temporary package with every ``import triton...`` /
``from triton... import`` line rewritten to name ``tessera`` (nothing else changes). A file
passes when every triple matches (``torch.testing.assert_close``); it is a wrong result when one
does not, an error when anything raises (the first line of the error is reported, with the
kernel-file line it came from when there is one).

Example::

    PYTHONPATH=python python3 scripts/public_kernels.py /work/ref/public-kernels \
        --json /tmp/public.json

``--gpu`` (a GPU machine with Triton installed): each file runs compiled, twice, in two
children: once with its imports rewritten (Tessera) and once as written (Triton), both with
CUDA as torch's default device. Each side first checks its triples as above, then times its
kernels with its own ``do_bench`` (median, after one untimed call that compiles and tunes):
the driver's optional ``bench(mod, torch)`` returns ``[(label, fn), ...]``, zero-argument
callables that launch the kernels on tensors made beforehand; without it, the whole ``run``
call is timed (its torch reference included, on both sides: the ratio then understates the
difference). The ratio per label is Triton's time over Tessera's (above 1: Tessera faster);
the geomean over all labels comes last.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import types
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
try:  # an installed Tessera, else this checkout's in-tree build (make build)
    import tessera  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)

from tessera.testing.environment import child_env  # noqa: E402
from triton_suite import rewrite_imports  # noqa: E402

PACKAGE = "public_kernels_pkg"


def load_drivers(path: str) -> Dict[str, Dict[str, Any]]:
    """The ``DRIVERS`` dict of the driver file at ``path``."""
    spec = importlib.util.spec_from_file_location("public_kernel_drivers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.DRIVERS)


def prepare(folder: str, work_dir: str, rewrite: bool = True) -> str:
    """Copies the folder's kernel files into package ``PACKAGE`` under ``work_dir``, imports
    rewritten to name Tessera (unless ``rewrite`` is false: the Triton side of ``--gpu``);
    returns the package folder."""
    package = os.path.join(work_dir, PACKAGE)
    os.makedirs(package)
    open(os.path.join(package, "__init__.py"), "w").close()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and name != "drivers.py":
            with open(os.path.join(folder, name)) as source:
                text = source.read()
            text = rewrite_imports(text) if rewrite else text
            with open(os.path.join(package, name), "w") as target:
                target.write(text)
    return package


def _install_stubs(stubs: Dict[str, Any]) -> None:
    """Puts the driver's stand-ins for uninstalled modules into ``sys.modules``."""
    importlib.import_module(PACKAGE)  # the real package, before any stub names a module in it
    for name, value in stubs.items():
        full = PACKAGE + name if name.startswith(".") else name
        extra: Dict[str, Any] = {}
        if isinstance(value, tuple):  # ("@file.py", {attributes to add to it})
            value, extra = value
        if isinstance(value, str) and value.startswith("@"):
            module = importlib.import_module(f"{PACKAGE}.{value[1:-3]}")
            module.__dict__.update(extra)
        else:
            module = types.ModuleType(full)
            module.__dict__.update(value)
        parts = full.split(".")
        for i in range(1, len(parts)):  # parent packages of a dotted stub name
            parent = ".".join(parts[:i])
            if parent not in sys.modules:
                package = types.ModuleType(parent)
                package.__path__ = []  # type: ignore[attr-defined]
                sys.modules[parent] = package
        sys.modules[full] = module
        if len(parts) > 1:
            setattr(sys.modules[".".join(parts[:-1])], parts[-1], module)


def _error_line(exc: BaseException, kernel_file: str) -> str:
    """Type and first message line of ``exc``, with the last kernel-file frame it passed."""
    message = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {message[0] if message else ''}"
    where = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith(
        os.sep + kernel_file)]
    if where:
        text += f" [{kernel_file}:{where[-1].lineno}]"
    return text


def run_child(work_dir: str, drivers_path: str, kernel_file: str,
              side: str = "interpreter") -> Dict[str, Any]:
    """Runs one kernel file in this process (the child); returns its result record.
    ``side``: "interpreter", or "tessera" / "triton" (compiled on the GPU, then timed)."""
    import torch
    driver = load_drivers(drivers_path)[kernel_file]
    sys.path.insert(0, work_dir)
    if side != "interpreter":
        torch.set_default_device("cuda")
    try:
        _install_stubs(driver.get("stubs", {}))
        module = importlib.import_module(f"{PACKAGE}.{kernel_file[:-3]}")
        torch.manual_seed(0)
        triples = driver["run"](module, torch)
    except BaseException as exc:  # noqa: BLE001 - every failure is a result to report
        return {"status": "error", "reason": _error_line(exc, kernel_file)}
    record = _check_triples(driver, triples)
    if record["status"] != "passed" or side == "interpreter":
        return record
    try:
        record["times_ms"] = _time_kernels(driver, module, kernel_file, side, torch)
    except BaseException as exc:  # noqa: BLE001
        return {"status": "error", "reason": "timing: " + _error_line(exc, kernel_file)}
    return record


def _check_triples(driver: Dict[str, Any], triples) -> Dict[str, Any]:
    """passed, or wrong naming the first triple that does not match."""
    import torch
    for label, got, expected in triples:
        try:
            torch.testing.assert_close(got, expected, rtol=driver.get("rtol", 1e-4),
                                       atol=driver.get("atol", 1e-4), check_dtype=False)
        except AssertionError as exc:
            first = [line for line in str(exc).splitlines() if line.strip()]
            return {"status": "wrong", "reason": f"{label}: {first[0] if first else ''}"}
    return {"status": "passed", "reason": f"{len(triples)} outputs match"}


def _time_kernels(driver: Dict[str, Any], module, kernel_file: str, side: str,
                  torch) -> Dict[str, float]:
    """Median ms per label with ``side``'s own do_bench (its L2 flush), one untimed call
    first (compiling and autotuning stay out of the timing)."""
    if side == "tessera":
        from tessera.testing import do_bench
    else:
        from triton.testing import do_bench
    if "bench" in driver:
        entries = list(driver["bench"](module, torch))
    else:
        entries = [(kernel_file[:-3], lambda: driver["run"](module, torch))]
    times = {}
    for label, fn in entries:
        fn()
        torch.cuda.synchronize()
        times[label] = float(do_bench(fn, return_mode="median"))
    return times


def run_file(folder: str, drivers_path: str, work_dir: str, kernel_file: str,
             timeout: float, side: str = "interpreter") -> Dict[str, Any]:
    """Runs one kernel file in a child process; returns its result record."""
    env = child_env(TESSERA_INTERPRET="1" if side == "interpreter" else "0")
    command = [sys.executable, os.path.abspath(__file__), "--child", work_dir, drivers_path,
               kernel_file, side]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "error", "reason": f"timed out after {timeout:.0f} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"status": "error", "reason": f"child exited {done.returncode}: {tail}"}


def _gpu_sides(folder: str, drivers_path: str, work_dir: str, triton_dir: str, name: str,
               timeout: float) -> Dict[str, Any]:
    """Both sides of one file on the GPU; the record is Tessera's, with Triton's times and
    the ratio per label added (Triton's failure is reported, not counted against Tessera)."""
    ours = run_file(folder, drivers_path, work_dir, name, timeout, "tessera")
    theirs = run_file(folder, drivers_path, triton_dir, name, timeout, "triton")
    if "times_ms" in theirs:
        ours["triton_times_ms"] = theirs["times_ms"]
    else:
        ours["triton"] = f"{theirs['status']}: {theirs['reason']}"
    if "times_ms" in ours and "triton_times_ms" in ours:
        ours["triton_over_tessera"] = {label: ours["triton_times_ms"][label] / ms
                                       for label, ms in ours["times_ms"].items()
                                       if label in ours["triton_times_ms"] and ms > 0}
    return ours


def ratio_table(results: Dict[str, Dict[str, Any]]) -> str:
    """Per kernel: Tessera ms, Triton ms, Triton/Tessera; then the geomean and the worst."""
    lines = [f"{'kernel':40s} {'tessera ms':>11s} {'triton ms':>10s} {'triton/tessera':>15s}"]
    ratios = []
    for name, record in sorted(results.items()):
        for label, ratio in sorted(record.get("triton_over_tessera", {}).items()):
            ratios.append(ratio)
            lines.append(f"{name[:-3] + ':' + label:40s} {record['times_ms'][label]:11.4f} "
                         f"{record['triton_times_ms'][label]:10.4f} {ratio:15.3f}")
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        lines.append(f"geomean {geomean:.3f} over {len(ratios)} kernels, lowest {min(ratios):.3f}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?")
    parser.add_argument("--drivers", help="driver file (default: FOLDER/drivers.py)")
    parser.add_argument("--only", nargs="*", help="kernel files to run (default: all driven)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per file")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--gpu", action="store_true",
                        help="compiled on the GPU, timed against Triton (module docstring)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_child(*args.child)))
        return 0
    if not args.folder:
        parser.error("a kernel folder is required")
    folder = os.path.abspath(args.folder)
    drivers_path = os.path.abspath(args.drivers or os.path.join(folder, "drivers.py"))
    drivers = load_drivers(drivers_path)
    files = sorted(f for f in os.listdir(folder) if f.endswith(".py") and f != "drivers.py")
    if args.only:
        files = [f for f in files if f in args.only or f[:-3] in args.only]
    work_dir = tempfile.mkdtemp(prefix="tessera-public-")
    triton_dir = os.path.join(work_dir, "triton")  # --gpu: the files as written
    results: Dict[str, Dict[str, Any]] = {}
    try:
        prepare(folder, work_dir)
        if args.gpu:
            prepare(folder, triton_dir, rewrite=False)
        for name in files:
            driver = drivers.get(name)
            if driver is None:
                results[name] = {"status": "skipped", "reason": "no driver (helper module)"}
            elif driver.get("skip"):
                results[name] = {"status": "skipped", "reason": driver["skip"]}
            elif args.gpu:
                results[name] = _gpu_sides(folder, drivers_path, work_dir, triton_dir, name,
                                           args.timeout)
            else:
                results[name] = run_file(folder, drivers_path, work_dir, name, args.timeout)
            print(f"{results[name]['status']:8} {name}: {results[name]['reason']}", flush=True)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    if args.gpu:
        print(ratio_table(results))
    counts = {s: sum(r["status"] == s for r in results.values())
              for s in ("passed", "wrong", "error", "skipped")}
    print(" ".join(f"{k}={v}" for k, v in counts.items()))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1, sort_keys=True)
    return 0 if counts["wrong"] == counts["error"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
