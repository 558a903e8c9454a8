"""On the GPU: @jit functions passed as kernel arguments (alone or in a namedtuple with the
tensors they capture) are compile-time values, one compilation per function, the launch
repeated (the C++ fast path leaves such launches to Python); a cooperative grid launch is
refused clearly. Results against float64 references on ragged sizes."""
from collections import namedtuple

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402

Closure = namedtuple("Closure", ["fn", "captured"])
BLOCK = 256


@tessera.jit
def scale_by(x, a_ptr):
    return x * tl.load(a_ptr)


@tessera.jit
def shift_by(x, a_ptr):
    return x + tl.load(a_ptr)


@tessera.jit
def apply_closure(closure, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, closure.fn(x, *closure.captured), mask=mask)


def test_function_arguments_on_the_gpu():
    n = int(torch.randint(1, 5 * BLOCK, ()).item())
    x = torch.randn(n, device="cuda")
    a = torch.randn(1, device="cuda")
    for fn, reference in ((scale_by, x.double() * a.double()), (shift_by, x.double() + a.double()),
                          (scale_by, x.double() * a.double())):
        for _ in range(2):
            y = torch.zeros(n, device="cuda")
            apply_closure[(tessera.cdiv(n, BLOCK),)](Closure(fn, (a,)), x, y, n, BLOCK=BLOCK)
            torch.testing.assert_close(y.double(), reference, rtol=1e-6, atol=1e-6)


def test_a_cooperative_grid_is_refused_on_the_gpu():
    x = torch.randn(64, device="cuda")
    with pytest.raises(ValueError, match="launch_cooperative_grid=True: a cooperative grid"):
        apply_closure[(1,)](Closure(scale_by, (x,)), x, x, 64, BLOCK=BLOCK,
                            launch_cooperative_grid=True)
