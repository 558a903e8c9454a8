"""Triton's small language names: tl.slice, tl.condition (disable_licm), tl.const,
tl.constexpr_type, tl.void, tl.pi32_t, tl.target_info, tl.tuple. Interpreter results against
NumPy on ragged sizes; the compiled kernels (sm_80, sm_90a) go through ptxas."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera.compiler import ptxas
from tessera.language.target_info import cuda_capability_geq

BLOCK = 128
ARCHS = ["sm_80", "sm_90a"]


@tessera.jit
def while_sum(out_ptr, a, n, LICM: tl.constexpr):
    i = 0
    acc = 0.0
    while tl.condition(i < n, disable_licm=not LICM):
        acc += a * 3.0
        i += 1
    tl.store(out_ptr, acc)


@pytest.mark.parametrize("licm", [True, False])
def test_condition_runs_the_loop(licm):
    rng = np.random.default_rng()
    a, n = float(rng.standard_normal()), int(rng.integers(0, 50))
    out = np.zeros(1, np.float32)
    tessera.jit(while_sum.fn, interpret=True)[(1,)](out, a, n, LICM=licm)
    np.testing.assert_allclose(out[0], n * np.float32(np.float32(a) * 3), rtol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_condition_disable_licm_keeps_the_invariant_in_the_loop(arch):
    out = np.zeros(1, np.float32)
    for licm in (True, False):
        stages = while_sum.asm(out, 2.0, 5, LICM=licm, arch=arch)
        body = stages["tir"].split(" = while ", 1)[1]
        assert ("mulf" in body) == (not licm)  # hoisted above the while only with licm
        if ptxas.find_ptxas() is not None:
            assert "cubin" in stages


@tessera.jit
def slices_and_types(x: tl.const, bits_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    t = tl.tuple([1, 2, 3, 4])
    s = t[tl.slice(1, None, 2)]                  # (2, 4)
    tl.static_assert(len(s) == 2 and s[0] == 2 and s[1] == 4)
    tl.static_assert(t[1:3] == (2, 3))
    tl.static_assert(tl.constexpr_type(4) == tl.constexpr_type(4))
    tl.static_assert(tl.void.is_void() and not tl.float32.is_void())
    tl.static_assert(tl.pi32_t == tl.pointer_type(tl.int32))
    # the float's bits, read through an int32 pointer
    bits = tl.load(x.to(tl.pi32_t) + offs, mask=mask)
    tl.store(bits_ptr + offs, bits, mask=mask)
    tl.store(out_ptr + offs, tl.load(x + offs, mask=mask) * (s[0] + s[1]), mask=mask)


def _slices_args():
    rng = np.random.default_rng()
    n = int(rng.integers(150, 600))
    x = rng.standard_normal(n).astype(np.float32)
    return n, x, np.zeros(n, np.int32), np.zeros(n, np.float32)


def test_slice_pi32_t_const_void_interpreted():
    n, x, bits, out = _slices_args()
    kernel = tessera.jit(slices_and_types.fn, interpret=True)
    kernel[(tessera.cdiv(n, BLOCK),)](x, bits, out, n, BLOCK=BLOCK)
    np.testing.assert_array_equal(bits, x.view(np.int32))
    np.testing.assert_array_equal(out, x * np.float32(6))


@pytest.mark.parametrize("arch", ARCHS)
def test_slice_pi32_t_const_compile(arch):
    n, x, bits, out = _slices_args()
    stages = slices_and_types.asm(x, bits, out, n, BLOCK=BLOCK, arch=arch)
    assert "ld.global" in stages["ptx"]
    if ptxas.find_ptxas() is not None:
        assert "cubin" in stages


def test_host_side_values():
    assert tl.void.is_void() and str(tl.void) == "void"
    with pytest.raises(TypeError, match="void"):
        tl.void.to_ir()
    assert tl.pi32_t.element_ty == tl.int32 and tl.pi32_t.is_ptr()
    assert tl.constexpr_type(3) != tl.constexpr_type(4)
    t = tl.tuple([1, 2, 3])
    assert isinstance(t, tuple) and t[tl.constexpr(1)] == 2 and t.values == [1, 2, 3]
    assert isinstance(t[1:], tl.tuple) and t + (4,) == (1, 2, 3, 4)
    assert tl.condition(True, disable_licm=tl.constexpr(True)).disable_licm is True


@tessera.jit
def arch_marker(out_ptr):
    if cuda_capability_geq(9, 0):
        tl.store(out_ptr, 90)
    else:
        tl.store(out_ptr, 80)
    tl.static_assert(tl.target_info.is_cuda() and not tl.target_info.is_hip())


@pytest.mark.parametrize("arch,value", [("sm_80", 80), ("sm_90a", 90)])
def test_target_info_sees_the_compiled_arch(arch, value):
    out = np.zeros(1, np.int32)
    tir = arch_marker.asm(out, arch=arch)["tir"]
    assert f"value = {value}" in tir and f"value = {170 - value}" not in tir


def test_target_info_interpreted_stands_for_the_modeled_device():
    from tessera.language.target_info import interpreting
    from tessera.runtime.active_driver import _MODELED_CAPABILITY
    from tessera.runtime.driver import active
    out = np.zeros(1, np.int32)
    tessera.jit(arch_marker.fn, interpret=True)[(1,)](out)
    try:  # a GPU (or the interpret knob): its target; else the modeled device
        expected = active.get_current_target().arch
    except RuntimeError:
        expected = _MODELED_CAPABILITY
        assert tl.target_info.current_target() is None  # host code, no GPU: None, as Triton
    assert out[0] == (90 if expected >= 90 else 80)
    with interpreting():
        assert tl.target_info.current_target().arch == expected
        assert tl.target_info.cuda_capability_geq(expected // 10, expected % 10)
        assert not tl.target_info.cuda_capability_geq(expected // 10, expected % 10 + 1)
    assert not tl.target_info.is_hip_cdna3() and not tl.target_info.is_hip_cdna4()


@tessera.jit(interpret=True)
def _store_through_const(x: tl.const, y, WHICH: tl.constexpr):
    offs = tl.arange(0, 16)
    tl.store(y + offs, tl.load(x + offs) + 1.0)  # reading is fine
    if WHICH == 1:
        tl.store(x + offs, 1.0)
    elif WHICH == 2:
        tl.atomic_add(x + offs, 1.0)


@pytest.mark.parametrize("which", [1, 2])
def test_const_pointer_rejects_stores(which):
    x = np.random.default_rng().standard_normal(16).astype(np.float32)
    y = np.zeros(16, np.float32)
    _store_through_const[(1,)](x, y, WHICH=0)
    np.testing.assert_array_equal(y, x + np.float32(1))
    with pytest.raises(tessera.CompilationError, match="Cannot store to a constant pointer"):
        _store_through_const[(1,)](x, y, WHICH=which)
