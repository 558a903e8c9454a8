"""tl.dot on the GPU: matmuls against a float64 reference for square and ragged shapes (M, N, K
not multiples of the blocks), fp16 / bf16 / tf32 / tf32x3 / fp32 ("ieee"), every pipeline
depth, transposed operands and chained dots (on wgmma on Hopper; mma.sync there too when
turned off); outputs poisoned first; zero register spills in
what ptxas reported for the pipelined (16-byte-aligned) kernels (CompiledKernel.metadata).

Bounds (docs/benchmarks.md): ‖out − ref‖ / ‖ref‖ < 1e-5 fp32, ~3e-4 tf32, 5e-3 fp16, 1e-2 bf16.
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera
import tessera.language as tl
from tessera.testing import relative_error

BOUNDS = {"float16": 5e-3, "bfloat16": 1e-2, "tf32": 1e-3, "tf32x3": 1e-5, "ieee": 1e-5}


@tessera.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rm[:, None] % M) * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + (rn[None, :] % N) * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def launch(a, b, c, blocks, num_warps, num_stages, precision=None):
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk = blocks
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
            c.stride(1))
    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "PRECISION": precision}
    grid = (tessera.cdiv(M, bm) * tessera.cdiv(N, bn),)
    matmul_kernel[grid](*args, **meta, num_warps=num_warps, num_stages=num_stages)
    if M % 16 == 0 and N % 16 == 0 and K % 16 == 0:
        # The fast path (16-byte-aligned rows: cp.async pipeline) must not spill. Sizes that
        # are not multiples of 16 take scalar loads and no pipeline, and may spill.
        compiled = matmul_kernel.compile(*args, **meta, num_warps=num_warps,
                                         num_stages=num_stages)
        assert compiled.metadata.get("spill_stores", 0) == 0, compiled.metadata
        assert compiled.metadata.get("spill_loads", 0) == 0, compiled.metadata


def check(M, N, K, in_dtype, out_dtype, precision, blocks=(128, 128, 32), num_warps=4,
          num_stages=3, bound_key=None, transposed_a=False):
    gen = torch.Generator(device="cuda").manual_seed(M * 7919 + N * 31 + K)
    a = torch.randn((K, M) if transposed_a else (M, K), device="cuda", generator=gen)
    a = (a.t() if transposed_a else a).to(in_dtype)
    b = torch.randn((K, N), device="cuda", generator=gen).to(in_dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=out_dtype)
    launch(a, b, c, blocks, num_warps, num_stages, precision)
    ref = (a.double() @ b.double()).cpu().numpy()
    err = relative_error(c.double().cpu().numpy(), ref)
    bound = BOUNDS[bound_key or str(in_dtype).split(".")[-1]]
    assert err < bound, f"{M}x{N}x{K} {in_dtype} {precision}: relative error {err}"


# Square; multiples of 16 but not of the blocks (pipelined, masked); not multiples of 16
# (scalar loads, no pipeline); tiny M or N.
SHAPES = [(128, 128, 128), (512, 512, 512), (1008, 528, 336), (1000, 520, 333), (129, 65, 17),
          (16, 2048, 48), (2048, 16, 1024)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_half_precision(shape, dtype):
    check(*shape, dtype, dtype, None)


@pytest.mark.parametrize("num_stages", [1, 2, 3, 4, 5])
def test_pipeline_depths(num_stages):
    # num_stages = 1: no pipelining (loads, then a conversion through shared memory).
    check(640, 384, 1000, torch.float16, torch.float32, None, (64, 128, 32),
          num_stages=num_stages)


@pytest.mark.parametrize("blocks,num_warps", [((64, 64, 32), 4), ((128, 256, 32), 8),
                                              ((256, 128, 32), 8), ((128, 128, 64), 8),
                                              ((64, 128, 32), 4), ((16, 16, 16), 1),
                                              ((32, 64, 16), 2)])
def test_tile_shapes(blocks, num_warps):
    check(1008, 528, 336, torch.float16, torch.float16, None, blocks, num_warps)
    check(1000, 520, 333, torch.float16, torch.float16, None, blocks, num_warps)


@pytest.mark.parametrize("precision", ["tf32", "tf32x3", "ieee"])
@pytest.mark.parametrize("shape", [(256, 256, 256), (333, 129, 65)],
                         ids=lambda s: "x".join(map(str, s)))
def test_float32(precision, shape):
    blocks, warps = ((32, 32, 16), 4) if precision == "ieee" else ((64, 64, 32), 4)
    check(*shape, torch.float32, torch.float32, precision, blocks, warps, bound_key=precision)


# The same kernel compiled with mma.sync on sm_90a too (knobs.wgmma off while it compiles):
# both tensor-core paths stay correct on Hopper.
mma_sync_kernel = tessera.jit(matmul_kernel.fn)


@pytest.mark.parametrize("shape", [(512, 512, 512), (1000, 520, 333), (1008, 528, 336)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_mma_sync_on_hopper_too(shape, dtype):
    from tessera.config import knobs
    M, N, K = shape
    gen = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = torch.randn((M, K), device="cuda", generator=gen).to(dtype)
    b = torch.randn((K, N), device="cuda", generator=gen).to(dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
            c.stride(1))
    meta = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "PRECISION": None}
    knobs.wgmma = False
    try:
        mma_sync_kernel[(tessera.cdiv(M, 128) * tessera.cdiv(N, 128),)](*args, **meta,
                                                                       num_warps=4, num_stages=3)
        ptx = mma_sync_kernel.asm(*args, **meta, num_warps=4, num_stages=3)["ptx"]
    finally:
        knobs.reset("wgmma")
    assert "mma.sync" in ptx and "wgmma" not in ptx
    ref = (a.double() @ b.double()).cpu().numpy()
    err = relative_error(c.double().cpu().numpy(), ref)
    assert err < BOUNDS[str(dtype).split(".")[-1]], err


def test_column_major_a():
    # A stored transposed (M contiguous): the operand tile is read with ldmatrix.trans.
    check(512, 256, 384, torch.float16, torch.float16, None, transposed_a=True)


@tessera.jit
def nt_kernel(a_ptr, bt_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    bt = tl.load(bt_ptr + rn[:, None] * K + rk[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, tl.trans(bt)))


def test_transposed_operand():
    a = torch.randn((64, 64), device="cuda", dtype=torch.float16)
    bt = torch.randn((128, 64), device="cuda", dtype=torch.float16)
    c = torch.full((64, 128), float("nan"), device="cuda")
    nt_kernel[(1,)](a, bt, c, M=64, N=128, K=64)
    ref = (a.double() @ bt.double().t()).cpu().numpy()
    assert relative_error(c.double().cpu().numpy(), ref) < 1e-5


@tessera.jit
def chained_kernel(q_ptr, k_ptr, v_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr,
                   D: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    kt = tl.load(k_ptr + rd[:, None] * N + rn[None, :])
    v = tl.load(v_ptr + rn[:, None] * D + rd[None, :])
    p = tl.dot(q, kt).to(tl.float16)       # stays in registers into the next dot
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], tl.dot(p, v))


@pytest.mark.parametrize("num_warps", [4, 8])
def test_chained_dots(num_warps):
    M, N, D = 128, 64, 64
    q = torch.randn((M, D), device="cuda", dtype=torch.float16) / 8
    kt = torch.randn((D, N), device="cuda", dtype=torch.float16) / 8
    v = torch.randn((N, D), device="cuda", dtype=torch.float16)
    o = torch.full((M, D), float("nan"), device="cuda")
    chained_kernel[(1,)](q, kt, v, o, M=M, N=N, D=D, num_warps=num_warps)
    p = (q.double() @ kt.double()).half().double()  # the kernel rounds P to f16 too
    ref = (p @ v.double()).cpu().numpy()
    assert relative_error(o.double().cpu().numpy(), ref) < 5e-3


@tessera.jit
def range_stages_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    r = tl.arange(0, BLOCK)
    rk = tl.arange(0, 32)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in tl.range(0, K, 32, num_stages=STAGES):
        a = tl.load(a_ptr + r[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BLOCK + r[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], acc)


@pytest.mark.parametrize("stages", [2, 3])
def test_range_num_stages(stages):
    K = 512
    a = torch.randn((64, K), device="cuda", dtype=torch.float16)
    b = torch.randn((K, 64), device="cuda", dtype=torch.float16)
    c = torch.full((64, 64), float("nan"), device="cuda")
    range_stages_kernel[(1,)](a, b, c, K, BLOCK=64, STAGES=stages)
    ptx = range_stages_kernel.asm(a, b, c, K, BLOCK=64, STAGES=stages)["ptx"]
    assert "cp.async" in ptx
    assert relative_error(c.double().cpu().numpy(), (a.double() @ b.double()).cpu().numpy()) < 1e-5


@tessera.jit
def accumulate_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """`acc += tl.dot(a, b)`, folded into the dot's accumulator (combine_dot_add)."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("shape", [(512, 512, 512), (1000, 520, 333)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_accumulate_with_plus_equals(shape, dtype):
    M, N, K = shape
    a = torch.randn((M, K), device="cuda").to(dtype)
    b = torch.randn((K, N), device="cuda").to(dtype)
    c = torch.full((M, N), float("nan"), device="cuda")
    args = (a, b, c, M, N, K)
    meta = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3}
    accumulate_kernel[(tessera.cdiv(M, 128), tessera.cdiv(N, 128))](*args, **meta)
    err = relative_error(c.double().cpu().numpy(), (a.double() @ b.double()).cpu().numpy())
    assert err < BOUNDS[str(dtype).split(".")[-1]], f"{shape} {dtype}: relative error {err}"
    if K % 16 == 0:
        assert accumulate_kernel.compile(*args, **meta).metadata.get("spill_stores", 0) == 0


@tessera.jit
def overlapped_products_kernel(a_ptr, b_ptr, c_ptr, x_ptr, out_ptr, sums_ptr, M, N, K,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr):
    # Two products in flight at once (the second, then a third accumulating into it, run
    # beside the first's exp2 on Hopper), and a cross-warp reduction between them whose
    # barrier waits for both: codegen's asynchronous wgmma.
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a_mask = (rm[:, None] < M) & ((k + rk)[None, :] < K)
        kn_mask = ((k + rk)[:, None] < K) & (rn[None, :] < N)
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=a_mask, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=kn_mask, other=0.0)
        c = tl.load(c_ptr + (k + rk)[:, None] * N + rn[None, :], mask=kn_mask, other=0.0)
        first = tl.dot(a, b)
        second = tl.dot(a, c)
        second = tl.dot(a, b, second)
        x = tl.load(x_ptr + (k + rk)[:, None] * N + rn[None, :], mask=kn_mask, other=0.0)
        tl.store(sums_ptr + tl.program_id(0) * K + k + rk, tl.sum(x, axis=1),
                 mask=(k + rk < K) & (tl.program_id(1) == 0))
        acc += tl.exp2(first) * second
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "waits"])
def test_products_in_flight_beside_other_work(overlap):
    from tessera.config import knobs
    M, N, K = 100, 72, 200
    a = (torch.randn((M, K), device="cuda") * 0.1).half()
    b, c = ((torch.randn((K, N), device="cuda") * 0.1).half() for _ in range(2))
    x = torch.randn((K, N), device="cuda")
    out = torch.full((M, N), float("nan"), device="cuda")
    sums = torch.full((2, K), float("nan"), device="cuda")
    with knobs.scope(wgmma_overlap=overlap):
        overlapped_products_kernel[(2, 2)](a, b, c, x, out, sums, M, N, K, BLOCK_M=64,
                                           BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=2)
    a64, b64, c64 = a.double(), b.double(), c.double()
    ref = sum(torch.exp2(a64[:, k:k + 64] @ b64[k:k + 64])
              * (a64[:, k:k + 64] @ (c64[k:k + 64] + b64[k:k + 64])) for k in range(0, K, 64))
    assert relative_error(out.double().cpu().numpy(), ref.cpu().numpy()) < 5e-3
    # Only the first column of programs writes the sums; N = 72 > 64 leaves 8 columns of x out
    # of each program's tile, so the reference is per tile: columns 0..63.
    col_ref = x[:, :64].double().sum(dim=1)
    assert relative_error(sums.double().cpu().numpy(), col_ref.expand(2, K).cpu().numpy()) < 1e-5


@tessera.jit
def delayed_products_kernel(q_ptr, k_ptr, v_ptr, out_ptr, N):
    """Per program (a head): Σ_j exp2(S_j - rowmax S_j) V_j, S_j = Q K_jᵀ, each P_j V_j issued
    a step late beside S_(j+1) (FlashAttention-3's order; P is wgmma's register A operand)."""
    head = tl.program_id(0)
    rows = tl.arange(0, 64)
    q = tl.load(q_ptr + head * 64 * 64 + rows[:, None] * 64 + rows[None, :])
    k_head, v_head = k_ptr + head * N * 64, v_ptr + head * N * 64
    p = tl.zeros((64, 64), tl.float16)
    acc = tl.zeros((64, 64), tl.float32)
    for n in range(0, N, 64):
        k = tl.load(k_head + (n + rows)[:, None] * 64 + rows[None, :])
        v = tl.load(v_head + (tl.maximum(n - 64, 0) + rows)[:, None] * 64 + rows[None, :])
        s = tl.dot(q, tl.trans(k))
        acc = tl.dot(p, v, acc)  # in flight through the row max and the exp2s
        p = tl.exp2(s - tl.max(s, axis=1)[:, None]).to(tl.float16)
    v = tl.load(v_head + (N - 64 + rows)[:, None] * 64 + rows[None, :])
    tl.store(out_ptr + head * 64 * 64 + rows[:, None] * 64 + rows[None, :], tl.dot(p, v, acc))


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "waits"])
def test_scores_beside_the_previous_product(overlap):
    from tessera.config import knobs
    heads, N = 3, 320
    q = (torch.randn((heads, 64, 64), device="cuda") * 0.3).half()
    k, v = ((torch.randn((heads, N, 64), device="cuda") * 0.3).half() for _ in range(2))
    out = torch.full((heads, 64, 64), float("nan"), device="cuda")
    with knobs.scope(wgmma_overlap=overlap):
        delayed_products_kernel[(heads,)](q, k, v, out, N, num_warps=4, num_stages=2)
    q64, k64, v64 = q.double(), k.double(), v.double()
    ref = 0
    for n in range(0, N, 64):
        s = q64 @ k64[:, n:n + 64].transpose(1, 2)
        ref = ref + torch.exp2(s - s.amax(dim=2, keepdim=True)) @ v64[:, n:n + 64]
    assert relative_error(out.double().cpu().numpy(), ref.cpu().numpy()) < 5e-3


# ---- tessera.ops.matmul: the library's autotuned kernel with its fused epilogue ----

@pytest.mark.parametrize("shape", [(512, 512, 512), (1000, 520, 333), (129, 65, 17),
                                   (4096, 4096, 4096)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("epilogue", [("", False), ("leaky_relu", True)],
                         ids=["plain", "bias-leaky-relu"])
def test_library_matmul(shape, dtype, epilogue):
    from tessera.ops import gemm, matmul
    M, N, K = shape
    activation, with_bias = epilogue
    gen = torch.Generator(device="cuda").manual_seed(M + N * 3 + K * 7 + with_bias)
    a = torch.randn((M, K), device="cuda", generator=gen).to(dtype)
    b = torch.randn((K, N), device="cuda", generator=gen).to(dtype)
    bias = torch.randn(N, device="cuda", generator=gen).to(dtype) if with_bias else None
    out = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    assert matmul(a, b, bias, activation, out) is out
    ref = a.double() @ b.double()
    if with_bias:
        ref = ref + bias.double()[None, :]
    if activation == "leaky_relu":
        ref = torch.where(ref >= 0, ref, 0.01 * ref)
    err = relative_error(out.double().cpu().numpy(), ref.cpu().numpy())
    assert err < BOUNDS[str(dtype).split(".")[-1]], f"{shape} {dtype} {activation}: {err}"
    assert gemm.tuned_matmul_kernel.best_config in gemm.CONFIGS + gemm.TMA_CONFIGS
