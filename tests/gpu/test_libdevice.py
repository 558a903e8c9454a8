"""Every libdevice function on the GPU against the independent reference, on fresh random
inputs and special values (NaN, inf, -0, extremes), size not a multiple of the block.

One launch per signature runs all of its functions (tessera.testing.libdevice_cases). Results
must be within libdevice's documented accuracy (CUDA Math API, in ulp) plus the reference's
own error (libdevice_cases.gpu_tolerance): exact for the integer and bit functions, the
explicitly rounded operations (add_rz, div_ru, fma_rd, sqrt_rn, ...) and the conversions;
relative error for the fast_* approximations and rcp64h. Outputs are poisoned before launch.
"""
import importlib.util
import os
import secrets

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera  # noqa: E402
from tessera.testing import libdevice_cases as cases  # noqa: E402
from tessera.testing.libdevice_reference import describe, expected, mismatches  # noqa: E402

GROUPS = cases.groups()
HAVE_SCIPY = importlib.util.find_spec("scipy") is not None
N, BLOCK = 4099, 256  # 4099 = 16 * 256 + 3


def _device(array: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(array)).cuda()


@pytest.mark.parametrize("group", GROUPS, ids=[g.label for g in GROUPS])
def test_every_function_on_the_gpu(group):
    seed = int(os.environ.get("LIBDEVICE_TEST_SEED") or secrets.randbits(32))
    print(f"numpy seed: {seed}")
    rng = np.random.default_rng(seed)
    inputs = cases.make_inputs(group, N, rng)
    out = np.zeros((len(group.members), N), group.result)
    if group.result.kind == "f":
        out[:] = np.nan  # poisoned: a lane the kernel never writes fails
    elif group.result.kind in "iu":
        out[:] = np.iinfo(group.result).max - 7
    device_out = _device(out)
    cases.KERNELS[len(group.args)][(tessera.cdiv(N, BLOCK),)](
        *[_device(a) for a in inputs], device_out, N, NAMES=group.names, BLOCK=BLOCK)
    torch.cuda.synchronize()
    got = device_out.cpu().numpy()
    failures, unchecked = [], []
    for k, (name, signature) in enumerate(group.members):
        if name in cases.SCIPY_FUNCTIONS and not HAVE_SCIPY:
            unchecked.append(name)
            continue
        args = [a[k] for a in inputs]
        want = expected(name, signature, args)
        bad = mismatches(got[k], want, *cases.gpu_tolerance(name, signature))
        if len(bad):
            failures.append(describe(name, args, got[k], want, bad))
    assert not failures, "\n".join(failures)
    if unchecked:
        pytest.skip(f"SciPy is not installed: {', '.join(unchecked)} not checked")
