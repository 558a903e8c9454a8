# Long interpreted launches show which program of the grid they are at; short ones stay silent.
import numpy as np
import tessera
import tessera.language as tl
from tessera.config import knobs
from tessera.interpreter import progress


@tessera.jit(interpret=True)
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


def _launch(n: int) -> None:
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    expected = x + 1
    add_one[(tessera.cdiv(n, 2),)](x, n, BLOCK=2)
    np.testing.assert_array_equal(x, expected)


def test_a_long_run_reports_progress(monkeypatch, capsys):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)  # every run counts as long
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
    with knobs.scope(interpret_progress=True):
        _launch(517)  # 259 programs
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].startswith("interpret add_one: program 259/259 (100%) ")
    assert lines[0].startswith("interpret add_one: program 64/259 (24%) ")


def test_short_runs_and_plain_streams_stay_silent(monkeypatch, capsys):
    with knobs.scope(interpret_progress=True):
        _launch(517)  # well under the 2 s delay
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    with knobs.scope(interpret_progress=None):  # unset: captured stderr is not a terminal
        _launch(517)
    assert capsys.readouterr().err == ""


def test_in_place_streams_redraw_one_line():
    import io
    stream = type("OutStream", (io.StringIO,), {"__module__": "ipykernel.iostream"})()
    with knobs.scope(interpret_progress=None):
        bar = progress.GridProgress("k", 1000, stream=stream)
    assert bar.enabled
    bar._next = 0.0
    bar.tick(500)
    bar.close(1000)
    text = stream.getvalue()
    assert text.startswith("\rinterpret k: program 500/1000 (50%) ")
    assert "\rinterpret k: program 1000/1000 (100%) " in text and text.endswith("s\n")
