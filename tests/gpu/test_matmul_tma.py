"""tessera.ops.matmul's persistent TMA family (ops/gemm_tma.py) on an sm_90a GPU: each TMA
config launched untuned (gemm.matmul_forward(config=...)) and ops.matmul with the TMA configs
alone (TESSERA_MATMUL_TMA=on, tuned among themselves), against torch float64: ragged M, N, K
(N and K multiples of 8, so rows stay 16-byte aligned, not of any block; K of one step, of
fewer steps than the ring and of many), fewer tiles than SMs and many tiles per SM, bias and
leaky ReLU, fp16 and bf16, A and B row-major or given as ``x.t()`` of a row-major tensor,
outputs poisoned first; inputs the family cannot take (columns strided, rows of 2 * 100
bytes) fall back to the pointer kernel; the custom op's backward (dA and dB take the family
through ``b.t()`` and ``a.t()``).
tests/python/ops/test_matmul_tma.py checks the same kernels without a GPU.

Bounds (docs/benchmarks.md): ‖out − ref‖ / ‖ref‖ < 5e-3 fp16, 1e-2 bf16.
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
if torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("the TMA family runs on sm_90a", allow_module_level=True)

from tessera.config import knobs  # noqa: E402
from tessera.ops import gemm, gemm_tma, matmul  # noqa: E402
from tessera.testing import relative_error  # noqa: E402

BOUNDS = {torch.float16: 5e-3, torch.bfloat16: 1e-2}
CONFIG_IDS = [f"{c.kwargs['BLOCK_M']}x{c.kwargs['BLOCK_N']}x{c.kwargs['BLOCK_K']}"
              f"-w{c.num_warps}-s{c.num_stages}" for c in gemm.TMA_CONFIGS]
# (M, N, K): one tile, K of one step; K of fewer steps than the ring; ragged everything with
# a K tail and more tiles than SMs (each program walks several: the rings across tiles). M is
# a multiple of 8 too, so that A given transposed keeps 16-byte rows.
SHAPES = [(104, 200, 40), (296, 264, 120), (1000, 1288, 648), (2504, 2056, 1032)]
LAYOUTS = {"rows": (False, False), "b-t": (False, True), "a-t": (True, False),
           "both-t": (True, True)}


def operand(rows, cols, dtype, transposed, gen):
    if transposed:  # x.t() of a row-major (cols, rows)
        return torch.randn((cols, rows), device="cuda", generator=gen).to(dtype).t()
    return torch.randn((rows, cols), device="cuda", generator=gen).to(dtype)


def operands(shape, dtype, layout, bias, seed):
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a_trans, b_trans = LAYOUTS[layout]
    a, b = operand(m, k, dtype, a_trans, gen), operand(k, n, dtype, b_trans, gen)
    c_bias = torch.randn(n, device="cuda", generator=gen).to(dtype) if bias else None
    return a, b, c_bias


def reference(a, b, bias, activation):
    ref = a.double() @ b.double()
    if bias is not None:
        ref = ref + bias.double()[None, :]
    if activation == "leaky_relu":
        ref = torch.where(ref >= 0, ref, 0.01 * ref)
    return ref


def check(out, a, b, bias, activation, what):
    error = relative_error(out.double().cpu().numpy(),
                           reference(a, b, bias, activation).cpu().numpy())
    assert error < BOUNDS[a.dtype], f"{what}: {error}"


@pytest.mark.parametrize("config", gemm.TMA_CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
@pytest.mark.parametrize("layout", ["rows", "both-t"])
def test_each_tma_config(config, shape, layout):
    seed = sum(shape) + len(layout)
    for dtype, activation in ((torch.float16, "leaky_relu"), (torch.bfloat16, "")):
        a, b, bias = operands(shape, dtype, layout, activation != "", seed)
        assert gemm_tma.tma_rules(a, b) == (True, *LAYOUTS[layout])
        out = torch.full(shape[:2], float("nan"), device="cuda", dtype=dtype)
        assert gemm.matmul_forward(a, b, bias, activation, out, config=config) is out
        check(out, a, b, bias, activation, f"{config} {shape} {dtype} {layout}")


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_ops_matmul_tuned_among_tma_configs(dtype, layout):
    shape = (1000, 1288, 648)
    a, b, bias = operands(shape, dtype, layout, True, 5 + len(layout))
    out = torch.full(shape[:2], float("nan"), device="cuda", dtype=dtype)
    with knobs.scope(matmul_tma="on"):
        assert matmul(a, b, bias, "leaky_relu", out) is out
    assert gemm.family(gemm.tuned_matmul_kernel.best_config) == "tma"
    check(out, a, b, bias, "leaky_relu", f"tuned {dtype} {layout}")


def test_inputs_the_family_cannot_take_run_the_pointer_kernel():
    gen = torch.Generator(device="cuda").manual_seed(9)
    strided = torch.randn((300, 1296), device="cuda", generator=gen).half()[:, ::2]
    b = torch.randn((648, 264), device="cuda", generator=gen).half()
    odd = torch.randn((300, 100), device="cuda", generator=gen).half()  # rows of 200 bytes
    b_odd = torch.randn((100, 264), device="cuda", generator=gen).half()
    with knobs.scope(matmul_tma="on"):
        for x, y in ((strided, b), (odd, b_odd)):
            assert gemm_tma.tma_rules(x, y)[0] is False
            out = matmul(x, y)
            assert gemm.family(gemm.tuned_matmul_kernel.best_config) == "pointer"
            check(out, x, y, None, "", f"fallback {tuple(x.stride())} {tuple(y.shape)}")


def test_custom_op_backward():
    gen = torch.Generator(device="cuda").manual_seed(11)
    a = torch.randn((520, 264), device="cuda", generator=gen).half().requires_grad_(True)
    b = (torch.randn((264, 392), device="cuda", generator=gen) / 16).half().requires_grad_(True)
    bias = torch.randn(392, device="cuda", generator=gen).half().requires_grad_(True)
    dc = torch.randn((520, 392), device="cuda", generator=gen).half()
    with knobs.scope(matmul_tma="on"):
        c = matmul(a, b, bias, "leaky_relu")
        c.backward(dc)
    leaves = [t.detach().double().requires_grad_(True) for t in (a, b, bias)]
    ref = reference(*leaves, "leaky_relu")
    ref.backward(dc.double())
    for name, got, want in (("c", c, ref), ("da", a.grad, leaves[0].grad),
                            ("db", b.grad, leaves[1].grad), ("dbias", bias.grad, leaves[2].grad)):
        error = ((got.double() - want.detach()).norm() / want.detach().norm()).item()
        assert error < 5e-3, f"{name}: {error}"
