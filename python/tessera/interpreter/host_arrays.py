"""A host argument's memory as a NumPy array, for the interpreter's pointer and tensor-map
arguments (arguments.py, tma.py)."""
from __future__ import annotations

from typing import Any

import numpy as np


def _torch_view(tensor) -> np.ndarray:
    """PyTorch dtypes NumPy lacks (bf16, fp8): share the memory as same-width integers; the
    kernel reads it through its own pointee type anyway."""
    import torch

    same_width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return np.from_dlpack(tensor.view(same_width[tensor.element_size()]))


def as_array(obj: Any, reject) -> np.ndarray:
    """The NumPy view of a kernel argument's memory (no copy): a NumPy array, a CPU tensor
    through DLPack (or as same-width integers where NumPy lacks its dtype), anything with an
    array interface; otherwise `reject(reason)`, which raises."""
    from ..reinterpret import TensorWrapper
    if isinstance(obj, TensorWrapper):  # the kernel reads the bytes as its pointee type
        obj = obj.base
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__dlpack__"):
        is_torch = type(obj).__module__.startswith("torch")
        if is_torch and getattr(obj, "requires_grad", False):
            obj = obj.detach()  # same storage, no autograd
        try:
            return np.from_dlpack(obj)
        except (BufferError, TypeError, ValueError, RuntimeError) as e:
            device = getattr(obj, "device", None)
            if is_torch and str(device) == "cpu":
                return _torch_view(obj)
            reject(f"cannot view it as CPU memory through DLPack ({e}); the interpreter runs "
                   f"on the CPU and needs CPU arrays" + (f" (this one is on {device})"
                                                          if device is not None else ""))
    if hasattr(obj, "__array_interface__"):
        return np.asarray(obj)
    reject(f"got {type(obj).__name__}; pass a NumPy array or a CPU tensor that supports DLPack")
    raise AssertionError  # reject raises
