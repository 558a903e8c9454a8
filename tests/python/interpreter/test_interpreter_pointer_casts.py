# Pointer <-> integer casts as Triton's: ptr.to(tl.int64), int64 arithmetic on addresses,
# x.to(tl.pointer_type(...)) / tl.cast(..., tl.pointer_type(...)) back, pointer-to-pointer
# casts, pointer -> bool; tessera.reinterpret of host arrays; against NumPy, ragged sizes.
import numpy as np
import pytest

import tessera
import tessera.language as tl


@tessera.jit(interpret=True)
def gather_by_address_kernel(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    idx = tl.load(idx_ptr + offs, mask=offs < n, other=0)
    base = x_ptr.to(tl.int64)                        # pointer -> int64 (a scalar)
    addresses = base + idx.to(tl.int64) * 4          # byte arithmetic in int64
    pointers = addresses.to(tl.pointer_type(tl.float32))
    values = tl.load(pointers, mask=offs < n)
    as_bits = tl.cast(out_ptr, tl.pointer_type(tl.int32))  # pointer -> pointer
    tl.store(as_bits + offs, values.to(tl.int32, bitcast=True), mask=offs < n)


def test_int64_addresses_round_trip_to_pointers(rng):
    n = 1000
    x = rng.normal(size=777).astype(np.float32)
    idx = rng.integers(0, 777, n).astype(np.int32)
    out = np.zeros(n, np.float32)
    gather_by_address_kernel[(tessera.cdiv(n, 256),)](x, idx, out, n, BLOCK=256)
    np.testing.assert_array_equal(out, x[idx])


@tessera.jit(interpret=True)
def null_check_kernel(x_ptr, out_ptr, USE_NULL: tl.constexpr):
    p = x_ptr
    if USE_NULL:
        p = tl.full([], 0, tl.int64).to(tl.pointer_type(tl.float32))
    tl.store(out_ptr, p.to(tl.int1).to(tl.int32))


@pytest.mark.parametrize("use_null", [False, True])
def test_pointer_to_bool_is_not_null(use_null):
    out = np.full(1, 7, np.int32)
    null_check_kernel[(1,)](np.zeros(4, np.float32), out, USE_NULL=use_null)
    assert out[0] == (0 if use_null else 1)


@tessera.jit(interpret=True)
def bad_pointer_cast_kernel(x_ptr, out_ptr):
    tl.store(out_ptr, x_ptr.to(tl.int32))


def test_pointer_to_int32_is_refused_with_the_line():
    with pytest.raises(tessera.CompilationError, match="cannot cast") as error:
        bad_pointer_cast_kernel[(1,)](np.zeros(4, np.float32), np.zeros(1, np.int32))
    assert "bad_pointer_cast_kernel" in str(error.value)


@tessera.jit(interpret=True)
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_reinterpret_passes_the_bytes_as_another_dtype(rng):
    n = 300
    x = rng.normal(size=n).astype(np.float32)
    bits = np.zeros(n, np.int32)
    copy_kernel[(3,)](tessera.reinterpret(x, tl.int32), bits, n, BLOCK=128)
    np.testing.assert_array_equal(bits, x.view(np.int32))
    wrapper = tessera.reinterpret(np.zeros(4, np.uint8), tl.float8e5)
    assert wrapper.dtype == tl.float8e5 and wrapper.element_size() == 1
    assert tessera.reinterpret(wrapper, wrapper.base.dtype) is wrapper.base
    with pytest.raises(TypeError, match="tl dtype"):
        tessera.reinterpret(x, np.float32)
