"""Masked stores are predicated PTX stores (`@p st.global`, docs/perf/matmul_sass.md): on the
GPU they write exactly the unmasked elements. tessera.ops.matmul writes C into a view of a
larger NaN-poisoned buffer (aligned and ragged shapes, the stmatrix epilogue on sm_90): the
view matches float64 and every element around it keeps its poison; a masked copy of each
element size leaves the tail past n untouched."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera
import tessera.language as tl
from tessera.ops import matmul
from tessera.testing import relative_error


@pytest.mark.parametrize("shape", [(1024, 1024, 512), (1000, 1000, 1000), (333, 517, 211)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_matmul_writes_only_its_view(shape, dtype):
    M, N, K = shape
    gen = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = torch.randn((M, K), device="cuda", generator=gen).to(dtype)
    b = torch.randn((K, N), device="cuda", generator=gen).to(dtype)
    # 48 spare columns keep the row stride a multiple of 16 elements when N is (the vector
    # stores); the view starts 16 bytes into a row.
    big = torch.full((M + 5, N + 48), float("nan"), device="cuda", dtype=dtype)
    out = big[2:M + 2, 8:N + 8]
    matmul(a, b, out=out)
    ref = (a.double() @ b.double()).cpu().numpy()
    assert relative_error(out.double().cpu().numpy(), ref) < (5e-3 if dtype == torch.float16
                                                              else 1e-2)
    outside = torch.ones_like(big, dtype=torch.bool)
    outside[2:M + 2, 8:N + 8] = False
    assert big[outside].isnan().all()


@tessera.jit
def masked_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.float64,
                                   torch.int64, torch.int16], ids=str)
@pytest.mark.parametrize("n", [4096 + 496, 4096 + 333])  # multiple of 16 (vectors), ragged
def test_masked_copy_leaves_the_tail(dtype, n):
    x = (torch.randn(8192, device="cuda") * 50).to(dtype)
    y = torch.full((8192,), 7, device="cuda", dtype=dtype)
    masked_copy[(tessera.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    assert torch.equal(y[:n], x[:n])
    assert (y[n:] == 7).all()
