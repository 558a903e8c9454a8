"""Host-side helpers for the OCP microscaling (MX) formats, as Triton's ``triton.tools.mxfp``.

* :class:`MXFP4Tensor`: 4-bit E2M1 floats, one code per uint8 (sign bit 3, exponent bits 2-1,
  mantissa bit 0), with packing of two codes per byte along a dimension.
* :class:`MXScaleTensor`: 8-bit E8M0 block scales (a biased power of two, 255 = NaN).

Both wrap a torch uint8 tensor in ``.data``; torch is imported when they are used.

Example::

    from tessera.tools.mxfp import MXFP4Tensor, MXScaleTensor
    b = MXFP4Tensor(size=(64, 128), device="cpu").random()
    packed = b.to_packed_tensor(dim=1)           # (64, 64) uint8, low nibble first
    ref = b.to(torch.float32)
    scales = MXScaleTensor(size=(64, 4)).random(high=64.0).to(torch.float32)
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

# The eight magnitudes of E2M1, indexed by the 3 exponent+mantissa bits: subnormals 0 and 0.5,
# then 2**(E-1) * (1 + M/2) for E = 1..3.
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E8M0_BIAS = 127
E8M0_NAN = 255


def _torch():
    import torch
    return torch


def _shape(size) -> tuple:
    return tuple(size) if isinstance(size, (tuple, list)) else (size, )


class MXFP4Tensor:
    """E2M1 codes in a uint8 tensor: from float32 ``data`` (rounded to nearest, ties to an even
    mantissa, out-of-range / inf / NaN saturating to +-6), or of ``size`` to fill with
    :meth:`random`."""

    def __init__(self, data: Any = None, size: Optional[Sequence[int]] = None, device: Any = None):
        self.device = device
        if data is not None:
            torch = _torch()
            if not isinstance(data, torch.Tensor):
                raise TypeError("MXFP4Tensor: data must be a torch tensor")
            self.device = data.device
            self.data = self._from_float(data)
        elif size is not None:
            self.size = _shape(size)
        else:
            raise ValueError("MXFP4Tensor needs data or size")

    def random(self) -> "MXFP4Tensor":
        """Fills ``data`` with uniformly random codes (all 16, both zeros included)."""
        torch = _torch()
        self.data = torch.randint(0, 16, self.size, dtype=torch.uint8, device=self.device)
        return self

    def to(self, dtype) -> Any:
        """The values as a float32 tensor (only float32 is supported, as Triton's)."""
        torch = _torch()
        if dtype != torch.float32:
            raise AssertionError("MXFP4Tensor.to: only torch.float32 is supported")
        table = torch.tensor(E2M1_MAGNITUDES, dtype=torch.float32, device=self.data.device)
        magnitude = table[(self.data & 0x7).long()]
        negative = (self.data >> 3) & 0x1
        return torch.where(negative.bool(), -magnitude, magnitude)  # keeps -0.0 for 0b1000

    def _from_float(self, values) -> Any:
        torch = _torch()
        values = values.to(torch.float32)
        sign = torch.signbit(values).to(torch.uint8)
        magnitude = values.abs()
        # Saturate before measuring distances: far beyond 6 every float32 distance would tie.
        magnitude = torch.where(torch.isfinite(magnitude), magnitude,
                                torch.full_like(magnitude, E2M1_MAGNITUDES[-1]))
        magnitude = magnitude.clamp(max=E2M1_MAGNITUDES[-1])
        table = torch.tensor(E2M1_MAGNITUDES, dtype=torch.float32, device=values.device)
        distance = (magnitude.unsqueeze(-1) - table).abs()
        nearest = distance.min(dim=-1, keepdim=True).values
        # Among equally near codes prefer an even mantissa (code bit 0 clear): roundTiesToEven.
        odd = (torch.arange(8, device=values.device) & 1).to(torch.float32)
        code = torch.argmin(torch.where(distance == nearest, odd, torch.full_like(distance, 2.0)),
                            dim=-1).to(torch.uint8)
        return (sign << 3) | code

    def to_packed_tensor(self, dim: int) -> Any:
        """Two codes per byte along ``dim`` (element 2i in the low nibble, 2i+1 in the high
        one); an odd length is padded with a zero code."""
        torch = _torch()
        data = self.data
        if not 0 <= dim < data.ndim:
            raise AssertionError(f"to_packed_tensor: dim {dim} is not a dimension of a "
                                 f"{data.ndim}-d tensor")
        if data.shape[dim] % 2:
            pad_shape = list(data.shape)
            pad_shape[dim] = 1
            data = torch.cat([data, data.new_zeros(pad_shape)], dim=dim)
        shape = list(data.shape)
        shape[dim:dim + 1] = [shape[dim] // 2, 2]
        pairs = data.reshape(shape)
        return (pairs.select(dim + 1, 1) << 4) | pairs.select(dim + 1, 0)

    def unpack_packed_tensor(self, packed_tensor, dim: int, original_shape) -> Any:
        """The codes of a :meth:`to_packed_tensor` result, one per byte, cut to
        ``original_shape[dim]`` along ``dim``."""
        torch = _torch()
        pairs = torch.stack((packed_tensor & 0xF, (packed_tensor >> 4) & 0xF), dim=dim + 1)
        shape = list(pairs.shape)
        shape[dim:dim + 2] = [shape[dim] * 2]
        data = pairs.reshape(shape)
        return data.narrow(dim, 0, original_shape[dim]).to(torch.uint8)


class MXScaleTensor:
    """E8M0 scales in a uint8 tensor: from float32 ``data`` (floor(log2(x)) + 127 clamped to
    [0, 254]; x <= 0, inf and NaN become the NaN code 255), or of ``size`` for :meth:`random`."""

    def __init__(self, data: Any = None, size: Optional[Sequence[int]] = None, device: Any = None):
        self.device = device
        if data is not None:
            torch = _torch()
            if not isinstance(data, torch.Tensor):
                raise TypeError("MXScaleTensor: data must be a torch tensor")
            self.device = data.device
            self.data = self._from_float(data)
        elif size is not None:
            self.size = _shape(size)
        else:
            raise ValueError("MXScaleTensor needs data or size")

    def random(self, low: Optional[float] = None, high: Optional[float] = None) -> "MXScaleTensor":
        """Fills ``data`` with random exponents whose scales lie in [low, high] (as powers of
        two: the exponents of floor(log2) of the bounds), never the NaN code."""
        import math
        torch = _torch()
        lowest = 0 if low is None else max(0, int(math.log2(low)) + E8M0_BIAS)
        highest = 254 if high is None else min(254, max(0, int(math.log2(high)) + E8M0_BIAS))
        if lowest > highest:
            raise AssertionError("MXScaleTensor.random: low must not exceed high")
        self.data = torch.randint(lowest, highest + 1, self.size, dtype=torch.uint8,
                                  device=self.device)
        return self

    def to(self, dtype) -> Any:
        """The scales 2**(code - 127) as float32 (NaN for code 255)."""
        torch = _torch()
        if dtype != torch.float32:
            raise AssertionError("MXScaleTensor.to: only torch.float32 is supported")
        exponent = self.data.to(torch.float32) - E8M0_BIAS
        scale = torch.pow(2.0, exponent)
        return torch.where(self.data == E8M0_NAN, torch.full_like(scale, float("nan")), scale)

    def _from_float(self, values) -> Any:
        torch = _torch()
        values = values.to(torch.float32)
        invalid = ~torch.isfinite(values) | (values <= 0)
        safe = torch.where(invalid, torch.ones_like(values), values)
        code = (torch.floor(torch.log2(safe)) + E8M0_BIAS).clamp(0, 254).to(torch.uint8)
        return torch.where(invalid, torch.full_like(code, E8M0_NAN), code)
