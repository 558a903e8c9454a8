"""Autotuning a kernel that takes TensorDescriptor arguments, with a fake device and timer
(fakes.py) and the real compiler in worker processes: the tuner sees the descriptors' base
tensors (not the descriptors) when it picks the device, every config compiles with the
descriptor specialization, and the chosen one computes the result (interpreted)."""
import numpy as np

import tessera
import tessera.language as tl
from fakes import FakeBackend
from tessera.tools.tensor_descriptor import TensorDescriptor


@tessera.jit(interpret=True)
def scale_kernel(x_desc, y_desc, factor, BM: tl.constexpr, BN: tl.constexpr):
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    y_desc.store([m, n], x_desc.load([m, n]) * factor)


class RecordingBackend(FakeBackend):
    def __init__(self, times):
        super().__init__(times)
        self.target_values = []

    def target(self, jit_fn, values):
        self.target_values.append(list(values))
        return super().target(jit_fn, values)


def test_tuning_with_descriptor_arguments():
    kernel = tessera.autotune(configs=[tessera.Config({}, num_warps=w) for w in (2, 4)],
                              key=["factor"])(scale_kernel)
    kernel.backend = RecordingBackend(lambda config: 1.0 / config.num_warps)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((37, 52)).astype(np.float32)
    y = np.full((37, 52), np.nan, np.float32)
    x_desc, y_desc = (TensorDescriptor.from_tensor(t, [16, 32]) for t in (x, y))
    kernel[(3, 2)](x_desc, y_desc, 3.0, BM=16, BN=32)
    np.testing.assert_array_equal(y, 3 * x)
    assert kernel.best_config.num_warps == 4
    assert len(kernel.backend.compiled) == 2 and kernel.failed_configs == []
    seen = kernel.backend.target_values[0]
    assert not any(isinstance(v, TensorDescriptor) for v in seen)
    assert seen[0] is x and seen[5] is y  # x's base, shape and strides, then y's
