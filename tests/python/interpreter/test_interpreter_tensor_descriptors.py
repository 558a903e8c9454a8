# Tensor descriptors run by the interpreter against NumPy: device-side
# tl.make_tensor_descriptor and host-side TensorDescriptor arguments, desc.load/store and
# tl.load_tensor_descriptor/store_tensor_descriptor; elements outside the tensor read as the
# padding (0 or NaN, as Triton's TMA) and are never written. Shapes are not multiples of the
# blocks; the leading strides are padded to 16 bytes, as TensorDescriptor requires.
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import CompilationError
from tessera.tools.tensor_descriptor import TensorDescriptor


def padded(rng, rows, cols, dtype=np.float32):
    """A (rows, cols) view whose row stride is a multiple of 16 bytes (TensorDescriptor's rule)."""
    per_16 = 16 // np.dtype(dtype).itemsize
    full = rng.standard_normal((rows, -(-cols // per_16) * per_16)).astype(dtype)
    return full[:, :cols]


@tessera.jit(interpret=True)
def host_matmul_kernel(a_desc, b_desc, c_desc, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, a_desc.shape[1], BK):
        a = a_desc.load([pid_m * BM, k])
        b = tl.load_tensor_descriptor(b_desc, [k, pid_n * BN])
        acc = tl.dot(a, b, acc, input_precision="ieee")
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@pytest.mark.parametrize("M,N,K", [(32, 64, 32), (37, 45, 53), (9, 70, 17)])
def test_host_descriptor_matmul(rng, M, N, K):
    a, b = padded(rng, M, K), padded(rng, K, N)
    c = np.full((M, -(-N // 4) * 4 + 4), np.nan, np.float32)[:, :N]
    descs = [TensorDescriptor.from_tensor(a, [16, 16]), TensorDescriptor.from_tensor(b, [16, 32]),
             TensorDescriptor.from_tensor(c, [16, 32])]
    host_matmul_kernel[(tessera.cdiv(M, 16), tessera.cdiv(N, 32))](*descs, BM=16, BN=32, BK=16)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


@tessera.jit(interpret=True)
def device_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm, BM: tl.constexpr,
                         BN: tl.constexpr, BK: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [sam, 1], [BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[sbk, 1],
                                       block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [scm, 1], [BM, BN])
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]),
                      input_precision="ieee")
    tl.store_tensor_descriptor(c_desc, [pid_m * BM, pid_n * BN], acc)


@pytest.mark.parametrize("M,N,K", [(37, 45, 53), (16, 16, 16), (50, 7, 33)])
def test_device_descriptor_matmul(rng, M, N, K):
    a, b = padded(rng, M, K), padded(rng, K, N)
    c = np.full((M, N), np.nan, np.float32)
    device_matmul_kernel[(tessera.cdiv(M, 16), tessera.cdiv(N, 16))](
        a, b, c, M, N, K, a.strides[0] // 4, b.strides[0] // 4, N, BM=16, BN=16, BK=16)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


@tessera.jit(interpret=True)
def window_kernel(x_desc, y_ptr, off_m, off_n, BM: tl.constexpr, BN: tl.constexpr):
    """y = the (BM, BN) block of x at (off_m, off_n), padded as the descriptor says."""
    block = x_desc.load([off_m, off_n])
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(y_ptr + rows * BN + cols, block)


def _window(x, off_m, off_n, bm, bn, fill):
    out = np.full((bm, bn), fill, x.dtype)
    rows, cols = np.arange(off_m, off_m + bm), np.arange(off_n, off_n + bn)
    inside_r = (rows >= 0) & (rows < x.shape[0])
    inside_c = (cols >= 0) & (cols < x.shape[1])
    out[np.ix_(inside_r, inside_c)] = x[np.ix_(rows[inside_r], cols[inside_c])]
    return out


@pytest.mark.parametrize("padding,fill", [("zero", 0.0), ("nan", np.nan)])
@pytest.mark.parametrize("off_m,off_n", [(-5, -8), (10, 24), (0, 0), (40, 0)])
def test_out_of_bounds_reads_give_the_padding(rng, padding, fill, off_m, off_n):
    x = padded(rng, 13, 30)
    y = np.empty((16, 32), np.float32)
    desc = TensorDescriptor.from_tensor(x, [16, 32], padding=padding)
    window_kernel[(1,)](desc, y, off_m, off_n, BM=16, BN=32)
    np.testing.assert_array_equal(y, _window(x, off_m, off_n, 16, 32, fill))


@tessera.jit(interpret=True)
def device_nan_kernel(x_ptr, y_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    desc = tl.make_tensor_descriptor(x_ptr, [M, N], [stride, 1], [BM, BN],
                                     padding_option="nan")
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(y_ptr + rows * BN + cols, desc.load([3, 4]))


def test_device_nan_padding(rng):
    x = padded(rng, 9, 11)
    y = np.empty((8, 16), np.float32)
    device_nan_kernel[(1,)](x, y, 9, 11, x.strides[0] // 4, BM=8, BN=16)
    np.testing.assert_array_equal(y, _window(x, 3, 4, 8, 16, np.nan))


@tessera.jit(interpret=True)
def scale_kernel(x_desc, y_desc, BM: tl.constexpr, BN: tl.constexpr):
    """y = 3 * x block by block; blocks overhang the tensor."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    tl.static_assert(x_desc.block_shape == [BM, BN])
    y_desc.store([m, n], x_desc.load([m, n]) * 3)  # int32 values, cast to the int16 descriptor


def test_store_skips_elements_outside(rng):
    x = rng.integers(-1000, 1000, (21, 36)).astype(np.int32)
    y_full = np.full((21, 40), 77, np.int16)  # row stride of 80 bytes; columns 36.. untouched
    y = y_full[:, :36]
    scale_kernel[(2, 3)](TensorDescriptor.from_tensor(x, [16, 16]),
                         TensorDescriptor.from_tensor(y, [16, 16]), BM=16, BN=16)
    np.testing.assert_array_equal(y, (3 * x).astype(np.int16))
    assert (y_full[:, 36:] == 77).all()


@tessera.jit
def _copy_block(src, dst, index):
    dst.store([index, 0, 0], src.load([index, 0, 0]))


@tessera.jit(interpret=True)
def three_d_kernel(x_desc, y_ptr, A, B, C, BB: tl.constexpr, BC: tl.constexpr):
    y_desc = tl.make_tensor_descriptor(y_ptr, [A, B, C], [B * C, C, 1], [1, BB, BC])
    tl.static_assert(x_desc.dtype == tl.float32 and y_desc.dtype == tl.float32)
    _copy_block(x_desc, y_desc, tl.program_id(0))
    # shape and strides are runtime scalars: int32 and int64, as in Triton
    tl.device_assert(x_desc.shape[2] == C and x_desc.strides[1] == C)
    tl.static_assert(x_desc.shape[0].dtype == tl.int32 and x_desc.strides[0].dtype == tl.int64)


def test_three_dims_and_helpers(rng):
    x = rng.standard_normal((3, 5, 12)).astype(np.float32)
    y = np.zeros_like(x)
    three_d_kernel[(3,)](TensorDescriptor.from_tensor(x, [1, 8, 16]), y, 3, 5, 12, BB=8, BC=16)
    np.testing.assert_array_equal(y, x)


def test_loads_and_stores_are_marked_for_a_tma_pass():
    x = np.zeros((16, 16), np.float32)
    desc = TensorDescriptor.from_tensor(x, [16, 16])
    tir = scale_kernel.asm(desc, desc, BM=16, BN=16, arch="sm_80")["tir"]
    assert tir.count("tensor_descriptor = true") == 2, tir


# ---- host-side checks, as Triton's TensorDescriptor ---------------------------------------------

@pytest.mark.parametrize("make,match", [
    (lambda x: TensorDescriptor(x[:, 1:], [4, 3], [4, 1], [4, 4]), "16-byte aligned"),
    (lambda x: TensorDescriptor(x, [4, 4], [3, 1], [4, 4]), "16 bytes"),
    (lambda x: TensorDescriptor(x, [4, 4], [4, 2], [4, 4]), "contiguous"),
    (lambda x: TensorDescriptor(x, [4, 4], [4, 1], [4, 3]), "power of 2"),
    (lambda x: TensorDescriptor(x, [4, 4], [4, 1], [4]), "one length"),
    (lambda x: TensorDescriptor(x, [4, 0], [4, 1], [4, 4]), "positive"),
    (lambda x: TensorDescriptor(x, [4, 4], [4, 1], [4, 4], "one"), "padding"),
    (lambda x: TensorDescriptor(x.view(np.int32), [4, 4], [4, 1], [4, 4], "nan"), "floating"),
    (lambda x: TensorDescriptor(x.reshape(-1), [16] * 6, [1] * 6, [1] * 6), "rank"),
])
def test_host_descriptor_checks(make, match):
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match=match):
        make(x)


def test_from_tensor_uses_the_strides_in_elements():
    x = np.zeros((6, 24), np.float16)[:, :10]
    desc = TensorDescriptor.from_tensor(x, [2, 8])
    assert desc.shape == [6, 10] and desc.strides == [24, 1] and desc.padding == "zero"


def test_set_allocator_is_accepted():
    from tessera.runtime.allocation import get_allocator
    previous = get_allocator()
    calls = []
    tessera.set_allocator(lambda size, alignment, stream: calls.append(size))
    try:
        x = np.zeros((16, 16), np.float32)
        desc = TensorDescriptor.from_tensor(x, [16, 16])
        scale_kernel[(1, 1)](desc, desc, BM=16, BN=16)
        assert calls == []  # the masked lowering needs no scratch
        with pytest.raises(TypeError):
            tessera.set_allocator(3)
    finally:
        tessera.set_allocator(previous)


# ---- device-side errors: CompilationError naming the kernel and the line -----------------------

BAD = [
    ("tl.make_tensor_descriptor(x_ptr, [n, n], [n, n], [16, 16])", "last dim must be contiguous"),
    ("tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 2])", "16 bytes"),
    ("tl.make_tensor_descriptor(x_ptr, [n] * 6, [1] * 6, [4] * 6)", "1 to 5 dims"),
    ("tl.make_tensor_descriptor(x_ptr, [n, n], [1], [16, 16])", "strides"),
    ("tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 16], padding_option='x')", "padding"),
    ("tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 16]).load([0])", "2 offsets"),
    ("tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 16]).store([0, 0], "
     "tl.zeros((8, 16), tl.float32))", "block shape"),
    ("tl.load_tensor_descriptor(x_ptr, [0, 0])", "tensor descriptor"),
    ("tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 16]).atomic_add([0, 0], 1.0)",
     "atomic_add: the value's shape"),
    ("tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 16]).volume", "no attribute"),
]


@pytest.mark.parametrize("body,match", BAD)
def test_device_errors(tmp_path, body, match):
    import importlib.util
    path = tmp_path / "bad_descriptor.py"
    path.write_text("import tessera\nimport tessera.language as tl\n\n\n"
                    "@tessera.jit(interpret=True)\n"
                    "def bad(x_ptr, n):\n"
                    f"    {body}\n")
    spec = importlib.util.spec_from_file_location(f"bad_descriptor_{abs(hash(body))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError, match=match) as info:
        module.bad[(1,)](np.zeros(256, np.float32), 16)
    assert "bad" in str(info.value) and ":7:" in str(info.value)


def test_descriptor_specializations_recompile(rng):
    # dtype, block shape, padding and the shape's divisibility by 16 key the kernel.
    kernel = tessera.jit(window_kernel.fn, interpret=True)
    x = padded(rng, 13, 30)
    y = np.empty((16, 32), np.float32)
    calls = [TensorDescriptor.from_tensor(x, [16, 32]),
             TensorDescriptor.from_tensor(x, [16, 32], "nan"),
             TensorDescriptor.from_tensor(padded(rng, 16, 32), [16, 32]),
             TensorDescriptor.from_tensor(padded(rng, 13, 30), [16, 32])]  # as the first
    for desc in calls:
        kernel[(1,)](desc, y, 0, 0, BM=16, BN=32)
    assert len(kernel._tile_ir) == 3


@tessera.jit(interpret=True)
def runtime_stride_kernel(x_ptr, y_ptr, M, N, stride_m, stride_n, BM: tl.constexpr,
                          BN: tl.constexpr):
    # stride_n == 1 is specialized to the constant 1 (as Triton's equal-to-1 integers), which
    # is what a descriptor's last stride must be.
    desc = tl.make_tensor_descriptor(x_ptr, [M, N], [stride_m, stride_n], [BM, BN])
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(y_ptr + rows * BN + cols, desc.load([0, 0]))


def test_last_stride_given_as_an_argument_equal_to_one(rng):
    x = padded(rng, 5, 7)
    y = np.empty((8, 8), np.float32)
    runtime_stride_kernel[(1,)](x, y, 5, 7, x.strides[0] // 4, 1, BM=8, BN=8)
    np.testing.assert_array_equal(y, _window(x, 0, 0, 8, 8, 0.0))
    with pytest.raises(CompilationError, match="contiguous"):
        runtime_stride_kernel[(1,)](x, y, 5, 7, x.strides[0] // 4, 2, BM=8, BN=8)


# ---- a persistent matmul in the style of Triton's descriptor tutorials -------------------------

@tessera.jit
def _tile_position(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@tessera.jit(interpret=True)
def persistent_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                             BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                             GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr):
    dtype = c_ptr.dtype.element_ty
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_tiles = num_pid_m * num_pid_n
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1],
                                       block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS):
        pid_m, pid_n = _tile_position(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M)
        offs_am = pid_m * BLOCK_SIZE_M
        offs_bn = pid_n * BLOCK_SIZE_N
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_SIZE_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_bn, offs_k])
            accumulator = tl.dot(a, b.T, accumulator)
        c_desc.store([offs_am, offs_bn], accumulator.to(dtype))


@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (45, 70, 53)])
def test_persistent_descriptor_matmul(rng, M, N, K):
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)  # B^T, as the tutorial keeps it
    c = np.full((M, N), np.nan, np.float16)
    num_sms = 3
    persistent_matmul_kernel[(num_sms,)](a, b, c, M, N, K, BLOCK_SIZE_M=16, BLOCK_SIZE_N=32,
                                         BLOCK_SIZE_K=16, GROUP_SIZE_M=2, NUM_SMS=num_sms)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 2e-3
