"""Test helpers with the names and meaning of Triton's ``triton._internal_testing``.

Triton's own tests import these (dtype lists, random inputs, host-array conversions, target
predicates); with ``from tessera._internal_testing import ...`` the same tests run on Tessera.
Needs NumPy and torch (as Triton's module does); imported only by tests.

Example::

    from tessera._internal_testing import numpy_random, to_triton, to_numpy
    x = numpy_random((4, 8), dtype_str="uint16")          # never 0, seeded (17)
    t = to_triton(x, device="cpu")                          # a uint16 view of an int16 tensor
    assert (to_numpy(t) == x).all()
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Set, Tuple, Union

import numpy as np
import pytest
import torch
from numpy.random import RandomState

import tessera
import tessera.language as tl
from tessera.reinterpret import TensorWrapper, reinterpret

int_dtypes = ["int8", "int16", "int32", "int64"]
uint_dtypes = ["uint8", "uint16", "uint32", "uint64"]
integral_dtypes = int_dtypes + uint_dtypes
float_dtypes = ["float16", "float32", "float64"]
float_dtypes_with_bfloat16 = float_dtypes + ["bfloat16"]
dtypes = integral_dtypes + float_dtypes
dtypes_with_bfloat16 = dtypes + ["bfloat16"]
torch_float8_dtypes = ["float8_e4m3fn", "float8_e5m2"]
torch_dtypes = ["bool"] + int_dtypes + ["uint8"] + float_dtypes + ["bfloat16"]
# Element types a tensor descriptor (TMA) can move: no 64-bit ones.
tma_dtypes = sorted(set(dtypes_with_bfloat16) - {"int64", "uint64", "float64"})

# Spellings of a dtype (NumPy, torch, C, Triton's long and short names) -> the short name
# tl.str_to_ty reads. Booleans are 1-bit unsigned, as in Triton's signatures.
_SHORT_NAMES = {
    "bool": "u1", "int1": "u1", "uint1": "u1", "i1": "u1",
    "float8e4nv": "fp8e4nv", "float8_e4m3fn": "fp8e4nv", "float8e5": "fp8e5",
    "float8_e5m2": "fp8e5", "float8e4b15": "fp8e4b15", "float8e4b8": "fp8e4b8",
    "float8_e4m3fnuz": "fp8e4b8", "float8e5b16": "fp8e5b16", "float8_e5m2fnuz": "fp8e5b16",
    "half": "fp16", "float16": "fp16", "bfloat16": "bf16", "float": "fp32", "float32": "fp32",
    "double": "fp64", "float64": "fp64", "int8": "i8", "int16": "i16", "int": "i32",
    "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "void": "void",
}
_SHORT_NAMES.update({short: short for short in list(_SHORT_NAMES.values())})


def is_interpreter() -> bool:
    """Whether kernels run in the interpreter (TESSERA_INTERPRET / tessera.config)."""
    from tessera.config import knobs
    return bool(knobs.interpret)


def get_current_target():
    """The active GPU target, or None in the interpreter (where no backend predicate holds)."""
    if is_interpreter():
        return None
    return tessera.runtime.driver.active.get_current_target()


def _backend_is(name: str) -> bool:
    target = get_current_target()
    return target is not None and target.backend == name


def is_cuda() -> bool:
    """Whether kernels run on an NVIDIA GPU."""
    return _backend_is("cuda")


def _major() -> int:
    return torch.cuda.get_device_capability()[0] if is_cuda() else -1


def is_ampere_or_newer() -> bool:
    return _major() >= 8


def is_blackwell() -> bool:
    return _major() == 10


def is_hopper_or_newer() -> bool:
    return _major() >= 9


def is_hopper() -> bool:
    return _major() == 9


def is_sm12x() -> bool:
    return _major() == 12


def is_hip() -> bool:
    """Tessera targets NVIDIA only; kept for Triton tests that branch on AMD."""
    return _backend_is("hip")


def _hip_arch_matches(predicate: Callable[[str], bool]) -> bool:
    target = get_current_target()
    return target is not None and target.backend == "hip" and predicate(str(target.arch))


def is_hip_cdna2() -> bool:
    return _hip_arch_matches(lambda arch: arch == "gfx90a")


def is_hip_cdna3() -> bool:
    return _hip_arch_matches(lambda arch: arch == "gfx942")


def is_hip_cdna4() -> bool:
    return _hip_arch_matches(lambda arch: arch == "gfx950")


def is_hip_gfx11() -> bool:
    return _hip_arch_matches(lambda arch: "gfx11" in arch)


def is_hip_gfx12() -> bool:
    return _hip_arch_matches(lambda arch: "gfx12" in arch)


def is_hip_gfx1250() -> bool:
    return _hip_arch_matches(lambda arch: "gfx1250" in arch)


# The product names newer Triton test files use for the same CDNA generations.
def is_hip_mi200() -> bool:
    return is_hip_cdna2()


def is_hip_mi300() -> bool:
    return is_hip_cdna3()


def is_hip_mi350() -> bool:
    return is_hip_cdna4()


def is_hip_cdna() -> bool:
    return is_hip_cdna2() or is_hip_cdna3() or is_hip_cdna4()


def get_hip_lds_size() -> int:
    return 163840 if is_hip_cdna4() else 65536


def is_xpu() -> bool:
    return _backend_is("xpu")


def get_arch() -> str:
    """The target's arch as text ("" in the interpreter)."""
    target = get_current_target()
    return "" if target is None else str(target.arch)


def numpy_random(shape, dtype_str: str, rs: Optional[RandomState] = None, low=None, high=None):
    """Seeded random input of ``dtype_str``: integers over the dtype's range (or [low, high))
    with 0 replaced by 1 (so divisions are defined), floats ~ N(0, 1), bfloat16 as float32 with
    its low 16 bits cleared, float8 as small int8 bit patterns, booleans as N(0, 1) > 0."""
    if isinstance(shape, int):
        shape = (shape, )
    rs = RandomState(seed=17) if rs is None else rs
    if dtype_str in integral_dtypes:
        info = np.iinfo(getattr(np, dtype_str))
        lo = info.min if low is None else max(low, info.min)
        hi = info.max if high is None else min(high, info.max)
        values = rs.randint(lo, hi, shape, dtype=getattr(np, dtype_str))
        values[values == 0] = 1
        return values
    if dtype_str and "float8" in dtype_str:
        return rs.randint(20, 40, shape, dtype=np.int8)
    if dtype_str in float_dtypes:
        return rs.normal(0, 1, shape).astype(dtype_str)
    if dtype_str == "bfloat16":
        bits = rs.normal(0, 1, shape).astype("float32").view("uint32") & np.uint32(0xFFFF0000)
        return bits.view("float32")
    if dtype_str in ("bool", "int1", "bool_"):
        return rs.normal(0, 1, shape) > 0.0
    raise RuntimeError(f"Unknown dtype {dtype_str}")


def to_triton(x: np.ndarray, device, dst_type: Optional[str] = None
              ) -> Union[TensorWrapper, torch.Tensor]:
    """A torch tensor on ``device`` holding ``x``. Unsigned integers (torch lacks most) and
    float8 bit patterns come back as a :class:`TensorWrapper` over a same-width tensor;
    float32 data with ``dst_type="bfloat16"`` is rounded to bfloat16."""
    name = x.dtype.name
    if name in uint_dtypes:
        signed = x.astype(getattr(np, name[1:]))
        return reinterpret(torch.tensor(signed, device=device), getattr(tl, name))
    if dst_type and "float8" in dst_type:
        return reinterpret(torch.tensor(x, device=device), getattr(tl, dst_type))
    if name == "float32" and dst_type == "bfloat16":
        return torch.tensor(x, device=device).bfloat16()
    return torch.tensor(x, device=device)


def str_to_triton_dtype(x: str) -> tl.dtype:
    """The ``tl.dtype`` named by any common spelling: ``"float16"``, ``"bool"``, ``"fp8e5"``."""
    return tl.str_to_ty(_SHORT_NAMES[x])


def torch_dtype_name(dtype) -> str:
    """``"int64"`` for ``torch.int64``; a ``tl.dtype``'s own name."""
    if isinstance(dtype, tl.dtype):
        return dtype.name
    if isinstance(dtype, torch.dtype):
        return str(dtype).removeprefix("torch.")
    raise TypeError(f"not a triton or torch dtype: {type(dtype)}")


def to_numpy(x) -> np.ndarray:
    """A NumPy copy of a torch tensor or TensorWrapper (with its reinterpreted dtype);
    bfloat16 comes back as float32."""
    if isinstance(x, TensorWrapper):
        return x.base.cpu().numpy().astype(getattr(np, torch_dtype_name(x.dtype)))
    if isinstance(x, torch.Tensor):
        if x.dtype is torch.bfloat16:
            return x.cpu().float().numpy()
        return x.cpu().numpy()
    raise ValueError(f"Not a triton-compatible tensor: {x}")


def supports_tma(byval_only: bool = False) -> bool:
    """Whether tensor descriptors run: always in the interpreter; on sm_90+ otherwise."""
    if is_interpreter():
        return True
    return is_hopper_or_newer()


def supports_ws() -> bool:
    """Whether warp specialization is accepted (the interpreter and sm_90+)."""
    return is_interpreter() or is_hopper_or_newer()


def tma_skip_msg(byval_only: bool = False) -> str:
    if byval_only:
        return "Requires __grid_constant__ TMA support (NVIDIA Hopper or newer)"
    return "Requires advanced TMA support (NVIDIA Hopper or newer)"


requires_tma = pytest.mark.skipif(not supports_tma(), reason=tma_skip_msg())


def default_alloc_fn(size: int, align: int, _stream) -> torch.Tensor:
    """The allocator Triton's tests install: ``size`` bytes on the GPU."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def unwrap_tensor(t: Union[torch.Tensor, TensorWrapper]) -> torch.Tensor:
    """The tensor under a TensorWrapper (a plain tensor unchanged)."""
    return t.base if isinstance(t, TensorWrapper) else t


def _fresh_knobs_impl(skipped_attr: Optional[Set[str]] = None
                      ) -> Tuple[Callable[[], Any], Callable[[], None]]:
    """(fresh, reset): ``fresh()`` drops every programmatic knob override and hides the knobs'
    environment variables, returning ``tessera.knobs``; ``reset()`` puts both back.

    The interpreter switch is kept: it is how this test session runs kernels (under Triton it is
    decided when the kernel is decorated, before the fixture runs).
    """
    from tessera.config import KNOBS, knobs as config
    skipped = set(skipped_attr or ()) | {"interpret"}
    monkeypatch = pytest.MonkeyPatch()
    saved = dict(config._overrides)

    def fresh():
        config._overrides.clear()
        config._overrides.update({k: v for k, v in saved.items() if k in skipped})
        for key, knob in KNOBS.items():
            if key not in skipped:
                monkeypatch.delenv(knob.name, raising=False)
        return tessera.knobs

    def reset():
        monkeypatch.undo()
        config._overrides.clear()
        config._overrides.update(saved)

    return fresh, reset
