"""Atomics on the GPU: every element applied exactly once, old values returned to every thread
that holds a copy, masks, float max/min through the bits, cas, and acquire/release ordering
(a spin lock guarding a non-atomic read-modify-write). Fresh random inputs; references from
NumPy / Python; outputs poisoned before each launch.
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import tessera
import tessera.language as tl


@tessera.jit
def rmw_kernel(target_ptr, index_ptr, value_ptr, old_ptr, n, OP: tl.constexpr,
               SEM: tl.constexpr, SCOPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    index = tl.load(index_ptr + offs, mask=mask)
    value = tl.load(value_ptr + offs, mask=mask)
    old = getattr(tl, "atomic_" + OP)(target_ptr + index, value, mask=mask, sem=SEM, scope=SCOPE)
    tl.store(old_ptr + offs, old, mask=mask)


def launch(op, target, index, value, sem="acq_rel", scope="gpu", block=256):
    n = index.numel()
    old = torch.full_like(value, -7) if not value.is_floating_point() else \
        torch.full_like(value, float("nan"))
    rmw_kernel[(tessera.cdiv(n, block),)](target, index, value, old, n, OP=op, SEM=sem,
                                          SCOPE=scope, BLOCK=block)
    return old


@pytest.mark.parametrize("sem,scope", [("acq_rel", "gpu"), ("relaxed", "gpu"), ("release", "cta"),
                                       ("acquire", "sys")])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_histogram_counts_and_distinct_tickets(dtype, sem, scope):
    n, bins = 100003, 37
    index = torch.randint(0, bins, (n,), device="cuda", dtype=torch.int32)
    target = torch.zeros(bins, device="cuda", dtype=dtype)
    old = launch("add", target, index, torch.ones(n, device="cuda", dtype=dtype), sem, scope)
    counts = torch.bincount(index.long(), minlength=bins)
    assert torch.equal(target.long(), counts)
    # Each element saw a distinct count before it: per bin, the old values are 0 .. count-1.
    order = torch.argsort(index.long() * n + old.long())
    expected = torch.cat([torch.arange(int(c), device="cuda") for c in counts])
    assert torch.equal(old.long()[order], expected)


@pytest.mark.parametrize("dtype,tolerance", [(torch.float32, 1e-5), (torch.float64, 1e-12),
                                             (torch.float16, 5e-3), (torch.bfloat16, 1e-2)])
def test_float_add_sums_every_element(dtype, tolerance):
    n, bins = 50000, 2048  # about 24 adds per element: fp16/bf16 round at each
    index = torch.randint(0, bins, (n,), device="cuda", dtype=torch.int32)
    value = torch.randn(n, device="cuda").to(dtype)
    initial = torch.randn(bins, device="cuda").to(dtype)
    target = initial.clone()
    launch("add", target, index, value, sem="relaxed")
    ref = initial.double().index_add(0, index.long(), value.double())
    if dtype in (torch.float16, torch.bfloat16):  # each add rounds to the type: bound the sum
        scale = initial.double().abs().index_add(0, index.long(), value.double().abs())
        assert torch.all((target.double() - ref).abs() <= tolerance * scale * 8)
    else:
        assert tessera.testing.relative_error(target.cpu().numpy(), ref.cpu().numpy()) < tolerance


@tessera.jit
def contiguous_add_kernel(target_ptr, value_ptr, old_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)  # every program adds into the same n elements
    mask = offs < n
    value = tl.load(value_ptr + tl.program_id(0) * n + offs, mask=mask)
    old = tl.atomic_add(target_ptr + offs, value, mask=mask, sem="relaxed")
    tl.store(old_ptr + tl.program_id(0) * n + offs, old, mask=mask)


@pytest.mark.parametrize("n", [1024, 1000, 999])  # f16x2 pairs when n % 16 == 0; else scalar
def test_fp16_add_of_contiguous_elements(n):
    programs = 16
    values = torch.randn((programs, n), device="cuda").half()
    initial = torch.randn(n, device="cuda").half()
    target = initial.clone()
    old = torch.full((programs, n), float("nan"), device="cuda", dtype=torch.float16)
    contiguous_add_kernel[(programs,)](target, values, old, n, BLOCK=1024)
    ref = initial.double() + values.double().sum(0)
    scale = initial.double().abs() + values.double().abs().sum(0)
    assert torch.all((target.double() - ref).abs() <= 16 * 2 ** -11 * scale)  # 16 roundings
    # The first program to reach an element saw its initial value (bit for bit): a swapped or
    # unpublished half of a pair would not.
    assert torch.isfinite(old).all()
    assert (old == initial[None, :]).any(0).all()


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float64])
def test_max_min(op, dtype):
    n, bins = 20000, 50
    index = torch.randint(0, bins, (n,), device="cuda", dtype=torch.int32)
    if dtype.is_floating_point:
        value = (torch.randn(n, device="cuda") * 100).to(dtype)  # both signs: the bit trick
        target = (torch.randn(bins, device="cuda") * 100).to(dtype)
    else:
        value = torch.randint(-10**6, 10**6, (n,), device="cuda", dtype=dtype)
        target = torch.randint(-10**6, 10**6, (bins,), device="cuda", dtype=dtype)
    initial = target.clone()
    launch(op, target, index, value)
    reduce = "amax" if op == "max" else "amin"
    ref = initial.clone().scatter_reduce(0, index.long(), value, reduce, include_self=True)
    assert torch.equal(target, ref)


UINT32_POINTER = tl.constexpr(tl.pointer_type(tl.uint32))


@tessera.jit
def umax_kernel(target_ptr, value_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_max(target_ptr.to(UINT32_POINTER) + offs, tl.load(value_ptr + offs).to(tl.uint32))


def test_unsigned_max_compares_bits_as_unsigned():
    target = torch.zeros(4, device="cuda", dtype=torch.int32)
    value = torch.tensor([1, -1, 5, 7], device="cuda", dtype=torch.int32)  # -1 is 0xffffffff
    umax_kernel[(1,)](target, value, BLOCK=4)
    assert target.tolist() == [1, -1, 5, 7]  # a signed max would keep 0 for -1


@pytest.mark.parametrize("op", ["and", "or", "xor", "xchg"])
def test_bitwise_and_exchange(op):
    n = 4096
    index = torch.randperm(n, device="cuda", dtype=torch.int64).to(torch.int32)  # distinct
    value = torch.randint(-2**31, 2**31 - 1, (n,), device="cuda", dtype=torch.int32)
    target = torch.randint(-2**31, 2**31 - 1, (n,), device="cuda", dtype=torch.int32)
    initial = target.clone()
    old = launch(op, target, index, value)
    assert torch.equal(old, initial[index.long()])
    before = initial[index.long()]
    expected = {"and": before & value, "or": before | value, "xor": before ^ value,
                "xchg": value}[op]
    assert torch.equal(target[index.long()], expected)


@tessera.jit
def small_tile_kernel(target_ptr, old_ptr, tickets_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)  # 16 elements on 4 warps: every warp holds a copy
    old = tl.atomic_add(target_ptr + offs, 1.0)
    # A [16, 8] tile has no copies: every thread stores, so every thread needs the old values.
    spread = old[:, None] + tl.zeros([BLOCK, 8], dtype=tl.float32)
    tl.store(old_ptr + offs[:, None] * 8 + tl.arange(0, 8)[None, :], spread)
    ticket = tl.atomic_add(target_ptr + BLOCK, 1.0)  # a scalar: once per program
    lanes = tl.arange(0, 8)
    tl.store(tickets_ptr + tl.program_id(0) * 8 + lanes, ticket + tl.zeros([8], tl.float32))


def test_duplicated_elements_update_once_and_share_the_old_value():
    target = torch.zeros(17, device="cuda")
    for launch_index in range(2):  # one program: the old values are exactly known
        old = torch.full((16, 8), float("nan"), device="cuda")
        tickets = torch.full((8,), float("nan"), device="cuda")
        small_tile_kernel[(1,)](target, old, tickets, BLOCK=16)
        assert torch.equal(old, torch.full((16, 8), float(launch_index), device="cuda"))
        assert torch.equal(tickets, torch.full((8,), float(launch_index), device="cuda"))
    programs = 64
    old = torch.full((16, 8), float("nan"), device="cuda")
    tickets = torch.full((programs, 8), float("nan"), device="cuda")
    small_tile_kernel[(programs,)](target, old, tickets, BLOCK=16)
    assert torch.equal(target, torch.full((17,), float(programs + 2), device="cuda"))
    assert torch.equal(tickets[:, 0].sort().values,
                       torch.arange(2, programs + 2, device="cuda", dtype=torch.float32))
    assert torch.equal(tickets, tickets[:, :1].expand(programs, 8))


@tessera.jit
def masked_kernel(target_ptr, old_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(old_ptr + offs, tl.atomic_xchg(target_ptr + offs, 5, mask=offs < n))


def test_masked_lanes_are_untouched_and_return_zero():
    target = torch.full((128,), 3, device="cuda", dtype=torch.int32)
    old = torch.full((128,), -7, device="cuda", dtype=torch.int32)
    masked_kernel[(1,)](target, old, 100, BLOCK=128)
    assert target.tolist() == [5] * 100 + [3] * 28
    assert old.tolist() == [3] * 100 + [0] * 28


@tessera.jit
def cas_kernel(target_ptr, cmp_ptr, value_ptr, old_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    cmp = tl.load(cmp_ptr + offs, mask=mask)
    value = tl.load(value_ptr + offs, mask=mask)
    ptrs = target_ptr + tl.where(mask, offs, 0)
    old = tl.atomic_cas(ptrs, cmp, tl.where(mask, value, cmp))  # masked lanes change nothing
    tl.store(old_ptr + offs, old, mask=mask)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float16])
def test_cas_swaps_where_bits_match(dtype):
    n = 3001
    target = (torch.randn(n, device="cuda") * 100).to(dtype)
    cmp = (torch.randn(n, device="cuda") * 100).to(dtype)
    copied = torch.rand(n, device="cuda") < 0.5
    cmp[copied] = target[copied]
    value = (torch.randn(n, device="cuda") * 100).to(dtype)
    initial = target.clone()
    old = torch.zeros_like(target)
    cas_kernel[(tessera.cdiv(n, 512),)](target, cmp, value, old, n, BLOCK=512)
    assert torch.equal(old, initial)
    # Swapped: every element whose bits match, not only those copied above (random integers,
    # and fp16, also match by chance: about 4 of 1500 elements in int32 per run).
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[target.element_size()]
    swap = cmp.view(bits) == initial.view(bits)
    assert torch.equal(target, torch.where(swap, value, initial))


@tessera.jit
def locked_increment(lock_ptr, counter_ptr, SEM_ACQUIRE: tl.constexpr,
                     SEM_RELEASE: tl.constexpr):
    while tl.atomic_cas(lock_ptr, 0, 1, sem=SEM_ACQUIRE) == 1:
        pass
    count = tl.load(counter_ptr)  # a plain read-modify-write, safe only under the lock
    tl.store(counter_ptr, count + 1)
    tl.atomic_xchg(lock_ptr, 0, sem=SEM_RELEASE)


@pytest.mark.parametrize("acquire,release", [("acquire", "release"), ("acq_rel", "acq_rel")])
def test_spin_lock_orders_the_critical_sections(acquire, release):
    programs = 2048
    lock = torch.zeros(1, device="cuda", dtype=torch.int32)
    counter = torch.zeros(1, device="cuda", dtype=torch.int32)
    locked_increment[(programs,)](lock, counter, SEM_ACQUIRE=acquire, SEM_RELEASE=release)
    assert counter.item() == programs and lock.item() == 0


def test_no_spills():
    x = torch.zeros(1024, device="cuda", dtype=torch.float32)
    i = torch.zeros(1024, device="cuda", dtype=torch.int32)
    compiled = rmw_kernel.compile(x, i, x, x, 1024, OP="max", SEM="acq_rel", SCOPE="gpu",
                                  BLOCK=256)
    assert compiled.metadata.get("spill_stores", 0) == 0
