"""A name a kernel reads, rebound after the kernel ran (a notebook cell run again), gives the
new kernel on the GPU: the C++ fast path, hot after a few launches, notices the rebinding
(tl.constexpr global, dtype global, closure variable) and leaves the launch to the Python path,
which recompiles; a warmup between the two values stores each cubin under its own disk key.
Results against torch (float64) on ragged sizes."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.config import knobs  # noqa: E402

FACT = tl.constexpr(3.0)
DT = tl.float16


@tessera.jit
def scale_by_fact(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * FACT, mask=mask)


@tessera.jit
def round_trip(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(DT).to(tl.float32), mask=mask)


def closure_kernel():
    scale = tl.constexpr(3.0)

    @tessera.jit
    def scale_by_cell(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)

    def rebind(value):
        nonlocal scale
        scale = value
    return scale_by_cell, rebind


def set_global(name, value):
    globals()[name] = value


@pytest.fixture(autouse=True)
def restore():
    yield
    set_global("FACT", tl.constexpr(3.0))
    set_global("DT", tl.float16)


def launch(kernel, x):
    y = torch.empty_like(x)
    n = x.numel()
    kernel[(tessera.cdiv(n, 256),)](x, y, n, BLOCK=256)
    torch.cuda.synchronize()
    return y


def scaled(x, value):
    return (x.double() * value).float()


@pytest.mark.parametrize("case", ["constexpr global", "dtype global", "closure variable"])
def test_the_fast_path_serves_the_new_value(case):
    x = torch.randn(1000 + 37, device="cuda") * 100
    if case == "constexpr global":
        kernel, rebind = scale_by_fact, lambda v: set_global("FACT", v)
        values = [tl.constexpr(3.0), tl.constexpr(7.0), tl.constexpr(3.0)]
        reference = lambda v: scaled(x, v.value)  # noqa: E731
    elif case == "dtype global":
        kernel, rebind = round_trip, lambda v: set_global("DT", v)
        values = [tl.float16, tl.float32, tl.bfloat16]
        torch_dtype = {tl.float16: torch.float16, tl.float32: torch.float32,
                       tl.bfloat16: torch.bfloat16}
        reference = lambda v: x.to(torch_dtype[v]).float()  # noqa: E731
    else:
        kernel, rebind = closure_kernel()
        values = [tl.constexpr(3.0), tl.constexpr(7.0), tl.constexpr(3.0)]
        reference = lambda v: scaled(x, v.value)  # noqa: E731
    for value in values:
        rebind(value)
        for _ in range(3):  # the second and third launch take the C++ fast path
            torch.testing.assert_close(launch(kernel, x), reference(value), rtol=0, atol=0)


def test_warmup_then_launch_after_rebinding(tmp_path):
    knobs.cache_dir = str(tmp_path)  # a fresh disk cache: the launch below loads from it
    try:
        x = torch.randn(777, device="cuda")
        scale_by_fact.warmup(torch.float32, torch.float32, "i32", BLOCK=256, grid=(1,))
        set_global("FACT", tl.constexpr(7.0))
        scale_by_fact.warmup(torch.float32, torch.float32, "i32", BLOCK=256, grid=(1,))
        set_global("FACT", tl.constexpr(3.0))
        scale_by_fact._kernels.clear()  # as a fresh process: only the disk cache is left
        scale_by_fact._dispatch_clear()
        torch.testing.assert_close(launch(scale_by_fact, x), scaled(x, 3.0), rtol=0, atol=0)
    finally:
        knobs.reset("cache_dir")
