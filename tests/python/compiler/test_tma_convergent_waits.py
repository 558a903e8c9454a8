"""Where ptxas serializes a kernel's wgmma for a dependency barrier it must place in a divergent
path (C7518), compile_kernel generates it again with `tma_convergent_waits`: the issuing
thread's wait for a ring slot's release (a path the other threads skip) is waited by every
thread instead. Measured: the attention dK/dV kernel with ATOMIC_DQ on the TMA path (D = 64)
had every wgmma serialized and ran at 0.83x of the two-kernel backward on an H200; with the
waits convergent, 1.01x (docs/perf/attention_tma.md).

Since the wgmma order mark (test_wgmma_order_mark.py) ptxas no longer serializes that kernel:
the wait it injected for the -lse accumulator was the dependency barrier it then found in the
divergent path. Checked here on the CPU: a kernel ptxas reports serialized (its verdict
stood in for) is generated again with convergent waits, which its compiled IR records; the
fused dQ kernel at every D = 64 candidate is not serialized, nor spills; a kernel ptxas did
not serialize (the same kernel without ATOMIC_DQ) is generated once, with the issuer's wait
alone.
"""
import numpy as np
import pytest
import tessera.ops.flash_attention as fa
from tessera.compiler import ptxas
from tessera.config import knobs
from tessera.ops.flash_attention import backward as bwd


def compile_dkdv(config, atomic: bool, D=64, S=1024, H=2):
    x = np.zeros((1, H, S, D), np.float16)
    lse = np.zeros((1, H, S), np.float32)
    acc = np.zeros((1, H, S, D), np.float32) if atomic else None
    st = tuple(s // x.itemsize for s in x.strides[:3])
    block_m, block_n, num_warps, num_stages = config
    with knobs.scope(attention_tma="on", always_compile=True):  # no kernel from the cache
        return bwd.attention_bwd_dkdv_kernel.compile(
            x, x, x, x, x, x, lse, lse, 0.125, 0.125 * fa.LOG2E, H, S, *st * 6, D=D,
            BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=False, RELOAD=False, TMA=True,
            dq_acc_ptr=acc, ATOMIC_DQ=atomic, num_warps=num_warps, num_stages=num_stages,
            arch="sm_90a")


def test_a_serialized_kernel_is_generated_again_with_convergent_waits(monkeypatch):
    # ptxas's verdict stood in for (the kernel that showed it no longer does: the wgmma order
    # mark, test_wgmma_order_mark.py, removed the wait ptxas had put in the divergent path):
    # the first assembly "serialized", the retry not.
    from tessera.compiler import compiler
    verdicts = iter([True])
    monkeypatch.setattr(compiler, "_wgmma_serialized",
                        lambda assembled: assembled is not None and next(verdicts, False))
    kernel = compile_dkdv(fa.WGMMA_CONFIGS["dkdv"][64][0], atomic=True)
    assert "tma_convergent_waits = 1" in kernel.asm["tgir"]
    plain = compile_dkdv(fa.WGMMA_CONFIGS["dkdv"][64][0], atomic=True)
    assert "tma_convergent_waits" not in plain.asm["tgir"]


@pytest.mark.skipif(ptxas.find_ptxas() is None, reason="needs ptxas (its C7518 report)")
@pytest.mark.parametrize("config", fa.WGMMA_CONFIGS["dkdv"][64], ids=str)
def test_the_fused_dq_is_not_serialized(config):
    kernel = compile_dkdv(config, atomic=True)
    log = ptxas.assemble(kernel.asm["ptx"], "sm_90a").log
    assert "(C7518)" not in log and "Potential Performance Loss" not in log, log
    assert kernel.metadata["spill_stores"] == 0


@pytest.mark.skipif(ptxas.find_ptxas() is None, reason="needs ptxas (its C7518 report)")
def test_a_kernel_ptxas_did_not_serialize_keeps_the_issuers_wait():
    kernel = compile_dkdv(fa.WGMMA_CONFIGS["dkdv"][64][0], atomic=False)
    assert "tma_convergent_waits" not in kernel.asm["tgir"]
    assert "(C7518)" not in ptxas.assemble(kernel.asm["ptx"], "sm_90a").log
