"""Pointers read from memory on the GPU: operands reached through int64 tables of data_ptr()s
(a multi-tensor kernel over ragged sizes), pointers stored through a pointer-to-pointer view and
loaded back, and an int64 argument cast to a pointer; against torch float64 references. The
grouped GEMM over pointer tables is tests/compat/kernels/grouped_gemm.py (run by
tests/gpu/test_compat.py)."""
import pytest

import tessera
import tessera.language as tl

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)


@tessera.jit
def scale_all_kernel(ptrs, sizes, factor, BLOCK: tl.constexpr):
    which = tl.program_id(1)
    x = tl.load(ptrs + which).to(tl.pointer_type(tl.float32))
    n = tl.load(sizes + which)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) * factor, mask=offs < n)


def test_multi_tensor_scale_through_a_pointer_table():
    g = torch.Generator(device="cuda").manual_seed(5)
    sizes = [1, 777, 4096, 10_001, 3]
    xs = [torch.randn(n, device="cuda", generator=g) for n in sizes]
    expected = [x.double() * 1.5 for x in xs]
    ptrs = torch.tensor([x.data_ptr() for x in xs], device="cuda")
    scale_all_kernel[(tessera.cdiv(max(sizes), 512), len(sizes))](
        ptrs, torch.tensor(sizes, device="cuda"), 1.5, BLOCK=512)
    for x, ref in zip(xs, expected):
        assert torch.equal(x, ref.float())


@tessera.jit
def store_pointers_kernel(x_ptr, table_ptr, BLOCK: tl.constexpr):
    table = table_ptr.to(tl.pointer_type(tl.pointer_type(tl.float32)), bitcast=True)
    offs = tl.arange(0, BLOCK)
    tl.store(table + offs, x_ptr + 2 * offs)


@tessera.jit
def load_pointers_kernel(table_ptr, out_ptr, BLOCK: tl.constexpr):
    table = table_ptr.to(tl.pointer_type(tl.pointer_type(tl.float32)), bitcast=True)
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(tl.load(table + offs)))


def test_pointers_stored_and_loaded_back():
    x = torch.randn(1024, device="cuda")
    table = torch.zeros(512, dtype=torch.int64, device="cuda")
    store_pointers_kernel[(1,)](x, table, BLOCK=512)
    assert table.tolist() == [x.data_ptr() + 8 * i for i in range(512)]
    out = torch.empty(512, device="cuda")
    load_pointers_kernel[(1,)](table, out, BLOCK=512)
    assert torch.equal(out, x[::2])


@tessera.jit
def read_at_address_kernel(address, out_ptr, count, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = address.to(tl.pointer_type(tl.float32))
    tl.store(out_ptr + offs, tl.load(x + offs, mask=offs < count), mask=offs < count)


def test_int_argument_cast_to_a_pointer():
    x = torch.randn(100, device="cuda")
    out = torch.zeros(100, device="cuda")
    read_at_address_kernel[(1,)](x.data_ptr(), out, 100, BLOCK=128)
    assert torch.equal(out, x)
