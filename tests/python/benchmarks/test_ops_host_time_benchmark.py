"""benchmarks/ops_host_time.py without a GPU: the host/device timing of one function (CUDA
events and synchronize faked, the function's own host cost a known sleep), the host-bound
verdict and the table, and that it asks for a GPU."""
import time

import pytest

torch = pytest.importorskip("torch")

import benchmark_scripts  # noqa: E402


@pytest.fixture(scope="module")
def bench():
    return benchmark_scripts.load("ops_host_time")


class FakeCuda:
    """torch.cuda's events and synchronize: the device time of a batch is `device_ms` per
    recorded call (counted by the timed function)."""

    def __init__(self, device_ms):
        self.device_ms, self.calls = device_ms, 0
        outer = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                self.at = outer.calls

            def elapsed_time(self, end):
                return (end.at - self.at) * outer.device_ms

        self.Event = Event

    def synchronize(self):
        pass


def test_host_and_device_times_per_call(bench, monkeypatch):
    cuda = FakeCuda(device_ms=0.05)
    monkeypatch.setattr(torch, "cuda", cuda)

    def call():
        cuda.calls += 1
        time.sleep(0.002)  # 2 ms of host work per call

    times = bench.host_and_device_ms(torch, call, 10)
    assert 1.9 <= times["host_ms"] < 10
    assert times["device_ms"] == pytest.approx(0.05)
    assert cuda.calls == 21  # one warm-up call, then two batches


def test_table_says_which_bound(bench):
    rows = [{"case": "host-bound op", "tessera": {"host_ms": 0.3, "device_ms": 0.1},
             "torch": {"host_ms": 0.05, "device_ms": 0.1}},
            {"case": "device-bound op", "tessera": {"host_ms": 0.1, "device_ms": 2.0},
             "torch": {"host_ms": 0.1, "device_ms": 2.1}}]
    lines = bench.table(rows).splitlines()
    assert lines[1].startswith("host-bound op") and lines[1].endswith("host")
    assert "6.00" in lines[1]  # host time over torch's
    assert lines[2].endswith("device") and "1.00" in lines[2]


def test_needs_a_gpu(bench, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        bench.main(["--calls", "3"])
