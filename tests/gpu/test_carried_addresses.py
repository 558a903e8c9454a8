"""Each copy's address carried across loop iterations (knobs.carried_addresses: codegen without
loop strength reduction; docs/perf/triton_parity.md, matmul_autotune) on the GPU: every config
of tessera.ops.matmul on ragged shapes and the attention forward and backward at their default
configs, with the knob on, against float64; outputs poisoned (NaN) first, fresh random inputs.
Not timed (benchmarks/triton_compat.py and benchmarks/matmul.py with
TESSERA_CARRIED_ADDRESSES=0 and 1 measure). The runs are test_wgmma_pipeline.py's, which
compile a fresh @jit of each kernel under the knobs."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from tessera.config import knobs  # noqa: E402
from tessera.ops import gemm  # noqa: E402

from test_wgmma_pipeline import CONFIG_IDS, run_attention, run_matmul  # noqa: E402


@pytest.mark.parametrize("shape", [(777, 1030, 1024), (1000, 520, 333)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("config", gemm.CONFIGS, ids=CONFIG_IDS)
def test_matmul_configs_match_float64(config, shape):
    with knobs.scope(carried_addresses=True):
        error = run_matmul(config, *shape, torch.float16, True, seed=sum(shape) + 1)
    assert error < 5e-3, (shape, error)


def test_matmul_bf16_many_steps():
    # 64 steps of K: every carried address advanced 63 times.
    with knobs.scope(carried_addresses=True):
        error = run_matmul(gemm.CONFIGS[4], 384, 640, 4096, torch.bfloat16, True, seed=8)
    assert error < 1e-2, error


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
def test_attention_matches_float64(D, causal):
    with knobs.scope(carried_addresses=True):
        errors = run_attention(2, 3, 1000, D, causal, torch.float16, True,
                               seed=D + causal + 1)
    assert errors["o"] < 5e-3 and max(errors.values()) < 1e-2, errors
