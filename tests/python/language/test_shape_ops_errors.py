"""Misused shape builtins fail the compilation with an error that names the kernel, the
source line (with a caret) and what is wrong, never a bare Python exception."""
import pytest

import tessera.language as tl
from tessera.errors import CompilationError
from tessera.frontend import build_module

SOURCE = open(__file__).read().splitlines()


def line_of(marker):
    return next(i for i, line in enumerate(SOURCE) if line.rstrip().endswith(marker)) + 1


def join_mixed_dtypes(x_ptr, y_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.store(x_ptr + tl.arange(0, 8), tl.interleave(x, x.to(tl.int32)))  # E_JOIN


def split_not_two(x_ptr, y_ptr):
    a, b = tl.split(tl.load(x_ptr + tl.arange(0, 4)))  # E_SPLIT


def gather_float_index(x_ptr, y_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.store(x_ptr + tl.arange(0, 4), tl.gather(x, x, 0))  # E_GATHER_INDEX


def gather_rank(x_ptr, y_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.store(x_ptr + tl.arange(0, 4), tl.gather(x, tl.arange(0, 4)[:, None], 0))  # E_GATHER_RANK


def histogram_float(x_ptr, y_ptr):
    tl.histogram(tl.load(x_ptr + tl.arange(0, 4)), 4)  # E_HIST_FLOAT


def histogram_bins(x_ptr, y_ptr):
    tl.histogram(tl.load(y_ptr + tl.arange(0, 4)), 6)  # E_HIST_BINS


def sort_major(x_ptr, y_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4)[:, None] * 4 + tl.arange(0, 4)[None, :])
    tl.sort(x, 0)  # E_SORT_DIM


def topk_too_many(x_ptr, y_ptr):
    tl.topk(tl.load(x_ptr + tl.arange(0, 4)), 8)  # E_TOPK


def cat_shapes(x_ptr, y_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.cat(x, tl.load(x_ptr + tl.arange(0, 8)))  # E_CAT


def transpose_3d(x_ptr, y_ptr):
    x = tl.load(x_ptr + tl.arange(0, 8)).reshape(2, 2, 2)
    y = x.T  # E_T_3D


def item_of_many(x_ptr, y_ptr):
    tl.store(x_ptr, tl.load(x_ptr + tl.arange(0, 4)).item())  # E_ITEM


def expand_duplicate(x_ptr, y_ptr):
    tl.expand_dims(tl.load(x_ptr + tl.arange(0, 4)), (0, -3))  # E_EXPAND


def expand_out_of_range(x_ptr, y_ptr):
    tl.expand_dims(tl.load(x_ptr + tl.arange(0, 4)), -3)  # E_EXPAND_AXIS


def power_of_tensor(x_ptr, y_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.store(x_ptr + tl.arange(0, 4), x ** 2)  # E_POW


CASES = [
    (join_mixed_dtypes, "E_JOIN", "join needs two tensors of one dtype, got fp32 and int32"),
    (split_not_two, "E_SPLIT", "split needs a last dimension of size 2"),
    (gather_float_index, "E_GATHER_INDEX", "gather's index must be an integer tensor"),
    (gather_rank, "E_GATHER_RANK", "gather's source and index must have one rank"),
    (histogram_float, "E_HIST_FLOAT", "histogram needs integers, got fp32"),
    (histogram_bins, "E_HIST_BINS", "histogram's num_bins must be a power of 2, got 6"),
    (sort_major, "E_SORT_DIM", "sort and topk support only the minor dimension"),
    (topk_too_many, "E_TOPK", "topk's k (8) exceeds the dimension's size (4)"),
    (cat_shapes, "E_CAT", "cat needs two tensors of one shape"),
    (transpose_3d, "E_T_3D", "trans dims [1, 0] must have one entry per dim"),
    (item_of_many, "E_ITEM", "item() needs a tensor of one element"),
    (expand_duplicate, "E_EXPAND", "expand_dims got duplicate axes, normalized axes = [0, 0]"),
    # Triton's words for an axis out of range, which its tests match
    (expand_out_of_range, "E_EXPAND_AXIS", "invalid axis -3. Expected -2 <= axis < 2"),
    # Triton's tensor has no __pow__ either.
    (power_of_tensor, "E_POW", "operator Pow is not supported on runtime values"),
]


@pytest.mark.parametrize("kernel, marker, message", CASES, ids=[c[1] for c in CASES])
def test_error_names_kernel_line_and_problem(kernel, marker, message):
    with pytest.raises(CompilationError) as info:
        build_module(kernel, {"x_ptr": "*fp32", "y_ptr": "*i32"}, {})
    error = info.value
    assert error.kernel_name == kernel.__name__ and error.filename == __file__
    assert error.lineno == line_of(marker), str(error)
    assert message in error.message, error.message
    assert SOURCE[error.lineno - 1] in str(error)
