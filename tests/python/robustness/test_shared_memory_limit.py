"""A kernel needing more shared memory than its target gives a block is refused when it is
compiled for that target (OutOfResources naming the kernel, the bytes and the limit), not only
by the driver at load; the autotuner takes such a config as one that does not fit."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "autotune"))
from fakes import FakeBackend  # noqa: E402

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.compiler import target_limits  # noqa: E402
from tessera.config import knobs  # noqa: E402
from tessera.errors import OutOfResources  # noqa: E402


def matmul_body(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


matmul = tessera.jit(matmul_body)
matmul_interpreted = tessera.jit(interpret=True)(matmul_body)


def operands(m, n, k, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    return a, b, np.full((m, n), np.nan, np.float32)


@pytest.mark.parametrize("arch, limit", [("sm_86", 101376), ("sm_89", 101376),
                                         ("sm_80", 166912)])
def test_too_much_shared_memory_for_the_target_is_out_of_resources(arch, limit):
    a, b, c = operands(256, 256, 256, 0)
    # 128x64 + 64x128 fp16 per stage, 4 stages: 128 KiB (the A100 takes it, 99 KiB parts not);
    # BM=BN=256: 256 KiB, over every limit.
    block = 128 if limit < 131072 else 256
    with pytest.raises(OutOfResources) as error:
        matmul.compile(a, b, c, 256, 256, 256, BM=block, BN=block, BK=64, num_stages=4,
                       arch=arch)
    assert error.value.limit == limit and error.value.required > limit
    assert f"shared memory (kernel 'matmul_body' on {arch})" in str(error.value)
    assert f"Hardware limit: {limit}" in str(error.value)


def test_a_kernel_within_the_limit_compiles_and_reports_its_shared_memory():
    a, b, c = operands(256, 256, 256, 0)
    compiled = matmul.compile(a, b, c, 256, 256, 256, BM=128, BN=128, BK=64, num_stages=4,
                              arch="sm_90a")
    assert 0 < compiled.metadata.shared <= target_limits.SHARED_MEMORY_LIMIT[90]


def test_limits_by_arch():
    assert target_limits.shared_memory_limit("sm_90a") == 232448
    assert target_limits.shared_memory_limit("sm_86") == 101376
    assert target_limits.shared_memory_limit("sm_80") == 166912
    target_limits.check_shared_memory("k", "sm_86", 101376)      # exactly the limit fits
    with pytest.raises(OutOfResources, match=r"Required: 101377, Hardware limit: 101376"):
        target_limits.check_shared_memory("k", "sm_86", 101377)


def test_the_autotuner_skips_a_config_that_does_not_fit_the_target(tmp_path):
    knobs.cache_dir = str(tmp_path)                # no tuning record of an earlier run
    knobs.autotune_progress = False
    configs = [tessera.Config({"BM": 128, "BN": 128, "BK": 128}, num_warps=4, num_stages=4),
               tessera.Config({"BM": 32, "BN": 32, "BK": 32}, num_warps=4, num_stages=1)]
    kernel = tessera.autotune(configs=configs, key=["M", "N", "K"])(matmul_interpreted)
    # 160 KiB of staged operands (K is a multiple of 16, so loads are pipelined): the fake
    # device's model (an H100's 227 KiB) takes it, the compile-time check for sm_86 must not.
    kernel.backend = FakeBackend(lambda c: 0.1 if c.kwargs["BM"] == 128 else 1.0, arch="sm_86")
    m, n, k = 70, 50, 256
    a, b, c = operands(m, n, k, 1)
    try:
        kernel[lambda meta: (tessera.cdiv(m, meta["BM"]), tessera.cdiv(n, meta["BN"]))](
            a, b, c, m, n, k)
    finally:
        knobs.reset()
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-2,
                               atol=2e-2)
    (config, reason), = kernel.failed_configs
    assert config.kwargs["BM"] == 128
    assert "OutOfResources" in reason and "kernel 'matmul_body' on sm_86" in reason
    assert kernel.best_config.kwargs["BM"] == 32
