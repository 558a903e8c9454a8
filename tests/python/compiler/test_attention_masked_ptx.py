"""tessera.ops' masked-attention kernels through every stage for sm_80 and sm_90a with the
default configs: products on tensor cores (wgmma on sm_90a), and the key/value (query) loads
pipelined into cp.async rings even though their addresses come from the live-block list (the
list's index is read ahead, predicated on the iteration being in range). The compiled,
pipelined IR run by the interpreter matches the library's result on a block-sparse mask."""
import re

import numpy as np
import pytest
import tessera
from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
import tessera.ops.flash_attention as fa
import tessera.ops.masked_attention as ma
from tessera.ops.masked_attention.blocks import launch_options, masked_candidates
from tessera.ops.masked_attention.forward import prepare

KERNELS = {"fwd": ma.attention_masked_fwd_kernel, "dkdv": ma.attention_masked_bwd_dkdv_kernel,
           "dq": ma.attention_masked_bwd_dq_kernel}
TENSOR_CORE = {"sm_80": r"mma\.sync\.aligned\.m16n8k16", "sm_90a": r"wgmma\.mma_async"}


def arguments(name, q, k, v, o, lse, delta, do, grads, mask, bias, dbias, causal, scale):
    """The runtime arguments attention_masked_forward / _backward pass for these arrays."""
    st = lambda x: tuple(s // x.itemsize for s in x.strides[:3])  # noqa: E731
    with tessera.config.knobs.scope(interpret=True):  # the live-block table, on the CPU
        mask_arg, bias_arg, lists, NQ, NK, lb, lh, bs, ms = prepare(q, k, mask, bias, causal,
                                                                  backward=True)
    H, Sq, Sk = q.shape[1], q.shape[2], k.shape[2]
    common = (H, H // k.shape[1], Sq, Sk, NQ, NK, lb, lh)
    if name == "fwd":
        return (q, k, v, bias_arg, mask_arg, o, lse, *lists[:2], scale * fa.LOG2E, *common,
                *st(q), *st(k), *st(v), *st(o), *bs, *ms)
    strides = (*st(q), *st(k), *st(v), *st(do))
    if name == "dkdv":
        db = tuple(0 if n == 1 else s // 4 for n, s in zip(dbias.shape, dbias.strides))
        return (q, k, v, do, grads[1], grads[2], lse, delta, bias_arg, mask_arg, dbias,
                *lists[2:], scale, scale * fa.LOG2E, *common, *strides, *st(grads[1]),
                *st(grads[2]), *bs, *ms, *db)
    return (q, k, v, do, grads[0], lse, delta, bias_arg, mask_arg, *lists[:2], scale,
            scale * fa.LOG2E, *common, *strides, *st(grads[0]), *bs, *ms)


def compile_masked(name, args, D, causal, arch, dbias_mode=0, bias_kind=ma.ROWS.value):
    options = launch_options(masked_candidates(name, args[0], arch)[0])
    extra = {"DBIAS": dbias_mode} if name == "dkdv" else {}
    return KERNELS[name].compile(*args, D=D, SUPER=ma.SUPER, CAUSAL=causal, HAS_MASK=True,
                                 HAS_BIAS=bias_kind, RELOAD=False, arch=arch, **options,
                                 **extra), (options["BLOCK_M"], options["BLOCK_N"])


def case(rng, S, D, H=2):
    q, k, v, do = (rng.standard_normal((1, H, S, D)).astype(np.float16) for _ in range(4))
    blocks = rng.random((2, 2)) < 0.6
    blocks[0, 0] = True
    mask = (np.repeat(np.repeat(blocks, 128, 0), 128, 1)[:S, :S]
            & (rng.random((S, S)) < 0.7))[None, None]
    bias = rng.standard_normal((1, H, 1, S)).astype(np.float16)
    return q, k, v, do, mask, bias


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("name", ["fwd", "dkdv", "dq"])
def test_on_tensor_cores_and_pipelined(name, D, arch):
    rng = np.random.default_rng(D)
    q, k, v, do, mask, bias = case(rng, 256, D)
    lse = np.zeros(q.shape[:3], np.float32)
    dbias = np.zeros(bias.shape, np.float32)
    args = arguments(name, q, k, v, q, lse, lse, do, (q, q, q), mask, bias, dbias, True, 0.1)
    kernel, _ = compile_masked(name, args, D, True, arch, dbias_mode=2)
    ptx = kernel.asm["ptx"]
    assert len(re.findall(TENSOR_CORE[arch], ptx)) > 0
    assert len(re.findall(r"cp\.async\.(ca|cg)", ptx)) > 0, "the loads were not pipelined"
    assert "not pipelined" not in kernel.asm.get("pipeline", "")
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    # The defaults spill nothing (MASKED_DEFAULTS: test_default_configs_resources.py has
    # every head dim, dtype and dBias mode).
    limit = 0
    assert 0 < kernel.metadata["registers"] and kernel.metadata["spill_stores"] <= limit, (
        kernel.metadata)


@pytest.mark.parametrize("arch, D", [("sm_80", 64), ("sm_90a", 128)])
def test_compiled_ir_runs_in_the_interpreter(arch, D):
    # S = 208: two 128-blocks, the second crossing S; the mask leaves some blocks dead.
    rng = np.random.default_rng(1)
    S, scale = 208, 0.1
    q, k, v, do, mask, bias = case(rng, S, D)
    with tessera.config.knobs.scope(interpret=True):
        o_ref, lse_ref = ma.attention_masked_forward(q, k, v, mask, bias, False, scale)
        grads_ref = ma.attention_masked_backward(q, k, v, o_ref, lse_ref, do, mask, bias, False,
                                                 scale, bias_grad=True)
    o = np.full_like(q, np.nan)
    lse = np.full(q.shape[:3], np.nan, np.float32)
    grads = [np.full_like(q, np.nan) for _ in range(3)]
    dbias = np.zeros(bias.shape, np.float32)
    delta = (o_ref.astype(np.float32) * do.astype(np.float32)).sum(-1)
    for name in ("fwd", "dkdv", "dq"):
        args = arguments(name, q, k, v, o, lse, delta, do, grads, mask, bias, dbias, False,
                         scale)
        kernel, (block_m, block_n) = compile_masked(name, args, D, False, arch, dbias_mode=2)
        block = block_n if name == "dkdv" else block_m
        interpreter.run(ir.parse_module(kernel.asm["tgir"]), grid=(-(-S // block), 2),
                        args=list(args))
    for got, ref in ((o, o_ref), (lse, lse_ref), *zip(grads, grads_ref[:3]),
                     (dbias, grads_ref[3])):
        got, ref = got.astype(np.float64), ref.astype(np.float64)
        assert np.linalg.norm(got - ref) <= 2e-2 * np.linalg.norm(ref)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_live_block_table_kernel_compiles_without_spills(arch):
    mask = np.zeros((1, 1, 300, 300), np.uint8)
    table = np.zeros((1, 3, 3), np.int32)
    kernel = ma.mask_blocks_kernel.compile(mask, table, 1, 300, 300, 3, 3, 0, 0, 300, 1,
                                           HAS_MASK=True, CAUSAL=True, SUPER=ma.SUPER,
                                           CHUNK=32, num_warps=4, arch=arch)
    ptx = kernel.asm["ptx"]
    assert "ld.global" in ptx and "st.global" in ptx
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    assert kernel.metadata["spill_stores"] == 0

