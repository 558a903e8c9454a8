"""``TensorDescriptor``: a host-side tensor descriptor passed to a kernel as one argument.

As Triton's ``triton.tools.tensor_descriptor.TensorDescriptor``. In the kernel the parameter
is a ``tl.tensor_descriptor`` (``desc.load(offsets)``, ``desc.store(offsets, value)``,
``desc.shape``, ``desc.strides``, ``desc.block_shape``, ``desc.dtype``). At launch it expands
to its base pointer, its shape (int32) and its strides (int64)
(tessera/runtime/descriptor_arguments.py); its dtype, block shape and padding are part of
the kernel's specialization. Example::

    from tessera.tools.tensor_descriptor import TensorDescriptor

    a_desc = TensorDescriptor.from_tensor(a, block_shape=[BLOCK_M, BLOCK_K])
    kernel[grid](a_desc, ...)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List

from ..type_codes import dtype_code

MAX_TENSOR_NUMEL = 1 << 20


def data_pointer(base: Any) -> int:
    """The address of a tensor's first element (torch, NumPy, CUDA array interface)."""
    if hasattr(base, "data_ptr"):
        return int(base.data_ptr())
    if hasattr(base, "__cuda_array_interface__"):
        return int(base.__cuda_array_interface__["data"][0])
    if hasattr(base, "__array_interface__"):
        return int(base.__array_interface__["data"][0])
    raise TypeError(f"a TensorDescriptor's base must be a tensor or an array, got "
                    f"{type(base).__name__}")


def element_strides(tensor: Any) -> List[int]:
    """Strides in elements: torch's ``stride()``, NumPy's byte ``strides`` divided."""
    strides = tensor.stride() if callable(getattr(tensor, "stride", None)) else None
    if strides is None:
        itemsize = tensor.dtype.itemsize
        strides = [s // itemsize for s in tensor.strides]
    return [int(s) for s in strides]


def _is_floating(dtype: Any) -> bool:
    return dtype_code(dtype).startswith(("fp", "bf"))


@dataclass
class TensorDescriptor:
    """A ``base`` tensor of ``shape`` and ``strides`` (elements) read and written in
    ``block_shape`` blocks; ``padding`` ("zero" or "nan") fills loads outside the tensor.
    Checked as Triton does: 1 to 5 dims, a 16-byte-aligned base, leading strides of
    multiples of 16 bytes, a contiguous last dim, power-of-2 block dims."""

    base: Any
    shape: List[int]
    strides: List[int]
    block_shape: List[int]
    padding: str = "zero"

    def __post_init__(self) -> None:
        self.shape = [int(s) for s in self.shape]
        self.strides = [int(s) for s in self.strides]
        self.block_shape = [int(b) for b in self.block_shape]
        rank = len(self.shape)
        if not 1 <= rank <= 5:
            raise ValueError(f"TensorDescriptor: rank must be 1 to 5, got {rank}")
        if len(self.strides) != rank or len(self.block_shape) != rank:
            raise ValueError(f"TensorDescriptor: shape, strides and block_shape must have one "
                             f"length, got {self.shape}, {self.strides}, {self.block_shape}")
        if data_pointer(self.base) % 16:
            raise ValueError("TensorDescriptor: base must be 16-byte aligned")
        numel = 1
        for index, size in enumerate(self.block_shape):
            if size <= 0 or size & (size - 1):
                raise ValueError(f"TensorDescriptor: block_shape[{index}] must be a power of "
                                 f"2, got {size}")
            numel *= size
        if numel > MAX_TENSOR_NUMEL:
            raise ValueError(f"TensorDescriptor: a block of {numel} elements exceeds "
                             f"{MAX_TENSOR_NUMEL}")
        itemsize = self.base.dtype.itemsize
        for stride in self.strides[:-1]:
            if stride * itemsize % 16:
                raise ValueError(f"TensorDescriptor: strides must be multiples of 16 bytes "
                                 f"(except the last), got {self.strides}")
        if any(size <= 0 for size in self.shape):
            raise ValueError(f"TensorDescriptor: shape must be positive, got {self.shape}")
        if self.strides[-1] != 1:
            raise ValueError(f"TensorDescriptor: the last dim must be contiguous (stride 1), "
                             f"got strides {self.strides}")
        if self.padding not in ("zero", "nan"):
            raise ValueError(f"TensorDescriptor: padding must be \"zero\" or \"nan\", got "
                             f"{self.padding!r}")
        if self.padding == "nan" and not _is_floating(self.base.dtype):
            raise ValueError("TensorDescriptor: padding \"nan\" needs a floating-point tensor")

    @staticmethod
    def from_tensor(tensor: Any, block_shape: List[int], padding: str = "zero"
                    ) -> "TensorDescriptor":
        """The descriptor of a whole tensor: its own shape and strides.
        Example: ``TensorDescriptor.from_tensor(a, [64, 32])``."""
        return TensorDescriptor(tensor, list(tensor.shape), element_strides(tensor),
                                list(block_shape), padding)
