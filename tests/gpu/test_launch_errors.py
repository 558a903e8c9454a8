"""On the GPU: a kernel parameter named ``grid`` given by keyword launches (the C++ fast path
once hot, the Python path for a new specialization), and a grid callable reading a key the
launch lacks says which, once the fast path has taken over too. Results against torch."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.launch_grid import GridKeyError  # noqa: E402


@tessera.jit
def add_grid(x_ptr, grid, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + grid, mask=mask)


def by_block(meta):
    return (tessera.cdiv(meta["n"], meta["BLOCK"]),)


def test_a_parameter_named_grid_by_keyword():
    n = 1000 + 13
    x = torch.randn(n, device="cuda")
    expected = x.double()
    for value in (1.5, 2.5, 3, 4):  # floats, then ints (a new specialization)
        add_grid[by_block](x, grid=value, n=n, BLOCK=256)
        expected += value
    torch.cuda.synchronize()
    torch.testing.assert_close(x.double(), expected, rtol=1e-6, atol=1e-5)


def test_a_grid_reading_a_missing_key_on_the_hot_fast_path():
    x = torch.zeros(300, device="cuda")
    for _ in range(3):
        add_grid[by_block](x, 1.0, 300, BLOCK=128)
    with pytest.raises(GridKeyError, match=r"add_grid: the grid callable reads META\['N'\].*"
                                           r": x_ptr, grid, n, BLOCK$"):
        add_grid[lambda meta: (meta["N"],)](x, 1.0, 300, BLOCK=128)
    torch.cuda.synchronize()
    torch.testing.assert_close(x, torch.full_like(x, 3.0))
