"""A wgmma whose accumulator other instructions set up (the attention dK/dV step's S^T and
dP^T start from -lse and -delta) writes registers the same dot's wgmma wrote at the loop's
previous iteration. ptxas needs a wgmma.wait_group between the two to know that earlier
wgmma is done; without one it injected a wait for every group in flight before the dot
(`(C7517) warpgroup.wait is injected ... to allow use of registers defined by GMMA`), so the
dK and dV products the loop carries across its back edge finished before the next step's
S^T could start, in every dK/dV candidate. Codegen now emits `wgmma.wait_group N` there with
N = the groups in flight (it waits for none of them: the earlier wgmma's own wait retired
it). Checked here: no C7517 in any dK/dV candidate (both paths, D = 64 and 128, causal or
not), nor spills; the mark's N equals the groups codegen holds in flight (never fewer: it
would stall).
"""
import re

import pytest
import tessera.ops.flash_attention as fa
from tessera.compiler import ptxas
from tessera.config import knobs

from test_attention_bwd_tma import compile_bwd

pytestmark = pytest.mark.skipif(ptxas.find_ptxas() is None,
                                reason="needs ptxas (its C7517 report)")


@pytest.mark.parametrize("tma", ["on", "off"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_dkdv_candidates_keep_their_carried_products_in_flight(D, causal, tma):
    for config in fa.WGMMA_CONFIGS["dkdv"][D]:
        with knobs.scope(attention_tma=tma):
            kernel = compile_bwd("dkdv", D, "fp16", causal, config)
        log = ptxas.assemble(kernel.asm["ptx"], "sm_90a").log
        assert "(C7517)" not in log, (config, log)
        assert kernel.metadata["spill_stores"] == 0, config


def test_the_mark_waits_for_nothing():
    # The dK/dV loop carries two products (dV, dK) across its back edge: at the next step's
    # S^T the mark must keep both (wait_group 2), not retire them.
    with knobs.scope(attention_tma="on"):
        kernel = compile_bwd("dkdv", 64, "fp16", False, fa.WGMMA_CONFIGS["dkdv"][64][0])
    tgir, ptx = kernel.asm["tgir"], kernel.asm["ptx"]
    carried = re.findall(r"wgmma_carried = \[([\d, ]+)\]", tgir)
    assert carried and all(len(c.split(",")) == 2 for c in carried)
    fences = [m.start() for m in re.finditer(r"wgmma\.fence\.sync\.aligned", ptx)]
    marks = [int(n) for n in re.findall(
        r"wgmma\.wait_group\.sync\.aligned (\d+);\s*(?://[^\n]*\n\s*)*wgmma\.fence", ptx)]
    assert marks and max(marks) == 2 and len(marks) <= len(fences)
