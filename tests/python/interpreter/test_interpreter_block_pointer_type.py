# A block pointer's type, as Triton's: a pointer to a block (p.dtype.element_ty is the block
# type) and x.to(<block type>) casts to the block's element dtype. Checked against NumPy.
import numpy as np
import pytest

import tessera
import tessera.language as tl


@tessera.jit(interpret=True)
def copy_through_block_type(src_ptr, dst_ptr, N, BLOCK: tl.constexpr):
    block_ptr = tl.make_block_ptr(base=src_ptr, shape=(N, ), strides=(1, ), offsets=(0, ),
                                  block_shape=(BLOCK, ), order=(0, ))
    tl.static_assert(block_ptr.dtype.element_ty.scalar == src_ptr.dtype.element_ty)
    tl.static_assert(block_ptr.dtype.element_ty.shape == [BLOCK])
    tl.static_assert(block_ptr.type.is_ptr())
    values = tl.load(block_ptr, boundary_check=(0, ), padding_option="zero").to(tl.float32)
    back = values.to(block_ptr.dtype.element_ty)
    tl.static_assert(back.dtype == src_ptr.dtype.element_ty)
    tl.store(dst_ptr + tl.arange(0, BLOCK), back)


@pytest.mark.parametrize("n", [5, 16])
def test_block_pointer_type_and_cast_to_a_block_type(n):
    rng = np.random.default_rng()
    src = rng.standard_normal(n).astype(np.float16)
    dst = np.full(16, 7, np.float16)
    copy_through_block_type[(1,)](src, dst, n, BLOCK=16)
    np.testing.assert_array_equal(dst, np.concatenate([src, np.zeros(16 - n, np.float16)]))
