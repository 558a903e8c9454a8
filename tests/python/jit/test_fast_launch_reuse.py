"""What the C++ fast launch path (cpp/bindings/launch.cpp) keeps from one launch to the next,
and what it must read again each time, without a GPU (launch_fakes.py: kernels are prepared
into launchers without a kernel, whose fast launches are recorded).

Kept: the interpret knob's truth (until its sources change), the launch table's last hit, a
kernel[grid] object's grid. Read again at every launch: everything about a tensor (dtype,
alignment, extent, device), even when the same Python object comes back changed."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from launch_fakes import FakeGpu, expected_parameters, fast_launch_count  # noqa: E402

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.config import knobs  # noqa: E402

torch = pytest.importorskip("torch")
if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
    pytest.skip("this torch has no DLPack exchange table (the fast path needs it for CPU "
                "tensors in recording mode)", allow_module_level=True)


@pytest.fixture
def gpu(monkeypatch):
    knobs.interpret = False
    yield FakeGpu(monkeypatch)
    knobs.reset("interpret")


def make_copy():
    @tessera.jit
    def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs), mask=offs < n)
    return copy


def python_specialization(kernel, args):
    """(type strings, div16) the Python path gives these arguments."""
    _, _, keys = kernel._arguments(args, {"BLOCK": 64})
    signature, div16, _, _ = kernel._specialization(keys)
    return dict(signature), set(div16)


def launch(gpu, kernel, grid, args):
    """Launches; returns (the kernel prepared for the launch, its parameter bytes, fast?)."""
    before = fast_launch_count(kernel)
    python_before = {id(k): len(k.python_launches) for k in gpu.prepared}
    kernel[grid](*args, BLOCK=64)
    if fast_launch_count(kernel) == before + 1:
        _, _, parameters, launched, _ = kernel._dispatch_recorded()
        return launched, parameters, True
    (launched,) = [k for k in gpu.prepared
                   if len(k.python_launches) > python_before.get(id(k), 0)]
    return launched, launched.python_launches[-1][2], False


def test_a_tensor_changed_in_place_is_specialized_again(gpu):
    """The same Python object given another dtype, alignment or storage (`.data = ...`)
    between launches gets the kernel of what it is now, never the last one's."""
    copy = make_copy()
    base = torch.randn(300)
    x, y = torch.randn(256), torch.randn(256)
    for data in (torch.randn(256), base[1:257], base[4:260], torch.randn(256).half(),
                 torch.randint(0, 7, (256,), dtype=torch.int32), torch.randn(256)):
        x.data = data
        for _ in range(2):
            launched, parameters, _ = launch(gpu, copy, 1, (x, y, 256))
            signature, div16 = launched.prepared_for[0][:2]
            assert (dict(signature), set(div16)) == python_specialization(copy, (x, y, 256))
            assert parameters == expected_parameters([x, y, 256])
    assert len(gpu.prepared) == 4  # fp32 aligned, fp32 unaligned, fp16, int32
    assert fast_launch_count(copy) == 12 - 4  # one Python launch per specialization


def test_an_object_with_data_ptr_that_is_no_tensor_takes_the_python_path(gpu):
    """tessera.reinterpret's wrapper (data_ptr and a tl dtype, no DLPack) is left to the
    Python path at every launch, which launches the kernel of its dtype."""
    copy = make_copy()
    raw = torch.randint(0, 255, (256,), dtype=torch.uint8)
    wrapped = tessera.reinterpret(raw, tl.float8e5)
    for _ in range(3):
        launched, parameters, fast = launch(gpu, copy, 1, (wrapped, raw, 256))
        assert not fast and launched.prepared_for[0][0]["x_ptr"] == "*fp8e5"
        assert parameters == expected_parameters([raw, raw, 256])
    assert len(gpu.prepared) == 1


def test_bound_launches_keep_their_own_grid(gpu):
    """kernel[grid] objects made and freed between the launches of live ones leave those
    their own grids; a live one keeps its kernel alive."""
    copy = make_copy()
    x, y = torch.randn(256), torch.randn(256)
    copy[(1,)](x, y, 256, BLOCK=64)
    first, second = copy[(2,)], copy[(3, 4)]
    for grid in range(5, 12):  # made and freed while the two above live
        copy[grid](x, y, 256, BLOCK=64)
        assert copy._dispatch_recorded()[0] == (grid, 1, 1)
    for bound, expected in ((first, (2, 1, 1)), (second, (3, 4, 1)), (first, (2, 1, 1))):
        bound(x, y, 256, BLOCK=64)
        assert copy._dispatch_recorded()[0] == expected
    del copy
    second(x, y, 256, BLOCK=64)  # a BoundLaunch keeps its kernel alive


def test_alternating_specializations_each_get_their_kernel(gpu):
    """The launch table's last hit is compared before anything is hashed: calls alternating
    between two specializations must still find each its own kernel."""
    copy = make_copy()
    aligned, unaligned = torch.randn(300)[:256], torch.randn(300)[1:257]
    y = torch.randn(256)
    kernels = {}
    for i in range(8):
        x = aligned if i % 2 else unaligned
        launched, parameters, fast = launch(gpu, copy, 1, (x, y, 256))
        assert kernels.setdefault(i % 2, launched) is launched
        assert parameters == expected_parameters([x, y, 256]) and fast == (i >= 2)
    assert kernels[0] is not kernels[1]


def test_an_interpret_override_of_a_mutable_type_is_read_at_each_launch(gpu, monkeypatch):
    """The fast path reads the interpret knob only when its sources change, except for an
    override whose truth can change while it stays the same object."""
    copy = make_copy()
    interpreted = []
    monkeypatch.setattr(type(copy), "_run_interpreted",
                        lambda self, *a: interpreted.append(self.__name__))
    x, y = torch.randn(256), torch.randn(256)
    switch = []
    knobs.interpret = switch
    for _ in range(2):
        copy[1](x, y, 256, BLOCK=64)
    assert fast_launch_count(copy) == 1 and interpreted == []
    switch.append("on")
    copy[1](x, y, 256, BLOCK=64)
    assert interpreted == ["copy"] and fast_launch_count(copy) == 1
    knobs.interpret = 0  # an immutable value: read once, when the override dict changed
    copy[1](x, y, 256, BLOCK=64)
    assert fast_launch_count(copy) == 2
