"""On the GPU against torch: tensor_descriptor.gather / .scatter on ragged tensors (rows and
columns past the edge read as zero and are not written), a kernel defined by exec(text) (as
Triton's own tests build them), and a cast to a block pointer's block type."""
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera
import tessera.language as tl


@tessera.jit
def gather_kernel(out_ptr, in_ptr, idx_ptr, y, X, Y, BX: tl.constexpr, BY: tl.constexpr):
    idx = tl.load(idx_ptr + tl.arange(0, BX))
    desc = tl.make_tensor_descriptor(in_ptr, [X, Y], [Y, 1], [1, BY])
    tl.store(out_ptr + tl.arange(0, BX)[:, None] * BY + tl.arange(0, BY)[None, :],
             desc.gather(idx, y))


@tessera.jit
def scatter_kernel(out_ptr, in_ptr, idx_ptr, y, X, Y, BX: tl.constexpr, BY: tl.constexpr):
    idx = tl.load(idx_ptr + tl.arange(0, BX))
    data = tl.load(in_ptr + tl.arange(0, BX)[:, None] * BY + tl.arange(0, BY)[None, :])
    desc = tl.make_tensor_descriptor(out_ptr, [X, Y], [Y, 1], [1, BY])
    desc.scatter(data, idx, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("X,Y,BX,BY,y", [(37, 52, 16, 32, 30), (128, 128, 32, 64, 48)])
def test_gather(dtype, X, Y, BX, BY, y):
    inp = torch.randn((X, Y), device="cuda").to(dtype)
    idx = torch.randint(-3, X + 3, (BX,), device="cuda", dtype=torch.int32)
    out = torch.full((BX, BY), 7, device="cuda", dtype=dtype)
    gather_kernel[(1,)](out, inp, idx, y, X, Y, BX, BY)
    ref = torch.zeros((BX, BY), dtype=dtype)
    for i, row in enumerate(idx.tolist()):
        if 0 <= row < X:
            cols = inp[row, y:y + BY].cpu()
            ref[i, :cols.numel()] = cols
    torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0)


@pytest.mark.parametrize("X,Y,BX,BY,y", [(64, 100, 32, 32, 80), (40, 64, 16, 64, 0)])
def test_scatter(X, Y, BX, BY, y):
    data = torch.randn((BX, BY), device="cuda")
    idx = torch.randperm(X + 4, device="cuda")[:BX].to(torch.int32)
    out = torch.zeros((X, Y), device="cuda")
    scatter_kernel[(1,)](out, data, idx, y, X, Y, BX, BY)
    ref = torch.zeros((X, Y))
    for i, row in enumerate(idx.tolist()):
        if row < X:
            width = min(BY, Y - y)
            ref[row, y:y + width] = data[i, :width].cpu()
    torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0)


TEMPLATE = textwrap.dedent('''
    @tessera.jit
    def kernel(X, Z, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(X + offs, mask=mask)
        tl.store(Z + offs, EXPR, mask=mask)
''')


def test_exec_defined_kernel():
    src = TEMPLATE.replace("EXPR", "x * 3.0 - 1.0")
    namespace = {}
    exec(src, globals(), namespace)
    kernel = namespace["kernel"]
    n = 1000
    x = torch.randn(n, device="cuda")
    z = torch.empty_like(x)
    kernel[(tessera.cdiv(n, 256),)](x, z, n, BLOCK=256)
    torch.testing.assert_close(z, x * 3 - 1)


@tessera.jit
def block_type_cast_kernel(src_ptr, dst_ptr, N, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(base=src_ptr, shape=(N, ), strides=(1, ), offsets=(0, ),
                          block_shape=(BLOCK, ), order=(0, ))
    v = tl.load(p, boundary_check=(0, ), padding_option="zero").to(tl.float32)
    tl.store(dst_ptr + tl.arange(0, BLOCK), v.to(p.dtype.element_ty))


def test_cast_to_a_block_pointers_block_type():
    src = torch.randn(13, device="cuda").half()
    dst = torch.full((16,), 5, device="cuda", dtype=torch.float16)
    block_type_cast_kernel[(1,)](src, dst, 13, BLOCK=16)
    ref = torch.zeros(16, dtype=torch.float16)
    ref[:13] = src.cpu()
    torch.testing.assert_close(dst.cpu(), ref, rtol=0, atol=0)
