"""The real tuning backend (autotuner/backend.py) end to end without a GPU: the CUDA driver is
replaced by stand-ins that record module loads and launches, the compiler is real. Checks
that configs compiled by workers are loaded without compiling again in this process, that
the timer sees each config's own kernel, and that the final launch uses the best one."""
import os

import numpy as np
import pytest
import tessera
import tessera.compiler
import tessera.language as tl
from fakes import FAKE_H100
from tessera.runtime import driver, launcher


@tessera.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


class FakeModule:
    def __init__(self, image):
        self.image = image

    def function(self, name):
        return (name, self.image)


class FakeLauncher:
    launches = []

    def __init__(self, kinds, function, num_warps, shared_bytes):
        self.kinds, self.function, self.num_warps = kinds, function, num_warps

    def launch(self, grid, stream, args):
        FakeLauncher.launches.append((self.num_warps, tuple(grid)))


@pytest.fixture
def fake_gpu(monkeypatch):
    FakeLauncher.launches = []
    loaded = []
    monkeypatch.setattr(driver, "driver_available", lambda: (True, ""))
    monkeypatch.setattr(driver, "device_and_stream", lambda values: (0, 0))
    monkeypatch.setattr(driver, "get_device_properties", lambda device: FAKE_H100)
    monkeypatch.setattr(driver, "current_stream", lambda device, framework="torch": 0)
    monkeypatch.setattr(driver, "load_module",
                        lambda image, device: loaded.append(image) or FakeModule(image))
    monkeypatch.setattr(driver, "KernelLauncher", FakeLauncher)
    monkeypatch.setattr(launcher, "_device_and_framework", lambda k, names, values: (0, "numpy"))
    return loaded


def test_real_backend_compiles_in_workers_loads_once_and_launches_the_best(fake_gpu,
                                                                          monkeypatch):
    parent_compiles = []
    original = tessera.compiler.compile_kernel
    parent = os.getpid()

    def counting(*args, **kwargs):
        if os.getpid() == parent:          # workers are other processes: not counted here
            parent_compiles.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(tessera.compiler, "compile_kernel", counting)
    timed = []

    def fake_do_bench(fn, quantiles=None):
        before = len(FakeLauncher.launches)
        fn()
        num_warps, _ = FakeLauncher.launches[before]
        timed.append(num_warps)
        return [{1: 3.0, 2: 1.0, 4: 2.0}[num_warps], 0.0, 0.0]

    configs = [tessera.Config({"BLOCK": 256}, num_warps=w, num_stages=1) for w in (1, 2, 4)]
    kernel = tessera.autotune(configs=configs, key=["n"], do_bench=fake_do_bench)(add_kernel)
    x = np.ones(1000, dtype=np.float32)
    kernel[lambda meta: (tessera.cdiv(1000, meta["BLOCK"]),)](x, x, x, 1000)
    assert parent_compiles == []                     # compiled by the workers only
    assert sorted(timed) == [1, 2, 4]
    assert kernel.best_config.num_warps == 2
    assert FakeLauncher.launches[-1] == (2, (4,))    # the real launch: the best config
    assert len(fake_gpu) == 3                        # each config's module loaded once
    if tessera.compiler.ptxas.find_ptxas():
        assert all(image[:4] == b"\x7fELF" for image in fake_gpu)
    kernel[lambda meta: (tessera.cdiv(1000, meta["BLOCK"]),)](x, x, x, 1000)
    assert len(fake_gpu) == 3 and len(timed) == 3    # no new load, no new tuning
    target = kernel.backend.target(add_kernel, [x])
    assert (target.name, target.arch) == ("Fake H100", "sm_90a")
