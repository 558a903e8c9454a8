# Pointers read from memory, as Triton's interpreter follows them: int64 tensors of
# data_ptr()s cast back with .to(tl.pointer_type(...)) (a grouped GEMM over ragged shapes, a
# multi-tensor kernel), pointers stored to memory and loaded back, ptrtoint giving the real
# address; and addresses outside every live array faulting with the kernel, line and address
# instead of reading whatever is there. References: NumPy float64 on fresh random inputs.
import ctypes

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.interpreter import KernelRuntimeError

torch = pytest.importorskip("torch")


@tessera.jit(interpret=True)
def grouped_gemm_kernel(a_ptrs, b_ptrs, c_ptrs, sizes, strides, group_count,
                        NUM_PROGRAMS: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    tile = tl.program_id(0)
    first_tile = 0
    for g in range(group_count):
        m = tl.load(sizes + 3 * g)
        n = tl.load(sizes + 3 * g + 1)
        k = tl.load(sizes + 3 * g + 2)
        tiles_n = tl.cdiv(n, BLOCK_N)
        tiles = tl.cdiv(m, BLOCK_M) * tiles_n
        while tile >= first_tile and tile < first_tile + tiles:
            a = tl.load(a_ptrs + g).to(tl.pointer_type(tl.float16))
            b = tl.load(b_ptrs + g).to(tl.pointer_type(tl.float16))
            c = tl.load(c_ptrs + g).to(tl.pointer_type(tl.float16))
            lda = tl.load(strides + 3 * g)
            ldb = tl.load(strides + 3 * g + 1)
            ldc = tl.load(strides + 3 * g + 2)
            local = tile - first_tile
            rows = (local // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
            cols = (local % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
            ks = tl.arange(0, BLOCK_K)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(0, k, BLOCK_K):
                a_tile = tl.load(a + rows[:, None] * lda + (k0 + ks)[None, :],
                                 mask=(rows[:, None] < m) & ((k0 + ks)[None, :] < k), other=0.0)
                b_tile = tl.load(b + (k0 + ks)[:, None] * ldb + cols[None, :],
                                 mask=((k0 + ks)[:, None] < k) & (cols[None, :] < n), other=0.0)
                acc += tl.dot(a_tile, b_tile)
            tl.store(c + rows[:, None] * ldc + cols[None, :], acc.to(tl.float16),
                     mask=(rows[:, None] < m) & (cols[None, :] < n))
            tile += NUM_PROGRAMS
        first_tile += tiles


def grouped_gemm(a_list, b_list, c_list, address, stride):
    """Launches the kernel over lists of 2-D arrays; address(x) and stride(x) read them."""
    sizes = [d for a, b in zip(a_list, b_list) for d in (a.shape[0], b.shape[1], a.shape[1])]
    strides = [s for a, b, c in zip(a_list, b_list, c_list) for s in (stride(a), stride(b),
                                                                       stride(c))]
    tables = [np.array([address(x) for x in xs], np.int64) for xs in (a_list, b_list, c_list)]
    grouped_gemm_kernel[(3,)](*tables, np.array(sizes, np.int32), np.array(strides, np.int32),
                              len(a_list), NUM_PROGRAMS=3, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)


def check_products(a_list, b_list, c_list):
    for a, b, c in zip(a_list, b_list, c_list):
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        ref = a64 @ b64  # fp16 products are exact in f32: only the sum's order and c's rounding
        bound = 2.0 ** -11 * np.abs(ref) + a.shape[1] * 2.0 ** -23 * (np.abs(a64) @ np.abs(b64))
        assert np.all(np.abs(np.asarray(c, np.float64) - ref) <= bound + 1e-30), a.shape


SHAPES = [(37, 50, 23), (16, 16, 16), (5, 70, 41), (1, 1, 1), (33, 9, 64)]


def test_grouped_gemm_over_torch_data_ptrs(rng):
    g = torch.Generator().manual_seed(int(rng.integers(1 << 30)))
    a_list = [torch.randn(m, k, generator=g).half() for m, n, k in SHAPES]
    b_list = [torch.randn(k, n, generator=g).half() for m, n, k in SHAPES]
    c_list = [torch.full((m, n), float("nan"), dtype=torch.float16) for m, n, k in SHAPES]
    grouped_gemm(a_list, b_list, c_list, lambda x: x.data_ptr(), lambda x: x.stride(0))
    check_products([a.numpy() for a in a_list], [b.numpy() for b in b_list],
                   [c.numpy() for c in c_list])


def test_grouped_gemm_over_numpy_views_with_row_strides(rng):
    # a, b are row slices of wider arrays; c lives inside one shared output array
    a_list = [rng.standard_normal((m, k + 3)).astype(np.float16)[:, :k] for m, n, k in SHAPES]
    b_list = [rng.standard_normal((k, n + 5)).astype(np.float16)[:, 2:n + 2] for m, n, k in SHAPES]
    out = np.full((sum(m for m, _, _ in SHAPES), 80), np.nan, np.float16)
    starts = np.cumsum([0] + [m for m, _, _ in SHAPES])
    c_list = [out[s:s + m, :n] for s, (m, n, _) in zip(starts, SHAPES)]
    grouped_gemm(a_list, b_list, c_list, lambda x: x.ctypes.data, lambda x: x.strides[0] // 2)
    check_products(a_list, b_list, c_list)


@tessera.jit(interpret=True)
def scale_all_kernel(ptrs, sizes, factor, BLOCK: tl.constexpr):
    # one program per (tensor, block): the foreach pattern of multi-tensor optimizers
    which = tl.program_id(1)
    x = tl.load(ptrs + which).to(tl.pointer_type(tl.float32))
    n = tl.load(sizes + which)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) * factor, mask=offs < n)


class _Holder:
    pass


HELD = {}  # a global the caller's frames do not show: found through the Python heap


@pytest.mark.parametrize("where", ["locals", "heap"])
def test_multi_tensor_scale_through_a_pointer_array(rng, where):
    sizes = [int(s) for s in rng.integers(1, 700, 6)] + [1]
    arrays = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    expected = [x.astype(np.float64) * 1.5 for x in arrays]
    ptrs = np.array([x.ctypes.data for x in arrays], np.int64)
    if where == "heap":
        holder = _Holder()
        holder.arrays = {i: x for i, x in enumerate(arrays)}  # an untracked dict of arrays
        HELD["holder"] = holder
        del arrays
    try:
        scale_all_kernel[(tessera.cdiv(max(sizes), 128), len(sizes))](
            ptrs, np.array(sizes, np.int64), 1.5, BLOCK=128)
        scaled = [HELD["holder"].arrays[i] for i in range(len(sizes))] if where == "heap" \
            else arrays
    finally:
        HELD.clear()
    for x, ref in zip(scaled, expected):
        np.testing.assert_array_equal(x, ref.astype(np.float32))


@tessera.jit(interpret=True)
def address_of_kernel(x_ptr, out_ptr):
    tl.store(out_ptr, x_ptr.to(tl.int64))
    tl.store(out_ptr + 1, (x_ptr + 3).to(tl.int64))


def test_pointer_to_int64_is_the_host_address():
    x = torch.zeros(8)
    out = np.zeros(2, np.int64)
    address_of_kernel[(1,)](x, out)
    assert out.tolist() == [x.data_ptr(), x.data_ptr() + 12]


@tessera.jit(interpret=True)
def store_pointers_kernel(x_ptr, table_ptr, BLOCK: tl.constexpr):
    # pointers stored through a pointer-to-pointer view of an int64 table
    table = table_ptr.to(tl.pointer_type(tl.pointer_type(tl.float32)), bitcast=True)
    offs = tl.arange(0, BLOCK)
    tl.store(table + offs, x_ptr + 2 * offs)


@tessera.jit(interpret=True)
def load_pointers_kernel(table_ptr, out_ptr, BLOCK: tl.constexpr):
    table = table_ptr.to(tl.pointer_type(tl.pointer_type(tl.float32)), bitcast=True)
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(tl.load(table + offs)))


def test_pointers_stored_to_and_loaded_from_memory(rng):
    x = rng.standard_normal(16).astype(np.float32)
    table = np.zeros(8, np.int64)
    store_pointers_kernel[(1,)](x, table, BLOCK=8)
    assert table.tolist() == [x.ctypes.data + 8 * i for i in range(8)]  # real addresses
    out = np.zeros(8, np.float32)
    load_pointers_kernel[(1,)](table, out, BLOCK=8)
    np.testing.assert_array_equal(out, x[::2])


@tessera.jit(interpret=True)
def read_at_address_kernel(address, out_ptr, count, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = address.to(tl.pointer_type(tl.float32))  # an int64 scalar argument
    tl.store(out_ptr + offs, tl.load(x + offs, mask=offs < count), mask=offs < count)


def test_int_argument_cast_to_a_pointer(rng):
    x = rng.standard_normal(10).astype(np.float32)
    out = np.zeros(10, np.float32)
    read_at_address_kernel[(1,)](x.ctypes.data, out, 10, BLOCK=16)
    np.testing.assert_array_equal(out, x)


def test_address_outside_every_live_array_faults_with_kernel_line_and_address():
    # live memory, but not a NumPy array or tensor: never read
    raw = ctypes.create_string_buffer(64)
    address = ctypes.addressof(raw)
    with pytest.raises(KernelRuntimeError) as error:
        read_at_address_kernel[(1,)](address, np.zeros(4, np.float32), 4, BLOCK=4)
    text = str(error.value)
    assert "read_at_address_kernel" in text and f"{address:#x}" in text
    assert "does not point into any argument buffer, nor into any live NumPy array" in text
    assert "tl.load(x + offs" in text  # the source line
    del raw


def test_pointer_array_entry_past_its_tensor_faults_out_of_bounds():
    x = np.zeros(6, np.float32)
    with pytest.raises(KernelRuntimeError, match="out of bounds: element offset 6 from host "
                       f"memory at {x.ctypes.data:#x}"):
        scale_all_kernel[(1, 1)](np.array([x.ctypes.data], np.int64),
                                 np.array([7], np.int64), 2.0, BLOCK=8)
    np.testing.assert_array_equal(x, 0)  # the load faulted before any store


@tessera.jit(interpret=True)
def add_through_address_kernel(x_ptr, address, out_ptr, n):
    end = (x_ptr.to(tl.int64) + 4 * n).to(tl.pointer_type(tl.float32))  # one past the end
    other = address.to(tl.pointer_type(tl.float32))
    tl.store(out_ptr, tl.load(end - 1) + tl.load(other))


def test_address_in_a_gap_of_a_strided_argument_is_the_array_it_views(rng):
    # base[1, 2] lies between the elements of the argument base[:, 1]: it belongs to base
    base = rng.standard_normal((4, 3)).astype(np.float32)
    out = np.zeros(1, np.float32)
    add_through_address_kernel[(1,)](base[:, 1], base[1:, 2].ctypes.data, out, 1)
    assert out[0] == base[0, 1] + base[1, 2]
    x = rng.standard_normal(7).astype(np.float32)
    add_through_address_kernel[(1,)](x, x.ctypes.data, out, 7)  # past the end, then back
    assert out[0] == x[6] + x[0]
