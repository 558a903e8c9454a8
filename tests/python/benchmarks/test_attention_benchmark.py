"""benchmarks/attention.py without a GPU: FLOP counts, the sweeps' cases, argument parsing, the
float64 reference (against PyTorch autograd), the kernels from tessera.ops,
the check-then-time path of every provider (Tessera's wrappers through the interpreter, do_bench
faked), and the tables, JSON and plot made from synthetic results."""
import json
import math
import os
import sys

import pytest
import tessera

torch = pytest.importorskip("torch")

import benchmark_scripts  # noqa: E402

ROOT = benchmark_scripts.ROOT


@pytest.fixture(scope="module")
def bench():
    return benchmark_scripts.load("attention")


@pytest.fixture
def on_cpu(bench, monkeypatch):
    """The measuring path on the CPU: inputs on "cpu", Tessera through the interpreter,
    do_bench replaced by a fixed 2 ms, no CUDA synchronization."""
    monkeypatch.setattr(bench, "DEVICE", "cpu")
    monkeypatch.setattr(tessera.testing, "do_bench", lambda fn, return_mode="mean", **kwargs:
                        (fn(), [2.0, 4.0] if return_mode == "all" else 2.0)[1])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    # A scope: monkeypatching the knob would leave an override of False behind for later tests.
    with tessera.config.knobs.scope(interpret=True):
        yield bench


def test_flops_count_the_products(bench):
    B, H, S, D = 1, 16, 16384, 128
    per_product = 2 * S * S * D  # (S x D)(D x S) and (S x S)(S x D): S²·D multiply-adds each
    assert bench.attention_flops(B, H, S, D, False) == 2 ** 41 == B * H * 2 * per_product
    assert bench.attention_flops(B, H, S, D, True) == 2 ** 40
    assert bench.attention_flops(B, H, S, D, False, "bwd") == 2.5 * 2 ** 41
    assert bench.attention_flops(2, 3, 100, 64, True, "fwd_bwd") == 3.5 * 2 * 3 * 100 ** 2 * 64 * 2


def test_fa3_cases_follow_the_paper_sizing(bench):
    cases = bench.fa3_cases(quick=False)
    keys = {(c["S"], c["D"], c["causal"], c["dtype"]) for c in cases}
    assert len(cases) == len(keys) == 6 * 3 * 2 * 2
    assert {c["S"] for c in cases} == {512, 1024, 2048, 4096, 8192, 16384}
    assert {c["D"] for c in cases} == {64, 128, 256}
    assert {c["dtype"] for c in cases} == {"float16", "bfloat16"}
    assert all(c["B"] * c["S"] == 16384 and c["H"] * c["D"] == 2048 for c in cases)
    quick = bench.fa3_cases(quick=True)
    assert 0 < len(quick) <= 8 and all(c in cases for c in quick)


def test_cs336_cases(bench):
    cases = bench.cs336_cases(quick=False)
    assert len(cases) == 10 * 4 * 2
    assert sorted({c["S"] for c in cases}) == [2 ** i for i in range(7, 17)]
    assert sorted({c["D"] for c in cases}) == [16, 32, 64, 128]
    assert {c["dtype"] for c in cases} == {"bfloat16", "float32"}
    assert all(c["B"] == c["H"] == 1 and c["causal"] for c in cases)
    quick = bench.cs336_cases(quick=True)
    assert len(quick) <= 8 and all(c in cases for c in quick)
    assert any(c["S"] == 65536 for c in quick)  # the memory check runs in the quick sweep too


def test_parse_args(bench):
    args = bench.parse_args([])
    assert (args.sweep, args.quick, args.json, args.plot, args.triton_tutorial) == \
        ("all", False, None, None, None)
    args = bench.parse_args(["--sweep", "cs336", "--quick", "--json", "o.json", "--plot",
                             "o.png", "--rep", "20"])
    assert (args.sweep, args.quick, args.json, args.plot, args.rep) == \
        ("cs336", True, "o.json", "o.png", 20.0)
    for bad in (["--sweep", "fa2"], ["--rep", "0"], ["--warmup", "-1"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("budget", [2 ** 26, 40])  # one block; blocks of 3 query rows
def test_reference_matches_autograd(bench, causal, budget):
    g = torch.Generator().manual_seed(0)
    B, H, S, D = 2, 3, 13, 8
    q, k, v, do = (torch.randn((B, H, S, D), generator=g, dtype=torch.float64)
                   for _ in range(4))
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    scores = leaves[0] @ leaves[1].transpose(-2, -1) / math.sqrt(D)
    if causal:
        scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), -math.inf)
    o = torch.softmax(scores, -1) @ leaves[2]
    expected = (o, *torch.autograd.grad(o, leaves, do))
    got = bench.reference(q.float(), k.float(), v.float(), do.float(), causal, budget=budget)
    for name, a, e in zip(("o", "dq", "dk", "dv"), got, expected, strict=True):
        assert a.dtype == torch.float64
        torch.testing.assert_close(a, e.detach(), rtol=1e-6, atol=1e-6, msg=name)


def test_plain_attention_is_the_reference(bench):
    q, k, v = (torch.randn((1, 2, 37, 16), dtype=torch.float64) for _ in range(3))
    for causal in (False, True):
        o = bench.plain_attention(q, k, v, causal)
        ref = bench.reference(q, k, v, torch.zeros_like(q), causal)[0]
        assert bench.relative_error(o, ref) < 1e-12
    assert bench.relative_error(torch.full_like(o, math.nan), ref) == math.inf


def test_load_library_gives_the_ops(bench):
    import tessera.ops
    interpret = tessera.config.knobs.interpret
    api = bench.load_library()
    assert api.forward is tessera.ops.attention_forward
    assert api.backward is tessera.ops.attention_backward
    assert api.attention is tessera.ops.attention
    assert hasattr(torch.ops.tessera, "attention_forward")  # the custom ops are registered
    assert tessera.config.knobs.interpret == interpret and api.notes == []


def fake_providers(bench, api):
    def wrong(q, k, v, do, causal):  # 10% off in the forward and so in the gradients
        return bench.autograd_runner(lambda q, k, v: 1.1 * bench.plain_attention(q, k, v, causal),
                                     q, k, v, do)

    def unwritten(q, k, v, do, causal):  # an output the kernel never wrote
        return bench.Runner(lambda: torch.full_like(q, math.nan), None, None)

    def out_of_memory(q, k, v, do, causal):
        def forward():
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")
        return bench.Runner(forward, forward, forward)

    def unsupported(q, k, v, do, causal):
        raise ValueError("attention_forward: q must be (B, H, S, D) with D in (16, 32)")

    return {"tessera": lambda q, k, v, do, causal: bench.tessera_runner(api, q, k, v, do, causal),
            "plain": bench.make_providers(api, None)["plain"], "wrong": wrong,
            "unwritten": unwritten, "oom": out_of_memory, "unsupported": unsupported}


@pytest.mark.parametrize("causal", [False, True])
def test_measure_case_checks_before_timing(on_cpu, causal):
    bench = on_cpu
    api = bench.load_library()
    case = {"B": 1, "H": 2, "S": 70, "D": 16, "causal": causal, "dtype": "float16"}
    row = bench.measure_case(case, fake_providers(bench, api), timing=(1, 1))
    assert "reason" not in row, row.get("reason")
    res = row["results"]
    flops = bench.attention_flops(1, 2, 70, 16, causal)
    for provider in ("tessera", "plain") if api.backward else ("plain",):
        for p in bench.PASSES:
            assert res[provider][p]["status"] == "ok", (provider, p, res[provider][p])
            assert res[provider][p]["error"] < 5e-3
            assert res[provider][p]["tflops"] == pytest.approx(
                flops * bench.PASS_FLOPS[p] / 2.0 / 1e9)
    assert res["tessera"]["fwd"]["status"] == "ok"
    assert [res["wrong"][p]["status"] for p in bench.PASSES] == ["wrong"] * 3
    assert res["wrong"]["fwd"]["error"] == pytest.approx(0.1, rel=1e-2)
    assert res["unwritten"]["fwd"]["status"] == "wrong"
    assert res["unwritten"]["fwd"]["error"] == math.inf
    assert res["unwritten"]["bwd"]["status"] == "n/a"  # no backward: not a speed of nothing
    assert [res["oom"][p]["status"] for p in bench.PASSES] == ["OOM"] * 3
    assert [res["unsupported"][p]["status"] for p in bench.PASSES] == ["n/a"] * 3
    assert "D in (16, 32)" in res["unsupported"]["fwd"]["reason"]
    assert json.loads(json.dumps(bench.jsonable(row), allow_nan=False))["S"] == 70


def test_leaderboard_flow_without_graph_breaks(on_cpu, monkeypatch):
    """torch.compile(fullgraph=True) of tessera.ops.attention on (N, S, D) inputs, o.sum()
    backward, checked against the reference (aot_eager: the graph, without code generation)."""
    bench = on_cpu
    api = bench.load_library()
    monkeypatch.setattr(bench, "COMPILE_BACKEND", "aot_eager")
    result = bench.leaderboard(api, quick=True, shape=(2, 70, 16))
    assert result["status"] == "ok", result
    assert result["notes"] == []  # no graph break
    assert max(result["errors"].values()) < 1e-2
    assert (result["mean_ms"], result["runs"]) == (3.0, 2)


def synthetic_fa3_rows(bench):
    def ok(tflops, error=1e-3):
        return {"status": "ok", "ms": 1.0, "tflops": tflops, "error": error}
    row = {"dtype": "float16", "S": 4096, "D": 128, "causal": False, "results": {
        "tessera": {p: ok(300.0 * (i + 1)) for i, p in enumerate(bench.PASSES)},
        "flash": {p: ok(150.0) for p in bench.PASSES},
        "cudnn": {p: dict(ok(600.0, 0.5), status="wrong") for p in bench.PASSES},
        "efficient": {p: bench.failed("OOM", "CUDA out of memory") for p in bench.PASSES},
        "plain": {p: bench.failed("n/a", "No available kernel") for p in bench.PASSES}}}
    missing = {"dtype": "bfloat16", "S": 512, "D": 256, "causal": True, "results": {},
               "reason": "OutOfMemoryError: reference"}
    return [row, missing]


def table_rows(text):
    lines = text.splitlines()[1:]
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[1:]]


def test_fa3_table(bench):
    rows = synthetic_fa3_rows(bench)
    first, second = table_rows(bench.fa3_table(rows, "bwd"))
    assert (first["dtype"], first["S"], first["D"], first["causal"]) == \
        ("float16", "4096", "128", "False")
    assert (first["tessera"], first["flash"], first["cudnn"], first["efficient"],
            first["plain"], first["triton"]) == ("600.0", "150.0", "WRONG", "OOM", "n/a", "-")
    assert first["/flash"] == "4.00x" and first["/cudnn"] == "-"  # never a ratio to WRONG
    assert first["error"] == "1.0e-03"
    assert all(second[p] == "-" for p in bench.PROVIDERS)
    notes = bench.failure_notes(rows)
    assert "efficient OOM (3x): CUDA out of memory" in notes
    assert "case error (1x): OutOfMemoryError: reference" in notes


def test_cs336_table_and_leaderboard_line(bench):
    ok = {"status": "ok", "ms": 2.0, "error": 4e-3}
    row = {"dtype": "bfloat16", "S": 65536, "D": 128, "results": {
        "tessera": {"fwd": dict(ok, ms=0.5), "bwd": dict(ok, ms=1.5), "fwd_bwd": ok},
        "plain": {"fwd": dict(ok, ms=30.0), "bwd": bench.failed("OOM"),
                  "fwd_bwd": bench.failed("OOM")}},
        "memory": {"tessera": {"fwd": {"status": "ok", "bytes": 17 * 2 ** 20},
                               "fwd_bwd": {"status": "ok", "bytes": 65 * 2 ** 20}},
                   "plain": {"fwd": {"status": "ok", "bytes": 2 ** 35},
                             "fwd_bwd": {"status": "OOM", "bytes": None}}}}
    line = bench.cs336_table([row]).splitlines()[-1].split()
    assert line == ["bfloat16", "65536", "128", "0.500", "1.500", "2.000", "30.000", "OOM",
                    "OOM", "-", "17", "65", "32768", "OOM", "4.0e-03"]
    row["results"]["plain"]["fwd_bwd"] = dict(ok, ms=9.0)
    assert bench.cs336_table([row]).splitlines()[-1].split()[9] == "4.50x"
    text = bench.leaderboard_line({"status": "ok", "mean_ms": 10.728, "median_ms": 10.0,
                                   "error": 3e-3})
    assert "10.728 ms mean" in text and "0.50x" in text
    assert "n/a" in bench.leaderboard_line(bench.failed("n/a", "no attention yet"))


def test_print_report(bench, capsys):
    report = {"device": "a GPU", "torch": "2.11", "fa3": synthetic_fa3_rows(bench), "cs336": [],
              "leaderboard": bench.failed("n/a", "no attention yet"), "notes": ["a note"]}
    bench.print_report(report)
    text = capsys.readouterr().out
    for needle in ("attention fwd", "attention bwd", "attention fwd_bwd", "leaderboard",
                   "  a note", "efficient OOM (3x)"):
        assert needle in text


def test_json_stays_strict(bench):
    report = {"rows": [{"error": math.inf, "x": math.nan, "ok": 1.5, "t": (1, 2)}]}
    text = json.dumps(bench.jsonable(report), allow_nan=False)
    assert json.loads(text) == {"rows": [{"error": "inf", "x": "nan", "ok": 1.5, "t": [1, 2]}]}


def test_plot(bench, tmp_path):
    pytest.importorskip("matplotlib")
    rows = synthetic_fa3_rows(bench)
    rows.append(dict(rows[0], S=8192))
    path = tmp_path / "attention.png"
    bench.plot_fa3(rows, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 1000


def test_tma_ab_cases_and_table(bench):
    args = bench.parse_args(["--tma-ab", "--dtypes", "float16,bfloat16", "--quick"])
    assert args.tma_ab and args.dtypes == "float16,bfloat16"
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import attention_tma_ab as ab
    cases = ab.cases(False, ["float16", "bfloat16"])
    assert len(cases) == len(ab.CASES) * 4
    assert all(c["B"] * c["S"] == 16384 and c["H"] * c["D"] == 2048 for c in cases)
    row = dict(cases[0], tma_off_ms=2.0, tma_on_ms=1.6, tma_ws_ms=1.5, cudnn_ms=1.5,
               flash_ms=1.7, tma_off_tflops=100.0, tma_on_tflops=125.0, tma_ws_tflops=133.3,
               cudnn_tflops=133.3, flash_tflops=117.6)
    lines = ab.table([row]).splitlines()
    assert len(lines) == 3 and lines[0].count("|") == lines[1].count("|") == lines[2].count("|")
    assert "| 1.250x | 1.333x | 0.938x |" in lines[2]
    back = dict(cases[0], tma_off_ms=4.0, tma_on_ms=3.2, fused_dq_ms=2.0, cudnn_ms=3.0,
                tma_off_tflops=50.0, tma_on_tflops=62.5, fused_dq_tflops=100.0,
                cudnn_tflops=66.7)
    lines = ab.backward_table([back]).splitlines()
    assert len(lines) == 3 and lines[0].count("|") == lines[1].count("|") == lines[2].count("|")
    assert "| 1.250x | 1.600x | 0.938x | 1.500x |" in lines[2]
    assert set(ab.BACKWARD_VARIANTS) == {"tma_off", "tma_on", "fused_dq"}
    assert ab.BACKWARD_VARIANTS["fused_dq"][1] == {"atomic_dq": True}
