# Bad input to interpreted kernels gives a clear error naming the kernel and the argument or the
# line: unsupported dtypes, a number for a pointer, an array of the wrong width, out-of-bounds
# accesses without a mask, and strided views with gaps addressed as if contiguous.
import inspect

import numpy as np
import pytest
import tessera
import tessera.language as tl
from interpreter_ir import KernelBuilder, T, ptr
from tessera import interpreter
from tessera.errors import CompilationError
from tessera.interpreter import KernelRuntimeError


def line_of(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if marker in text)


@tessera.jit(interpret=True)
def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # LOAD
    tl.store(out_ptr + offs, x)  # STORE


@tessera.jit(interpret=True)
def strided_copy_kernel(x_ptr, out_ptr, stride_row, stride_col, COLS: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, COLS)
    x = tl.load(x_ptr + row * stride_row + cols * stride_col)
    tl.store(out_ptr + row * COLS + cols, x)


@pytest.mark.parametrize("data", [np.zeros(8, np.complex64), np.array(["a"] * 8),
                                  np.zeros(8, object)])
def test_unsupported_dtypes_name_kernel_and_argument(data):
    with pytest.raises(TypeError, match=r"^copy_kernel: argument 'x_ptr': unsupported tensor "
                                        r"dtype"):
        copy_kernel[(1,)](data, np.zeros(8, np.float32), BLOCK=8)


def test_a_number_for_a_pointer_names_kernel_and_line():
    with pytest.raises(CompilationError, match="load needs a pointer") as info:
        copy_kernel[(1,)](1.5, np.zeros(8, np.float32), BLOCK=8)
    error = info.value
    assert error.kernel_name == "copy_kernel"
    assert error.lineno == line_of(copy_kernel.fn, "# LOAD") and "x_ptr" in error.source_line


def test_ir_arguments_of_the_wrong_width_or_kind_are_refused():
    kb = KernelBuilder("k", [ptr("f32"), T("i32")])
    x, _ = kb.args
    kb.store(x, kb.load(x))
    module = kb.finish()
    with pytest.raises(KernelRuntimeError, match=r"kernel 'k'.*argument 'x' \(#0, ptr<f32>\): "
                                                 r"got a float64 array \(8-byte elements\)"):
        interpreter.run(module, (1,), [np.zeros(4), 1], arg_names=["x", "n"])
    with pytest.raises(KernelRuntimeError, match=r"argument #0 \(ptr<f32>\): arrays of dtype "
                                                 r"complex64 are not supported"):
        interpreter.run(module, (1,), [np.zeros(4, np.complex64), 1])
    interpreter.run(module, (1,), [np.zeros(4, np.int32), 1])  # same width: the GPU's view


def test_unmasked_out_of_bounds_names_kernel_program_line_and_argument():
    x = np.arange(12, dtype=np.float32)
    with pytest.raises(KernelRuntimeError) as info:
        copy_kernel[(2,)](x, np.zeros(16, np.float32), BLOCK=8)
    error = info.value
    assert error.kernel == "copy_kernel" and error.pid == (1,)
    assert error.location.startswith(f"{__file__}:{line_of(copy_kernel.fn, '# LOAD')}:")
    assert "argument 'x_ptr' (#0)" in str(error) and "element offset 12" in str(error)


@pytest.mark.parametrize("view", ["every_other_column", "column_slice"])
def test_views_with_gaps_read_at_unit_stride_raise(view):
    base = np.arange(64, dtype=np.float32).reshape(8, 8)
    x = base[:, ::2] if view == "every_other_column" else base[:, :4]
    out = np.zeros(32, np.float32)
    with pytest.raises(KernelRuntimeError) as info:
        copy_kernel[(4,)](x, out, BLOCK=8)
    message = str(info.value)
    assert "kernel 'copy_kernel', program (0,)" in message
    assert f":{line_of(copy_kernel.fn, '# LOAD')}:" in info.value.location
    assert "falls between the elements of argument 'x_ptr' (#0)" in message
    assert f"strides {x.strides}" in message and "np.ascontiguousarray" in message
    # The same view, addressed through its strides, is fine; so is a contiguous copy.
    strided_copy_kernel[(8,)](x, out, x.strides[0] // 4, x.strides[1] // 4, COLS=4)
    np.testing.assert_array_equal(out.reshape(8, 4), x)
    copy_kernel[(4,)](np.ascontiguousarray(x), out, BLOCK=8)
    np.testing.assert_array_equal(out.reshape(8, 4), x)


def test_writes_into_a_gap_raise_and_leave_it_alone():
    base = np.zeros((4, 4), np.float32)
    with pytest.raises(KernelRuntimeError, match=r"store of float32 .* falls between the "
                                                 r"elements of argument 'out_ptr' \(#1\)"):
        copy_kernel[(1,)](np.ones(8, np.float32), base[:, :2], BLOCK=8)
    assert base[0, 2] == 0 and base[0, 3] == 0  # stores are checked before any lane lands


def test_dense_views_in_another_order_read_memory_as_the_gpu_does():
    # a.T covers its memory without gaps: the kernel sees the bytes in memory order, as a GPU
    # given the data pointer would; only the strides tell the transpose apart.
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = np.zeros(16, np.float32)
    copy_kernel[(2,)](a.T, out, BLOCK=8)
    np.testing.assert_array_equal(out, a.reshape(-1))
    strided_copy_kernel[(4,)](a.T, out, 1, 4, COLS=4)
    np.testing.assert_array_equal(out.reshape(4, 4), a.T)


def test_broadcast_views_overlap_and_can_be_read():
    row = np.arange(4, dtype=np.float32)
    x = np.broadcast_to(row, (3, 4))  # stride 0: every row is the same memory
    out = np.zeros(12, np.float32)
    strided_copy_kernel[(3,)](x, out, 0, 1, COLS=4)
    np.testing.assert_array_equal(out.reshape(3, 4), x)
