"""ops.matmul's persistent TMA family (ops/gemm_tma.py) without a GPU.

- The host rule: which inputs may take it (sm_90a, the knobs, fp16/bf16, tensor maps for A and
  B: row-major, or given as ``x.t()`` of a row-major tensor), and the prune hook that keeps
  each family's configs.
- ops.matmul with the TMA configs alone (TESSERA_MATMUL_TMA=on, the arch sm_90a as a static
  report sets it) through the interpreter: ragged M, N and K (K tails), bias and leaky ReLU,
  fp16 and bf16, A and B row-major or transposed, against float64; the custom op's gradients
  (its backward passes ``b.t()`` and ``a.t()``, which take the family transposed).
- Each TMA config compiled for sm_90a: TMA copies, rings made once outside the tile loop,
  ptxas without spills, shared memory within the SM's; the compiled IR (TMA rings, mbarriers,
  cross-tile prefetch) run in the interpreter, which faults on a broken mbarrier protocol,
  with fewer programs than tiles against float64.
- The pointer kernel launched through the tuned entry compiles to the PTX it has alone.
tests/gpu/test_matmul_tma.py runs the family on the GPU.
"""
import re

import ml_dtypes
import numpy as np
import pytest

from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.compiler.target_limits import shared_memory_limit
from tessera.config import knobs
from tessera.ops import gemm, gemm_tma, matmul
from tessera.report import static_arch
from tessera.testing import relative_error

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
BOUNDS = {"float16": 5e-3, "bfloat16": 1e-2}
CONFIG_IDS = [f"{c.kwargs['BLOCK_M']}x{c.kwargs['BLOCK_N']}x{c.kwargs['BLOCK_K']}"
              f"-w{c.num_warps}-s{c.num_stages}" for c in gemm.TMA_CONFIGS]


def aligned(shape, dtype, rng=None, offset_bytes=0):
    """A C-contiguous array whose data starts `offset_bytes` past a 64-byte boundary."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(nbytes + 128, np.uint8)
    start = -raw.__array_interface__["data"][0] % 64 + offset_bytes
    x = raw[start:start + nbytes].view(dtype).reshape(shape)
    if rng is not None:
        x[...] = rng.standard_normal(shape).astype(dtype)
    return x


def reference(a, b, bias, activation):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if bias is not None:
        ref = ref + bias.astype(np.float64)[None, :]
    if activation == "leaky_relu":
        ref = np.where(ref >= 0, ref, 0.01 * ref)
    return ref


@pytest.fixture
def hopper():
    """The launches' arch is sm_90a (as tessera.report's static arch), TMA configs only."""
    token = static_arch.set("sm_90a")
    try:
        with knobs.scope(interpret=True, matmul_tma="on", tma=True, wgmma=True):
            yield
    finally:
        static_arch.reset(token)


def test_host_rule():
    a = aligned((40, 64), np.float16)
    b = aligned((64, 24), np.float16)
    a_rows, b_rows = aligned((64, 40), np.float16), aligned((24, 64), np.float16)
    rule = gemm_tma.tma_rules
    with knobs.scope(tma=True, wgmma=True, matmul_tma="auto"):
        assert rule(a, b, arch="sm_90a") == (True, False, False)
        assert rule(a, b_rows.T, arch="sm_90a") == (True, False, True)  # b.t() of a (N, K)
        assert rule(a_rows.T, b, arch="sm_90a") == (True, True, False)  # a.t() of a (K, M)
        assert rule(a_rows.T, b_rows.T, arch="sm_90a") == (True, True, True)
        assert rule(a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16),
                    arch="sm_90a") == (True, False, False)
        refused = {
            "sm_80": (a, b, "sm_80"),
            "interpreter": (a, b, ""),
            "float32": (a.astype(np.float32), b.astype(np.float32), "sm_90a"),
            "mixed dtypes": (a, b.astype(ml_dtypes.bfloat16), "sm_90a"),
            "A strided both ways": (aligned((64, 80), np.float16)[:, ::2].T, b, "sm_90a"),
            "A transposed, rows of 2 * 36 bytes": (aligned((64, 36), np.float16).T,
                                                   aligned((64, 24), np.float16), "sm_90a"),
            "rows of 2 * 60 bytes": (aligned((40, 60), np.float16), aligned((60, 24),
                                                                           np.float16), "sm_90a"),
            "A misaligned": (aligned((40, 64), np.float16, offset_bytes=8), b, "sm_90a"),
            "B misaligned": (a, aligned((64, 24), np.float16, offset_bytes=2), "sm_90a"),
            "B strided columns": (a, aligned((64, 48), np.float16)[:, ::2], "sm_90a"),
            "empty K": (aligned((40, 0), np.float16), aligned((0, 24), np.float16), "sm_90a"),
        }
        for what, (x, y, arch) in refused.items():
            assert rule(x, y, arch=arch)[0] is False, what
    for knob in (dict(tma=False), dict(wgmma=False), dict(matmul_tma="off")):
        with knobs.scope(**knob):
            assert rule(a, b, arch="sm_90a")[0] is False, knob


def test_prune_hook_keeps_the_allowed_families():
    tuned = gemm.tuned_matmul_kernel
    families = {f: {gemm.family(c) for c in tuned.prune_configs(dict(FAMILIES=f), {})}
                for f in ("pointer", "pointer+tma", "tma")}
    assert families == {"pointer": {"pointer"}, "pointer+tma": {"pointer", "tma"},
                        "tma": {"tma"}}
    assert set(gemm.TMA_CONFIGS) | set(gemm.CONFIGS) == set(tuned.configs)
    assert {"FAMILIES", "A_TRANS", "B_TRANS", "NUM_SMS"} <= set(tuned.keys)


LAYOUTS = {"rows": (False, False), "b-t": (False, True), "a-t": (True, False),
           "both-t": (True, True)}


def operand(rows, cols, dtype, transposed, rng=None):
    """A (rows, cols) operand: row-major, or the transpose of a row-major (cols, rows)."""
    return aligned((cols, rows), dtype, rng).T if transposed else aligned((rows, cols), dtype,
                                                                          rng)


def ragged_shape(rng, a_trans=False):
    """M any (a multiple of 8 when A is given transposed: its rows are then M long), N and K
    multiples of 8 (16-byte rows) that no block divides, K with a tail."""
    m = 8 * int(rng.integers(16, 37)) | 8 if a_trans else int(rng.integers(130, 300))
    n = 8 * int(rng.integers(17, 40))
    k = 8 * int(rng.integers(9, 40)) | 8
    return m, n, k


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("epilogue", [("", False), ("leaky_relu", True)],
                         ids=["plain", "bias-leaky-relu"])
def test_tma_family_matches_float64(hopper, epilogue, layout, dtype_name):
    rng = np.random.default_rng()
    a_trans, b_trans = LAYOUTS[layout]
    m, n, k = ragged_shape(rng, a_trans)
    activation, with_bias = epilogue
    dtype = DTYPES[dtype_name]
    a, b = operand(m, k, dtype, a_trans, rng), operand(k, n, dtype, b_trans, rng)
    bias = rng.standard_normal(n).astype(dtype) if with_bias else None
    out = np.full((m, n), np.nan, dtype)
    assert matmul(a, b, bias, activation, out) is out
    assert gemm.family(gemm.tuned_matmul_kernel.best_config) == "tma"
    assert gemm.tuned_matmul_kernel.best_config.kwargs["BLOCK_M"] >= 128
    error = relative_error(out.astype(np.float64), reference(a, b, bias, activation))
    assert error < BOUNDS[dtype_name], (m, n, k, error)


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_custom_op_gradients(hopper, activation):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    gen = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 30)))
    a = torch.randn(136, 72, generator=gen).half().requires_grad_(True)  # 16-byte rows
    b = (torch.randn(72, 40, generator=gen) / 6).half().requires_grad_(True)
    bias = torch.randn(40, generator=gen).half().requires_grad_(True)
    dc = torch.randn(136, 40, generator=gen).half()
    matmul(a, b, bias, activation).backward(dc)
    # The forward, dA = dC bᵀ (B given as b.t()) and dB = aᵀ dC (A given as a.t()) took the
    # family.
    keys = {key[:7] for key in gemm.tuned_matmul_kernel.cache}
    assert {(136, 40, 72, "tma", 1, False, False), (136, 72, 40, "tma", 1, False, True),
            (72, 40, 136, "tma", 1, True, False)} <= keys
    leaves = [t.detach().double().requires_grad_(True) for t in (a, b, bias)]
    z = leaves[0] @ leaves[1] + leaves[2]
    (F.leaky_relu(z, 0.01) if activation else z).backward(dc.double())
    for name, got, ref in zip(("da", "db", "dbias"), (a.grad, b.grad, bias.grad), leaves):
        ref = ref.grad
        assert ((got.double() - ref).norm() / ref.norm()).item() < 5e-3, name


# ------------------------------------------------------------------ compiled for sm_90a

def strides(x) -> tuple:
    return tuple(s // x.itemsize for s in x.strides)


def compile_tma(config, a, b, c, bias, programs, layout):
    m, k = a.shape
    n = b.shape[1]
    with knobs.scope(tma=True, always_compile=True):
        return gemm.matmul_entry.compile(
            a, b, c, bias, m, n, k, *strides(a), *strides(b), *strides(c), HAS_BIAS=True,
            ACTIVATION="leaky_relu", FAMILIES="pointer+tma", NUM_SMS=programs,
            A_TRANS=LAYOUTS[layout][0], B_TRANS=LAYOUTS[layout][1], arch="sm_90a",
            num_warps=config.num_warps, num_stages=config.num_stages, **config.kwargs)


def operands(shape, layout, rng=None):
    m, n, k = shape
    a_trans, b_trans = LAYOUTS[layout]
    a, b = operand(m, k, np.float16, a_trans, rng), operand(k, n, np.float16, b_trans, rng)
    return a, b, np.full((m, n), np.nan, np.float16), aligned((n,), np.float16, rng)


@pytest.mark.parametrize("config", gemm.TMA_CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (1000, 520, 216)],
                         ids=["8192", "ragged"])
@pytest.mark.parametrize("layout", ["rows", "both-t"])
def test_tma_configs_compile_across_tiles_without_spills(config, shape, layout):
    kernel = compile_tma(config, *operands(shape, layout), 132, layout)
    ptx, tgir = kernel.asm["ptx"], kernel.asm["tgir"]
    assert "cp.async.bulk.tensor" in ptx and "flatten = 1" in tgir
    tile_loop = re.search(r"\n *(?:%\d+ = )?for [^\n]*\{flatten = 1\}", tgir).start()
    assert tgir.index("mbarrier_init") < tile_loop  # the rings live across tiles
    assert kernel.metadata["global_scratch_size"] == 256  # A's and B's maps, per program
    assert kernel.metadata["shared_bytes"] <= shared_memory_limit("sm_90a")
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0


@pytest.mark.parametrize("config", [gemm.TMA_CONFIGS[0], gemm.TMA_CONFIGS[-1]],
                         ids=[CONFIG_IDS[0], CONFIG_IDS[-1]])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_compiled_tma_kernel_runs_in_the_interpreter(config, layout):
    rng = np.random.default_rng()
    shape = ragged_shape(rng, LAYOUTS[layout][0])
    a, b, c, bias = operands(shape, layout, rng)
    programs = 3  # fewer than the tiles: each program walks several, the rings across them
    kernel = compile_tma(config, a, b, c, bias, programs, layout)
    m, n, k = shape
    interpreter.run(ir.parse_module(kernel.asm["tgir"]), grid=(programs,),
                    args=[a, b, c, bias, m, n, k, *strides(a), *strides(b), *strides(c)])
    error = relative_error(c.astype(np.float64), reference(a, b, bias, "leaky_relu"))
    assert error < BOUNDS["float16"], (shape, error)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_pointer_family_compiles_as_the_pointer_kernel_alone(arch):
    a = np.zeros((512, 512), np.float16)
    args = (a, a, a, a, 512, 512, 512, *strides(a) * 3)
    config = gemm.CONFIGS[-2]
    meta = dict(config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages,
                HAS_BIAS=True, ACTIVATION="leaky_relu", arch=arch)
    with knobs.scope(always_compile=True):
        alone = gemm.matmul_kernel.compile(*args, **meta).asm["ptx"]
        entry = gemm.matmul_entry.compile(*args, FAMILIES="pointer+tma", NUM_SMS=132,
                                          **meta).asm["ptx"]
    assert entry.replace("matmul_entry", "matmul_kernel") == alone


def test_a_config_launches_untuned(hopper):
    rng = np.random.default_rng()
    a, b = aligned((150, 72), np.float16, rng), aligned((72, 136), np.float16, rng)
    for config in (gemm.TMA_CONFIGS[-1], gemm.CONFIGS[0]):
        out = gemm.matmul_forward(a, b, config=config)
        assert relative_error(out.astype(np.float64), reference(a, b, None, "")) < 5e-3
    with pytest.raises(ValueError, match=r"matmul: config .* tma family, which these inputs "
                                         r"do not allow .* \(150, 72\) float16 strides \(2, 300"):
        gemm.matmul_forward(aligned((72, 300), np.float16)[:, ::2].T, b,
                            config=gemm.TMA_CONFIGS[0])
