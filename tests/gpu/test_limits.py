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


@pytest.mark.parametrize("grid, said", [("ab", "got str 'ab'"),
                                        (lambda meta: None, "returned NoneType None")])
def test_a_grid_of_the_wrong_type_names_the_kernel(grid, said):
    x = torch.zeros(4, dtype=torch.int32, device="cuda")
    store_pid[(1, 2)](x)  # registered with the fast path: a bad grid must still be explained
    with pytest.raises(TypeError, match=f"store_pid: the grid must be an int or a tuple .*{said}"):
        store_pid[grid](x)


@tessera.jit
def staged_matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_too_much_shared_memory_is_out_of_resources_before_loading():
    # 256x128 + 128x256 fp16 per stage, 4 stages: 512 KiB, more than any GPU gives a block.
    from tessera.errors import OutOfResources
    a = torch.zeros((256, 512), dtype=torch.float16, device="cuda")
    b = torch.zeros((512, 256), dtype=torch.float16, device="cuda")
    c = torch.zeros((256, 256), dtype=torch.float32, device="cuda")
    with pytest.raises(OutOfResources, match=r"shared memory \(kernel 'staged_matmul' on sm_"):
        staged_matmul[(1,)](a, b, c, 512, BM=256, BN=256, BK=128, num_stages=4, num_warps=8)
