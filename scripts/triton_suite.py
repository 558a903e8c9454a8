#!/usr/bin/env python3
"""Run Triton's language test suite on Tessera's interpreter, only the imports changed.

Triton's test files are not part of this repository: point the script at a folder holding them
(Triton's ``python/test`` layout: an optional ``conftest.py`` above a ``language/`` folder of
``test_*.py`` files, or a flat folder). The folder is copied to a temporary directory, every
``import triton...`` / ``from triton... import`` line is rewritten to name ``tessera`` (nothing
else changes), and pytest runs each test file in a child process the way Triton's interpreter
CI does: ``TESSERA_INTERPRET=1``, ``--device cpu``, ``-m interpreter`` (tests Triton does not
run under its interpreter are counted as skipped), with a per-test timeout.

It prints per file the cases passed, failed and skipped (by the test itself), and those not
interpreted (no ``interpreter`` mark: Triton does not run them under its interpreter either;
``--unmarked`` runs them too, for files that mark no case yet need no GPU);
the pass rate passed / (passed + failed); and the most common failure reasons (exception type
and the first line of its message).

Example::

    PYTHONPATH=python python3 scripts/triton_suite.py /work/ref/triton-tests \
        --files test_core.py --sample 10 --json /tmp/suite.json
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

try:  # an installed Tessera, else this checkout's in-tree build (make build)
    import tessera  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from tessera.testing.environment import child_env  # noqa: E402

# `import triton`, `import triton.x as y`, `import triton.x`, `from triton[.x] import ...`
_IMPORT = re.compile(r"^(?P<indent>\s*)import\s+triton(?P<sub>(\.\w+)*)"
                     r"(?P<alias>\s+as\s+\w+)?\s*(?P<rest>(#.*)?)$")
_FROM = re.compile(r"^(?P<indent>\s*)from\s+triton(?P<sub>(\.\w+)*)\s+import\b")

# A pytest plugin loaded into the child: selects every Nth case (a deterministic sample),
# and writes one JSON line per case with its outcome and, for failures, the reason.
_PLUGIN = r'''
import json, os, pytest

_OUT = os.environ["TESSERA_SUITE_RESULTS"]
_EVERY = int(os.environ.get("TESSERA_SUITE_EVERY", "1"))
_OFFSET = int(os.environ.get("TESSERA_SUITE_OFFSET", "0"))


def _write(record):
    with open(_OUT, "a") as f:
        f.write(json.dumps(record) + "\n")


def pytest_collection_modifyitems(session, config, items):
    if _EVERY > 1:  # cases outside the sample are not counted at all
        kept = [item for i, item in enumerate(items) if i % _EVERY == _OFFSET]
        chosen = set(kept)
        for item in items:
            if item not in chosen:
                _write({"id": item.nodeid, "outcome": "sampled_out"})
        items[:] = kept


def pytest_deselected(items):
    for item in items:
        _write({"id": item.nodeid, "outcome": "deselected"})


def pytest_collectreport(report):
    if report.failed:
        _write({"id": report.nodeid, "outcome": "collect_error",
                "reason": str(report.longrepr).strip().splitlines()[-1][:200]})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None:
        value = call.excinfo.value
        lines = str(value).strip().splitlines()
        first = next((l.strip() for l in lines if l.strip()), "")
        report.user_properties.append(("reason", f"{type(value).__name__}: {first[:160]}"))


def pytest_runtest_logreport(report):
    # One record per case: its call phase, or the setup / teardown phase that failed or skipped.
    if report.when != "call" and not (report.failed or (report.skipped and report.when == "setup")):
        return
    outcome = "skipped" if report.skipped else ("failed" if report.failed else "passed")
    reason = dict(report.user_properties).get("reason")
    if outcome == "failed" and reason is None:
        reason = str(report.longrepr).strip().splitlines()[-1][:200]
    _write({"id": report.nodeid, "outcome": outcome, "when": report.when, "reason": reason})
'''


def rewrite_imports(source: str) -> str:
    """``source`` with every import of ``triton`` naming ``tessera`` instead (line count kept)."""
    out = []
    for line in source.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        match = _IMPORT.match(body)
        if match:
            indent, sub, alias = match["indent"], match["sub"], match["alias"]
            if alias:
                body = f"{indent}import tessera{sub}{alias}"
            elif sub:  # `import triton.x` binds the name `triton` too
                body = f"{indent}import tessera{sub}; import tessera as triton"
            else:
                body = f"{indent}import tessera as triton"
        else:
            match = _FROM.match(body)
            if match:
                body = _FROM.sub(lambda m: f"{m['indent']}from tessera{m['sub']} import", body,
                                 count=1)
        out.append(body + ending)
    return "".join(out)


def prepare(source_dir: str, work_dir: str) -> str:
    """Copies ``source_dir`` under ``work_dir`` with imports rewritten; returns the folder of
    the test files (``language/`` when the Triton layout is used)."""
    target = os.path.join(work_dir, "tests")
    shutil.copytree(source_dir, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for root, _dirs, files in os.walk(target):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                with open(path, "w", encoding="utf-8") as f:
                    f.write(rewrite_imports(text))
    with open(os.path.join(work_dir, "_tessera_suite_plugin.py"), "w") as f:
        f.write(_PLUGIN)
    language = os.path.join(target, "language")
    return language if os.path.isdir(language) else target


def run_file(test_dir: str, work_dir: str, name: str, args) -> Dict:
    """Runs one test file in a child pytest (from the copied tree's root, so its conftest.py
    files apply as in Triton's tree); returns its per-case records and wall time."""
    results = os.path.join(work_dir, f"{name}.jsonl")
    if os.path.exists(results):
        os.remove(results)
    env = child_env(extra_paths=[work_dir, test_dir], TESSERA_INTERPRET="1", TRITON_INTERPRET="1",
                    TESSERA_SUITE_RESULTS=results, TESSERA_SUITE_EVERY=str(args.sample),
                    TESSERA_SUITE_OFFSET=str(args.offset))
    root = os.path.join(work_dir, "tests")
    command = [sys.executable, "-m", "pytest", os.path.relpath(os.path.join(test_dir, name), root),
               "-q", f"--rootdir={root}", "-p", "_tessera_suite_plugin",
               "-p", "no:cacheprovider", "--device", "cpu",
               f"--timeout={args.timeout}", "-o", "addopts=", "--tb=no", "-rN"]
    if not args.unmarked:
        command += ["-m", "interpreter"]
    if args.k:
        command += ["-k", args.k]
    start = time.time()
    try:
        proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                              timeout=args.file_timeout)
        tail = (proc.stdout + proc.stderr)[-2000:]
    except subprocess.TimeoutExpired:
        tail = f"file run stopped after {args.file_timeout} s"
    records = []
    if os.path.exists(results):
        with open(results) as f:
            records = [json.loads(line) for line in f if line.strip()]
    return {"file": name, "records": records, "seconds": time.time() - start, "tail": tail}


def _reason_key(reason: str) -> str:
    """A failure reason without what differs between cases of one cause: addresses, the
    temporary directory, source positions."""
    reason = re.sub(r"0x[0-9a-f]+", "0x..", reason)
    reason = re.sub(r"(/[^\s:]+/)?([\w.<>-]+\.py|<string>):\d+(:\d+)?", r"\2", reason)
    return reason


def summarize(runs: List[Dict], top: int) -> Dict:
    """Counts per file and overall, and failure reasons grouped, most frequent first."""
    per_file, reasons = {}, collections.Counter()
    total = collections.Counter()
    for run in runs:
        counts = collections.Counter()
        for record in run["records"]:
            outcome = record["outcome"]
            if outcome == "sampled_out":
                continue
            if outcome == "collect_error":
                outcome = "failed"
            if outcome == "deselected":  # no interpreter mark: Triton does not run it there
                outcome = "not_interpreted"
            counts[outcome] += 1
            if outcome == "failed":
                reason = record.get("reason") or "unknown"
                reasons[_reason_key(reason)] += 1
        per_file[run["file"]] = dict(counts, seconds=round(run["seconds"], 1))
        total.update(counts)
    ran = total["passed"] + total["failed"]
    return {"per_file": per_file, "total": dict(total),
            "rate": (total["passed"] / ran) if ran else 0.0,
            "reasons": reasons.most_common(top)}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tests", help="folder with Triton's test files (see the docstring)")
    parser.add_argument("--files", nargs="*", help="test files to run (default: every test_*.py)")
    parser.add_argument("--sample", type=int, default=1, help="run every Nth case only")
    parser.add_argument("--offset", type=int, default=0, help="which of the N (0..N-1)")
    parser.add_argument("-k", help="pytest -k expression")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test case")
    parser.add_argument("--file-timeout", type=int, default=3600, help="seconds per file")
    parser.add_argument("--top", type=int, default=25, help="failure reasons to list")
    parser.add_argument("--unmarked", action="store_true",
                        help="run the cases without Triton's interpreter mark too (files such "
                        "as test_compile_errors.py mark none, yet run on a CPU)")
    parser.add_argument("--json", help="write the summary and every case's outcome here")
    parser.add_argument("--keep", help="keep the rewritten copy in this folder")
    args = parser.parse_args(argv)
    try:
        import pytest_timeout  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "pytest-timeout"], check=True)

    work_dir = args.keep or tempfile.mkdtemp(prefix="tessera-triton-suite-")
    if args.keep and os.path.exists(os.path.join(work_dir, "tests")):
        shutil.rmtree(os.path.join(work_dir, "tests"))
    os.makedirs(work_dir, exist_ok=True)
    test_dir = prepare(os.path.abspath(args.tests), work_dir)
    files = args.files or sorted(f for f in os.listdir(test_dir)
                                 if f.startswith("test_") and f.endswith(".py"))
    runs = []
    for name in files:
        run = run_file(test_dir, work_dir, name, args)
        runs.append(run)
        counts = summarize([run], 0)["per_file"][name]
        print(f"{name}: {counts}", flush=True)
        if not run["records"]:
            print(run["tail"], flush=True)
    summary = summarize(runs, args.top)
    total = summary["total"]
    print(f"\nTOTAL passed={total.get('passed', 0)} failed={total.get('failed', 0)} "
          f"skipped={total.get('skipped', 0)} not_interpreted={total.get('not_interpreted', 0)} "
          f"rate={summary['rate']:.1%}"
          + (f" (every {args.sample}th case, offset {args.offset})" if args.sample > 1 else ""))
    print("\nTop failure reasons:")
    for reason, count in summary["reasons"]:
        print(f"{count:6d}  {reason}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "runs": runs}, f, indent=1)
    if not args.keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
