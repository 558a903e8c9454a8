"""Block pointers and tensor descriptors on the GPU against torch float64: matmuls with ragged
M, N, K (block-pointer loads with boundary_check and zero padding, advanced in the loop;
host TensorDescriptor and device tl.make_tensor_descriptor), fp16 and fp32, pipelined and
not; NaN padding and bounds-checked stores; outputs poisoned first.

Bounds: ‖out − ref‖ / ‖ref‖ < 5e-3 fp16, 1e-5 fp32 ("ieee").
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera
import tessera.language as tl
from tessera.testing import relative_error
from tessera.tools.tensor_descriptor import TensorDescriptor

BOUNDS = {torch.float16: 5e-3, torch.float32: 1e-5}
SHAPES = [(256, 256, 256), (333, 271, 197), (70, 515, 40)]


@tessera.jit
def block_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                        PRECISION: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_block = tl.make_block_ptr(a_ptr, (M, K), (sam, sak), (pid_m * BM, 0), (BM, BK), (1, 0))
    b_block = tl.make_block_ptr(b_ptr, (K, N), (sbk, sbn), (0, pid_n * BN), (BK, BN), (1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_block, boundary_check=(0, 1), padding_option="zero")
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_block = tl.advance(a_block, (0, BK))
        b_block = b_block.advance((BK, 0))
    c_block = tl.make_block_ptr(c_ptr, (M, N), (scm, scn), (pid_m * BM, pid_n * BN), (BM, BN),
                                (1, 0))
    tl.store(c_block, acc.to(c_ptr.dtype.element_ty), boundary_check=(0, 1))


@tessera.jit
def descriptor_matmul_kernel(a_desc, b_desc, c_desc, BM: tl.constexpr, BN: tl.constexpr,
                             BK: tl.constexpr, PRECISION: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, a_desc.shape[1], BK):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc,
                     input_precision=PRECISION)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@tessera.jit
def device_descriptor_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm,
                                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                                    PRECISION: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [sam, 1], [BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [sbk, 1], [BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [scm, 1], [BM, BN])
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc,
                     input_precision=PRECISION)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


def _padded(rows, cols, dtype):
    """A (rows, cols) view with rows a multiple of 16 bytes apart (TensorDescriptor's rule)."""
    per_16 = 16 // torch.empty((), dtype=dtype).element_size()
    full = torch.randn(rows, -(-cols // per_16) * per_16, device="cuda").to(dtype)
    return full[:, :cols]


def _operands(M, N, K, dtype):
    a, b = _padded(M, K, dtype), _padded(K, N, dtype)
    c = _padded(M, N, dtype).fill_(float("nan"))
    return a, b, c


def _config(dtype):
    if dtype == torch.float16:
        return dict(BM=128, BN=128, BK=32, PRECISION="tf32")
    return dict(BM=64, BN=64, BK=16, PRECISION="ieee")


def _check(c, a, b, dtype):
    ref = a.double() @ b.double()
    assert not torch.isnan(c).any()
    assert relative_error(c.double(), ref) < BOUNDS[dtype]


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("num_stages", [1, 3])
def test_block_pointer_matmul(M, N, K, dtype, num_stages):
    a, b, c = _operands(M, N, K, dtype)
    cfg = _config(dtype)
    grid = (tessera.cdiv(M, cfg["BM"]), tessera.cdiv(N, cfg["BN"]))
    block_matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                              b.stride(1), c.stride(0), c.stride(1), num_stages=num_stages,
                              **cfg)
    _check(c, a, b, dtype)


def test_block_pointer_matmul_transposed_b():
    M, N, K = 333, 271, 197
    a, _, c = _operands(M, N, K, torch.float16)
    b_t = _padded(N, K, torch.float16)  # B stored column-major: strides (1, ld)
    b = b_t.t()
    cfg = _config(torch.float16)
    grid = (tessera.cdiv(M, cfg["BM"]), tessera.cdiv(N, cfg["BN"]))
    block_matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                              b.stride(1), c.stride(0), c.stride(1), num_stages=3, **cfg)
    _check(c, a, b, torch.float16)


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("num_stages", [1, 3])
def test_host_descriptor_matmul(M, N, K, dtype, num_stages):
    a, b, c = _operands(M, N, K, dtype)
    cfg = _config(dtype)
    descs = [TensorDescriptor.from_tensor(a, [cfg["BM"], cfg["BK"]]),
             TensorDescriptor.from_tensor(b, [cfg["BK"], cfg["BN"]]),
             TensorDescriptor.from_tensor(c, [cfg["BM"], cfg["BN"]])]
    grid = (tessera.cdiv(M, cfg["BM"]), tessera.cdiv(N, cfg["BN"]))
    descriptor_matmul_kernel[grid](*descs, num_stages=num_stages, **cfg)
    _check(c, a, b, dtype)
    c.fill_(float("nan"))  # a second launch takes the same specialization
    descriptor_matmul_kernel[grid](*descs, num_stages=num_stages, **cfg)
    _check(c, a, b, dtype)


@pytest.mark.parametrize("M,N,K", SHAPES)
def test_device_descriptor_matmul(M, N, K):
    tessera.set_allocator(lambda size, alignment, stream:
                          torch.empty(size, device="cuda", dtype=torch.int8))
    a, b, c = _operands(M, N, K, torch.float16)
    cfg = _config(torch.float16)
    grid = (tessera.cdiv(M, cfg["BM"]), tessera.cdiv(N, cfg["BN"]))
    device_descriptor_matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0),
                                          c.stride(0), num_stages=3, **cfg)
    _check(c, a, b, torch.float16)


@tessera.jit
def window_kernel(x_ptr, y_ptr, M, N, sxm, off_m, off_n, BM: tl.constexpr, BN: tl.constexpr):
    """y = the (BM, BN) block of x at (off_m, off_n), NaN outside x; then the same block
    written back to x scaled by 2 (bounds-checked: only its inside changes)."""
    x_block = tl.make_block_ptr(x_ptr, (M, N), (sxm, 1), (off_m, off_n), (BM, BN), (1, 0))
    y_block = tl.make_block_ptr(y_ptr, (BM, BN), (BN, 1), (0, 0), (BM, BN), (1, 0))
    block = tl.load(x_block, boundary_check=(0, 1), padding_option="nan")
    tl.store(y_block, block)
    tl.store(x_block, block * 2, boundary_check=(0, 1))


@pytest.mark.parametrize("off_m,off_n", [(-5, -9), (20, 30), (0, 0)])
def test_padding_nan_and_checked_stores(off_m, off_n):
    M, N = 37, 45
    x = torch.randn(M, N, device="cuda")
    original = x.clone()
    y = torch.empty(32, 64, device="cuda")
    window_kernel[(1,)](x, y, M, N, N, off_m, off_n, BM=32, BN=64)
    expected = torch.full((32, 64), float("nan"), device="cuda")
    rows = slice(max(off_m, 0), min(off_m + 32, M))
    cols = slice(max(off_n, 0), min(off_n + 64, N))
    inside = original[rows, cols]
    expected[rows.start - off_m:rows.stop - off_m, cols.start - off_n:cols.stop - off_n] = inside
    torch.testing.assert_close(y, expected, equal_nan=True, rtol=0, atol=0)
    changed = original.clone()
    changed[rows, cols] *= 2
    torch.testing.assert_close(x, changed, rtol=0, atol=0)


def test_autotuned_host_descriptor_matmul():
    # The tuner finds the device through the descriptors' base tensors.
    kernel = tessera.autotune(configs=[tessera.Config({}, num_warps=4, num_stages=3),
                                       tessera.Config({}, num_warps=8, num_stages=2)],
                              key=[])(descriptor_matmul_kernel)
    M, N, K = 333, 271, 197
    a, b, c = _operands(M, N, K, torch.float16)
    cfg = _config(torch.float16)
    descs = [TensorDescriptor.from_tensor(a, [cfg["BM"], cfg["BK"]]),
             TensorDescriptor.from_tensor(b, [cfg["BK"], cfg["BN"]]),
             TensorDescriptor.from_tensor(c, [cfg["BM"], cfg["BN"]])]
    kernel[(tessera.cdiv(M, cfg["BM"]), tessera.cdiv(N, cfg["BN"]))](*descs, **cfg)
    _check(c, a, b, torch.float16)
    assert kernel.failed_configs == []


@tessera.jit
def _tile_position(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    return first_pid_m + (tile_id % group_size_m), (tile_id % num_pid_in_group) // group_size_m


@tessera.jit
def persistent_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                             BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                             GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr):
    """Triton's descriptor-tutorial style: device descriptors, tiles strided over programs."""
    dtype = c_ptr.dtype.element_ty
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1],
                                       block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = _tile_position(tile_id, GROUP_SIZE_M * num_pid_n, num_pid_m, GROUP_SIZE_M)
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BLOCK_SIZE_K)):
            a = a_desc.load([pid_m * BLOCK_SIZE_M, ki * BLOCK_SIZE_K])
            b = b_desc.load([pid_n * BLOCK_SIZE_N, ki * BLOCK_SIZE_K])
            accumulator = tl.dot(a, b.T, accumulator)
        c_desc.store([pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N], accumulator.to(dtype))


@pytest.mark.parametrize("M,N,K", [(1024, 1024, 1024), (1000, 777, 520)])
def test_persistent_descriptor_matmul(M, N, K):
    tessera.set_allocator(lambda size, alignment, stream:
                          torch.empty(size, device="cuda", dtype=torch.int8))
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(N, K, device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda").half()
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    persistent_matmul_kernel[(num_sms,)](a, b, c, M, N, K, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                                         BLOCK_SIZE_K=64, GROUP_SIZE_M=8, NUM_SMS=num_sms,
                                         num_warps=8, num_stages=3)
    _check(c, a, b.t(), torch.float16)
