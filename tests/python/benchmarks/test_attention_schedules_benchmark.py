"""benchmarks/attention_schedules.py without a GPU: its cases name tiles of the head dims they
run (8-warp wgmma candidates of the forward, so the ping-pong applies), the schedules map to
the kernel's OVERLAP and the knob, the work formula, and the table's ratios."""
import pytest

import benchmark_scripts
import tessera.ops.flash_attention as fa
from tessera.config import knobs


@pytest.fixture(scope="module")
def bench():
    return benchmark_scripts.load("attention_schedules")


def test_every_case_has_tiles_among_the_forward_candidates(bench):
    for S, D, causal in (*bench.CASES, *bench.QUICK):
        assert bench.TILES[D]
        for tile in bench.TILES[D]:
            assert tile in fa.WGMMA_CONFIGS["fwd"][D] and tile[2] == 8
        labels = [bench.tile_label("plain", tile) for tile in bench.TILES[D]]
        assert len(set(labels)) == len(labels), labels  # one row per tile


def test_schedules_and_work(bench):
    assert [s[0] for s in bench.SCHEDULES] == ["plain", "carry", "overlap", "overlap+pingpong"]
    assert bench.SCHEDULES[0][1:] == (False, {}) and bench.SCHEDULES[3][1:] == (
        True, {"pingpong": True})
    for _name, _overlap, settings in bench.SCHEDULES:  # knobs that exist
        assert all(hasattr(knobs, knob) for knob in settings)
    # 4 B H S^2 D: two products of 2 S^2 D flops per head; causal halves it.
    assert bench.flops(4096, 128, False) == 4.0 * 4 * 16 * 4096 ** 2 * 128
    assert bench.flops(4096, 128, True) == bench.flops(4096, 128, False) / 2


def test_table_prints_each_schedule_with_its_ratio_and_the_notes(bench):
    row = {"S": 4096, "D": 128, "causal": False, "notes": ["overlap 128x64: WRONG"],
           "tflops": {"plain 128x128": 550.0, "cudnn": 600.0},
           "vs_cudnn": {"plain 128x128": 550.0 / 600.0, "cudnn": 1.0}}
    text = bench.table([row])
    assert "S=4096 D=128 causal=False" in text
    assert "plain 128x128" in text and "550.0" in text and "0.917" in text
    assert "note: overlap 128x64: WRONG" in text
