"""On the GPU: loads vectorised by tl.multiple_of / max_contiguous / max_constancy read the
right elements (inputs that satisfy the hints, ragged sizes), tl.debug_barrier orders a
program's global writes and reads (bar.sync also orders global memory within a block), and
early returns in kernels and helpers, against NumPy.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera
import tessera.language as tl


@tessera.jit
def hinted_gather(x_ptr, idx_ptr, rows_ptr, y_ptr, n, limit, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    in_range = offs < n
    idx = tl.max_contiguous(tl.multiple_of(tl.load(idx_ptr + offs, mask=in_range, other=0), 4),
                            4)
    mask = tl.max_constancy(tl.load(rows_ptr + offs, mask=in_range, other=limit) < limit, 4)
    tl.store(y_ptr + offs, tl.load(x_ptr + idx, mask=mask, other=-1.0), mask=in_range)


@pytest.mark.parametrize("n", [4, 1000, 4096, 98304 + 12])
def test_hinted_gather(n):
    rng = np.random.default_rng(n)
    size = 4 * n
    x = rng.standard_normal(size).astype(np.float32)
    runs = n // 4  # n is a multiple of 4: every run of 4 lies in one hint run
    idx = (rng.integers(0, size // 4, runs)[:, None] * 4 + np.arange(4)).ravel().astype(np.int32)
    rows = np.repeat(rng.integers(0, 10, runs), 4).astype(np.int32)
    y = torch.full((n,), float("nan"), device="cuda")
    hinted_gather[(tessera.cdiv(n, 1024),)](torch.from_numpy(x).cuda(),
                                            torch.from_numpy(idx).cuda(),
                                            torch.from_numpy(rows).cuda(), y, n, 6, BLOCK=1024)
    np.testing.assert_array_equal(y.cpu().numpy(), np.where(rows < 6, x[idx], -1.0))


@tessera.jit
def reverse_through_memory(x_ptr, tmp_ptr, y_ptr, BLOCK: tl.constexpr):
    base = tl.program_id(0) * BLOCK
    offs = tl.arange(0, BLOCK)
    tl.store(tmp_ptr + base + offs, tl.load(x_ptr + base + offs) * 2)
    tl.debug_barrier()  # other threads' stores are visible after it
    tl.store(y_ptr + base + offs, tl.load(tmp_ptr + base + BLOCK - 1 - offs))


def test_debug_barrier():
    programs, block = 37, 1024
    x = torch.randn(programs * block, device="cuda")
    tmp, y = torch.zeros_like(x), torch.full_like(x, float("nan"))
    reverse_through_memory[(programs,)](x, tmp, y, BLOCK=block, num_warps=8)
    expected = (2 * x).reshape(programs, block).flip(1).reshape(-1)
    torch.testing.assert_close(y, expected, rtol=0, atol=0)


@tessera.jit
def clamp_low(v, lo):
    if v < lo:
        return lo + v * 0
    return v


@tessera.jit
def early_kernel(x_ptr, y_ptr, n, lo, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if pid % 3 == 1:
        tl.store(y_ptr + offs, -x, mask=offs < n)
        return
    tl.store(y_ptr + offs, x * clamp_low(tl.load(x_ptr + pid), lo), mask=offs < n)


@pytest.mark.parametrize("n", [1, 300, 5000, 100003])
def test_early_return(n):
    block = 256
    programs = tessera.cdiv(n, block) + 4  # the last 4 leave at once
    x = torch.randn(programs * block, device="cuda")
    y = torch.full_like(x, 9.0)
    early_kernel[(programs,)](x, y, n, 0.25, BLOCK=block)
    xs, expected = x.cpu().numpy(), np.full(programs * block, 9.0, np.float32)
    for pid in range(tessera.cdiv(n, block)):
        rows = slice(pid * block, min(n, (pid + 1) * block))
        scale = -1.0 if pid % 3 == 1 else max(xs[pid], np.float32(0.25))
        expected[rows] = xs[rows] * np.float32(scale)
    np.testing.assert_array_equal(y.cpu().numpy(), expected)
