"""Launch limits on the GPU say the same as the interpreter: a grid beyond CUDA's limits names
the kernel, the axis and the limit (not the driver's bare "invalid argument")."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera
import tessera.language as tl


@tessera.jit
def store_pid(x_ptr):
    tl.store(x_ptr + tl.program_id(1), tl.program_id(1))


@pytest.mark.parametrize("grid, message", [((1, 65536), "grid axis 1 has 65536 programs"),
                                           ((1, 1, 65536), "grid axis 2 has 65536 programs"),
                                           ((2 ** 31,), "grid axis 0 has 2147483648 programs")])
def test_grid_beyond_cuda_limits(grid, message):
    x = torch.zeros(4, dtype=torch.int32, device="cuda")
    store_pid[(1, 2)](x)  # compiled and registered with the fast path first
    with pytest.raises(Exception, match=message) as info:
        store_pid[grid](x)
    assert "store_pid" in str(info.value)
    store_pid[(1, 65535)](torch.zeros(65535, dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()
