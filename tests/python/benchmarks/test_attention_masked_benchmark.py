"""benchmarks/attention_masked.py without a GPU: its masks, the ratios it prints (against
FlexAttention, cuDNN and the dense op; sparse over all-live), the math-backend plausibility
note, the tables and the argument parsing, on synthetic rows."""

import pytest

torch = pytest.importorskip("torch")

import benchmark_scripts  # noqa: E402


@pytest.fixture(scope="module")
def bench():
    return benchmark_scripts.load("attention_masked")


def row(kind, ms, S=8192, D=128):
    return {"S": S, "D": D, "mask": kind, "ms": ms, "error": {}, "notes": {}, "table_ms": 0.01,
            "peak_mb": {name: {"fwd": 1.0, "fwd_bwd": 2.0} for name in ms}}


def test_masks_have_the_documented_structure(bench, monkeypatch):
    monkeypatch.setattr(bench, "DEVICE", "cpu")
    gen = torch.Generator().manual_seed(0)
    S = 1024
    assert bench.make_mask(torch, "dense", S, gen).all()
    doc = bench.make_mask(torch, "document", S, gen)[0, 0]
    assert doc[S // 8, S // 8] and not doc[S // 8, S // 8 - 1] and not doc[0, 1]
    window = bench.make_mask(torch, "window", S, gen)[0, 0]
    assert window[600, 89] and not window[600, 88]
    blocks = bench.make_mask(torch, "sparse10", S, gen)[0, 0].reshape(8, 128, 8, 128)
    assert (blocks.all(3).all(1) == blocks.any(3).any(1)).all()  # whole 128-blocks


def test_ratios_and_notes(bench, capsys):
    both = lambda f, b: {"fwd": f, "bwd": b}  # noqa: E731
    dense = row("dense", {"tessera": both(1.2, 3.0), "tessera_nobias": both(1.1, 2.8),
                          "dense": both(1.0, 2.5), "flex": both(1.5, 3.5),
                          "math": both(10.0, 20.0), "cudnn": both(12.0, 4.0)})
    sparse = row("sparse10", {"tessera": both(0.2, 0.4), "flex": both(0.3, 0.6)})
    bench.flag_slower_than_math(dense)
    assert "fwd slower than the math backend" in dense["notes"]["cudnn"]
    assert "tessera" not in dense["notes"]
    r = bench.ratios(dense)
    assert r["vs_flex"]["fwd"] == pytest.approx(0.8)
    assert r["vs_dense"]["bwd"] == pytest.approx(2.8 / 2.5)  # like for like: no bias
    assert r["bias_vs_dense"]["fwd"] == pytest.approx(1.2)
    assert bench.sparse_ratios([dense, sparse]) == [(8192, 128, pytest.approx(0.6 / 4.2))]
    bench.print_table([dense, sparse])
    out = capsys.readouterr().out
    assert "10%-live blocks take 0.14x of all-live" in out and "vs_flex 0.80" in out


def test_arguments(bench):
    args = bench.parse(["--quick", "--providers", "tessera,flex", "--json", "x.json"])
    assert args.quick and args.providers == ["tessera", "flex"] and args.json == "x.json"
    assert {kind for _, _, kind in bench.QUICK} == set(bench.MASKS)
