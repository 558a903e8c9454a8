"""``tessera.reinterpret``: pass a tensor's memory to a kernel as another dtype, as Triton's.

Frameworks may lack a dtype a kernel reads (fp8e4b15 has no torch or NumPy type; older torch
has no fp8 at all), so the bytes live in a same-width tensor (uint8, int16, ...) and the
kernel's pointer argument takes the dtype given here. Nothing is copied or converted.
"""
from __future__ import annotations

from typing import Any

from .language import core as _core


class TensorWrapper:
    """A tensor's memory seen as ``dtype`` (a ``tl.dtype``); made by :func:`reinterpret`.

    Launches read the address through ``data_ptr()`` (or the base's
    ``__cuda_array_interface__``); the interpreter views the base's memory. ``base`` is the
    wrapped tensor; shape, device and strides are the base's.
    """

    def __init__(self, base: Any, dtype: _core.dtype) -> None:
        self.base = base
        self.dtype = dtype
        self.data = base

    @property
    def _tessera_reinterpreted(self) -> Any:
        """The base, for the launcher's device and stream lookup (device/driver.py)."""
        return self.base

    @property
    def shape(self):
        return self.base.shape

    @property
    def device(self):
        return getattr(self.base, "device", "cpu")

    def data_ptr(self) -> int:
        """The address of the first element (torch, CuPy, NumPy and DLPack-only bases)."""
        base = self.base
        if hasattr(base, "data_ptr"):
            return int(base.data_ptr())
        for protocol in ("__cuda_array_interface__", "__array_interface__"):
            interface = getattr(base, protocol, None)
            if interface is not None:
                return int(interface["data"][0])
        from .device import driver
        return int(driver.tensor_info(base)[0])

    @property
    def __cuda_array_interface__(self) -> dict:
        interface = self.base.__cuda_array_interface__  # AttributeError for host memory
        return dict(interface)

    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= int(size)
        return count

    def element_size(self) -> int:
        return self.dtype.primitive_bitwidth // 8

    def stride(self, *args: Any):
        return self.base.stride(*args)

    def __str__(self) -> str:
        return f"TensorWrapper[{self.dtype}]({self.base})"

    # Triton's TensorWrapper methods: the base's, re-wrapped in the same dtype.
    def cpu(self) -> "TensorWrapper":
        return TensorWrapper(self.base.cpu(), self.dtype)

    def clone(self) -> "TensorWrapper":
        base = self.base
        return TensorWrapper(base.clone() if hasattr(base, "clone") else base.copy(), self.dtype)

    def to(self, device: Any) -> "TensorWrapper":
        return TensorWrapper(self.base.to(device), self.dtype)

    def new_empty(self, sizes: Any) -> "TensorWrapper":
        return TensorWrapper(self.base.new_empty(sizes), self.dtype)

    def copy_(self, other: "TensorWrapper") -> None:
        source = other.base if isinstance(other, TensorWrapper) else other
        if hasattr(self.base, "copy_"):
            self.base.copy_(source)
        else:  # NumPy
            self.base[...] = source


def reinterpret(tensor: Any, dtype: _core.dtype) -> Any:
    """``tensor``'s memory as ``dtype`` for a kernel argument (no copy), as Triton's
    ``triton.reinterpret``. Reinterpreting a wrapper as its base's own dtype gives the base.

    Example::

        codes = torch.empty(n, dtype=torch.uint8, device="cuda")
        to_fp8_kernel[grid](x, tessera.reinterpret(codes, tl.float8e4b15), n, BLOCK=1024)
    """
    if isinstance(tensor, TensorWrapper) and dtype == getattr(tensor.base, "dtype", None):
        return tensor.base
    if not isinstance(dtype, _core.dtype):
        raise TypeError(f"reinterpret needs a tl dtype (e.g. tl.float8e4nv), got {dtype!r}")
    if isinstance(tensor, TensorWrapper):
        return TensorWrapper(tensor.base, dtype)
    if any(hasattr(tensor, attr) for attr in ("data_ptr", "__cuda_array_interface__",
                                                "__array_interface__", "__dlpack__")):
        return TensorWrapper(tensor, dtype)
    raise TypeError(f"cannot reinterpret a {type(tensor).__name__}: pass a tensor or array")
