"""Cross-tile prefetch (transforms/pipeline/cross_tile.h) on an sm_90 GPU: the persistent
descriptor matmul of scripts/persistent_descriptor_matmul.py (Triton's persistent tutorial,
its tile loop `tl.range(..., flatten=True)`) launched with fewer programs than tiles, so each
program runs several tiles and the TMA copies of the next tile's first K steps are issued
during this tile's last steps and epilogue. Against float64 (‖out − ref‖ / ‖ref‖ < 5e-3) and
bitwise against the same kernel without `flatten` (every tile fills and drains its own ring:
the same data and wgmma order), fp16 (bf16 on the benchmark's config), ragged M, K of fewer
steps than the ring's distance and of one step, outputs poisoned first.
tests/python/compiler/test_cross_tile.py runs the same cases in the interpreter (which checks
the mbarrier protocol)."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
if torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("TMA needs sm_90", allow_module_level=True)

import tessera  # noqa: E402
from tessera.testing import relative_error  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import persistent_descriptor_matmul as pdm  # noqa: E402


@pytest.fixture(autouse=True)
def allocator():
    tessera.set_allocator(lambda size, alignment, stream:
                          torch.empty(size, device="cuda", dtype=torch.int8))
    yield
    from tessera.runtime.allocation import NullAllocator
    tessera.set_allocator(NullAllocator())


def run(a, b, meta, programs, flatten):
    c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=a.dtype)
    pdm.launch(a, b, c, meta, programs, flatten)
    torch.cuda.synchronize()
    return c


# fp16 on every config, bf16 on the benchmark's (each case compiles two kernels).
KINDS = [(meta, torch.float16) for meta in pdm.GPU_CONFIGS] + [(pdm.GPU_CONFIGS[0],
                                                                torch.bfloat16)]
KIND_IDS = [f"{name}-fp16" for name in pdm.GPU_CONFIG_IDS] + [f"{pdm.GPU_CONFIG_IDS[0]}-bf16"]


@pytest.mark.parametrize("case", pdm.CASES, ids=pdm.CASE_IDS)
@pytest.mark.parametrize("meta, dtype", KINDS, ids=KIND_IDS)
def test_copies_across_tiles_match_float64_and_per_tile_rings(meta, dtype, case):
    m, n, k, programs = case
    torch.manual_seed(m * 7 + n * 3 + k)
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(k, n, device="cuda").to(dtype)
    across = run(a, b, meta, programs, True)
    assert relative_error(across.double(), a.double() @ b.double()) < 5e-3
    assert torch.equal(across, run(a, b, meta, programs, False))
