"""Products in flight across loop iterations (knobs.wgmma_pipeline, sm_90a;
docs/perf/wgmma_across_iterations.md) on the GPU: every config of tessera.ops.matmul and the
attention forward and backward at their default configs, with the knob on and off, against
float64 on ragged shapes; outputs poisoned (NaN) first, fresh random inputs. Not timed
(benchmarks/matmul.py, with TESSERA_WGMMA_PIPELINE=0 and 1, measures).

Each case compiles a fresh @jit of the library's kernel under the knob: a kernel already
launched keeps the code it was compiled with (the knob is read at compile time)."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera  # noqa: E402
import tessera.ops.flash_attention as fa  # noqa: E402
from tessera.config import knobs  # noqa: E402
from tessera.ops import gemm  # noqa: E402
from tessera.ops.flash_attention import backward as fa_backward  # noqa: E402
from tessera.testing import relative_error  # noqa: E402

PIPELINE = pytest.mark.parametrize("pipeline", [False, True], ids=["drains", "in-flight"])
CONFIG_IDS = ["{BLOCK_M}x{BLOCK_N}x{BLOCK_K}".format(**c.kwargs) + f"-w{c.num_warps}"
              f"-s{c.num_stages}" for c in gemm.CONFIGS]


def fresh(kernel):
    """A new @jit of the kernel's function: compiled anew under the current knobs."""
    return tessera.jit(kernel.fn)


def run_matmul(config, M, N, K, dtype, pipeline: bool, seed: int):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn((M, K), device="cuda", generator=gen).to(dtype)
    b = torch.randn((K, N), device="cuda", generator=gen).to(dtype)
    bias = torch.randn(N, device="cuda", generator=gen).to(dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    meta = config.kwargs
    grid = (tessera.cdiv(M, meta["BLOCK_M"]) * tessera.cdiv(N, meta["BLOCK_N"]),)
    with knobs.scope(wgmma_pipeline=pipeline):
        fresh(gemm.matmul_kernel)[grid](a, b, c, bias, M, N, K, *a.stride(), *b.stride(),
                                        *c.stride(), HAS_BIAS=True, ACTIVATION="leaky_relu",
                                        num_warps=config.num_warps,
                                        num_stages=config.num_stages, **meta)
    ref = a.double() @ b.double() + bias.double()
    ref = torch.where(ref >= 0, ref, 0.01 * ref)
    return relative_error(c.double().cpu().numpy(), ref.cpu().numpy())


# (777, 1030, 1024): the pipelined rings with ragged M and N; (1000, 520, 333): K ragged and
# A's rows not 16-byte aligned (A staged at every step, the copies-first order kept).
@PIPELINE
@pytest.mark.parametrize("shape", [(777, 1030, 1024), (1000, 520, 333)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("config", gemm.CONFIGS, ids=CONFIG_IDS)
def test_matmul_configs_match_float64(config, shape, pipeline):
    error = run_matmul(config, *shape, torch.float16, pipeline, seed=sum(shape))
    assert error < 5e-3, (shape, error)


@PIPELINE
def test_matmul_bf16_many_steps(pipeline):
    # 64 steps of K: the ring wraps around many times with a product always in flight.
    error = run_matmul(gemm.CONFIGS[6], 384, 640, 4096, torch.bfloat16, pipeline, seed=7)
    assert error < 1e-2, error


def attention_kernels():
    """Fresh @jit copies of the forward, delta and backward kernels (compiled anew)."""
    return (fresh(fa.attention_fwd_kernel), fresh(fa_backward.attention_bwd_preprocess_kernel),
            fresh(fa.attention_bwd_dkdv_kernel), fresh(fa.attention_bwd_dq_kernel))


def strides(x) -> tuple:
    return tuple(x.stride())[:3]


def run_attention(B, H, S, D, causal, dtype, pipeline: bool, seed: int):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, do = (torch.randn((B, H, S, D), device="cuda", generator=gen).to(dtype)
                   for _ in range(4))
    o, dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(4))
    lse, delta = (torch.full((B, H, S), float("nan"), device="cuda") for _ in range(2))
    scale = D ** -0.5
    st = (*strides(q), *strides(k), *strides(v), *strides(do))
    with knobs.scope(wgmma_pipeline=pipeline):
        forward, preprocess, dkdv, dq_kernel = attention_kernels()
        bm, bn, warps, stages = fa.config("fwd", q, "sm_90a")
        forward[(tessera.cdiv(S, bm), B * H)](
            q, k, v, o, lse, scale * fa.LOG2E, H, S, *st[:9], *strides(o), D=D, BLOCK_M=bm,
            BLOCK_N=bn, CAUSAL=causal, RELOAD=fa.reload_tiles(q), num_warps=warps,
            num_stages=stages)
        block = fa.preprocess_block(D)
        preprocess[(tessera.cdiv(S, block), B * H)](o, do, delta, H, S, *strides(o),
                                                    *strides(do), D=D, BLOCK_M=block,
                                                    num_warps=4)
        bm, bn, warps, stages = fa.config("dkdv", q, "sm_90a")
        dkdv[(tessera.cdiv(S, bn), B * H)](
            q, k, v, do, dk, dv, lse, delta, scale, scale * fa.LOG2E, H, S, *st, *strides(dk),
            *strides(dv), D=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
            RELOAD=fa.reload_tiles(q), num_warps=warps, num_stages=stages)
        bm, bn, warps, stages = fa.config("dq", q, "sm_90a")
        dq_kernel[(tessera.cdiv(S, bm), B * H)](
            q, k, v, do, dq, lse, delta, scale, scale * fa.LOG2E, H, S, *st, *strides(dq),
            D=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, RELOAD=fa.reload_tiles(q),
            num_warps=warps, num_stages=stages)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    scores = q64 @ k64.transpose(-1, -2) * scale
    if causal:
        keep = torch.ones((S, S), dtype=torch.bool, device="cuda").tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    ref_o = torch.softmax(scores, dim=-1) @ v64
    refs = torch.autograd.grad(ref_o, (q64, k64, v64), do.double())
    got = {"o": (o, ref_o.detach()), "dq": (dq, refs[0]), "dk": (dk, refs[1]),
           "dv": (dv, refs[2])}
    return {name: relative_error(x.double().cpu().numpy(), r.cpu().numpy())
            for name, (x, r) in got.items()}


@PIPELINE
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
def test_attention_matches_float64(D, causal, pipeline):
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the knob changes sm_90a code only")
    errors = run_attention(2, 3, 1000, D, causal, torch.float16, pipeline, seed=D + causal)
    assert errors["o"] < 5e-3 and max(errors.values()) < 1e-2, errors
