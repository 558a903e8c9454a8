"""Host TensorDescriptor arguments on the C++ fast launch path (cpp/bindings/python_specialize.h,
specializeDescriptor), without a GPU: kernels are prepared into launchers without a kernel
(launch_fakes.py), whose launches the fast path records. A launch with descriptors goes through
JITFunction.run once per specialization, then from C++; its parameter bytes are those the
Python path packs (base, shape as i32, strides as i64, then the tensor map's 128 bytes where
the kernel takes one) and those an independent packer builds from the values alone."""
import hashlib
import os
import random
import struct
import sys
from collections import OrderedDict

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from launch_fakes import STREAM, FakeGpu, address_of, fast_launch_count  # noqa: E402

import tessera  # noqa: E402
import tessera.language as tl  # noqa: E402
from tessera.jit import JITFunction  # noqa: E402
from tessera.config import knobs  # noqa: E402
from tessera.runtime import descriptor_arguments, driver, launcher  # noqa: E402
from tessera.runtime import tensor_map as tm  # noqa: E402
from tessera.tools.tensor_descriptor import TensorDescriptor  # noqa: E402
from tessera.type_codes import dtype_code  # noqa: E402

torch = pytest.importorskip("torch")
if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
    pytest.skip("this torch has no DLPack exchange table (the fast path needs it for CPU "
                "tensors in recording mode)", allow_module_level=True)

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.int8]


def map_bytes(desc) -> bytes:
    """Stands for cuTensorMapEncodeTiled: 128 bytes that depend on what it encodes."""
    digest = hashlib.sha512(repr((address_of(desc.base), str(desc.base.dtype), desc.shape,
                                  desc.strides, desc.block_shape, desc.padding)).encode())
    return digest.digest() * 2


@pytest.fixture
def gpu(monkeypatch):
    knobs.interpret = False
    monkeypatch.setattr(tm, "encode", map_bytes)
    monkeypatch.setattr(tm, "_ENCODED", OrderedDict())
    runs = []
    run = JITFunction.run

    def counting_run(self, *args, **kwargs):
        runs.append(self.__name__)
        return run(self, *args, **kwargs)
    monkeypatch.setattr(JITFunction, "run", counting_run)
    fake = FakeGpu(monkeypatch)
    fake.runs = runs
    yield fake
    knobs.reset("interpret")
    knobs.reset("tma")


@pytest.fixture
def rng():
    seed = random.randrange(2**32)
    print(f"seed: {seed}")
    return random.Random(seed)


def make_kernel():
    """A fresh kernel per test (its launch table starts empty). It is never compiled here."""
    @tessera.jit
    def three_descriptors(a_desc, x_ptr, b_desc, n, c_desc, BLOCK: tl.constexpr):
        pass
    return three_descriptors


def random_descriptor(rng, dtype, rank, block=None, padding=None):
    """A descriptor of a random ragged view (sizes often not multiples of 16 or the block)."""
    shape = [rng.choice([1, 16, 32, rng.randrange(1, 100)]) for _ in range(rank)]
    shape[-1] = max(shape[-1], 1)
    width = -(-shape[-1] // 16) * 16 + 16 * rng.randrange(2)  # rows 16-element aligned
    whole = torch.zeros(*shape[:-1], width, dtype=dtype)
    view = whole[..., :shape[-1]]
    if block is None:
        block = [1] * (rank - 2) + [rng.choice([16, 32, 64]), rng.choice([16, 32])][-rank:]
    if padding is None:
        padding = rng.choice(["zero", "nan"]) if dtype.is_floating_point else "zero"
    return TensorDescriptor.from_tensor(view, block, padding)


def expected_parameters(values, tensor_maps) -> bytes:
    """The parameter buffer worked out from the values alone: a descriptor passes its base
    address (8 bytes), shape (4 each), strides (8 each) and, with maps where its block is one
    the TMA copies, the 128 bytes of its map at a 64-byte aligned offset; an int its i32."""
    parts = []
    for value in values:
        if isinstance(value, TensorDescriptor):
            parts.append(("<Q", value.base.data_ptr()))
            parts += [("<i", s) for s in value.shape] + [("<q", s) for s in value.strides]
            text = descriptor_arguments.type_text(descriptor_arguments.key(value),
                                                  dtype_code(value.base.dtype))
            if tensor_maps and descriptor_arguments.has_tensor_map(text):
                parts.append(("map", map_bytes(value)))
        elif isinstance(value, int):
            parts.append(("<i", value))
        else:
            parts.append(("<Q", value.data_ptr()))
    buffer = b""
    for fmt, raw in parts:
        data = raw if fmt == "map" else struct.pack(fmt, raw)
        align = 64 if fmt == "map" else len(data)
        buffer += b"\0" * (-len(buffer) % align) + data
    return buffer


def launch(gpu, kernel, args, **kwargs):
    """Launches; returns (the RecordingLaunchable used, its parameter bytes, fast?)."""
    runs, fast = len(gpu.runs), fast_launch_count(kernel)
    python_before = [len(k.python_launches) for k in gpu.prepared]
    kernel[(2, 1, 1)](*args, **kwargs)
    if fast_launch_count(kernel) == fast + 1:
        assert len(gpu.runs) == runs  # launched from C++: JITFunction.run was not called
        _, stream, parameters, launched, _ = kernel._dispatch_recorded()
        assert stream == STREAM
        return launched, parameters, True
    assert len(gpu.runs) == runs + 1
    grown = [k for i, k in enumerate(gpu.prepared)
             if len(k.python_launches) > (python_before[i] if i < len(python_before) else 0)]
    assert len(grown) == 1, "exactly one launch per call"
    return grown[0], grown[0].python_launches[-1][2], False


def python_packed(launchable, args) -> bytes:
    """What the Python path packs for these arguments with this kernel (Launchable.launch)."""
    expanded = descriptor_arguments.expand(launchable.expansion, args)
    return launchable.launcher.pack([address_of(a) for a in expanded], STREAM)


@pytest.mark.parametrize("tma", [True, False])
def test_descriptor_launches_take_the_fast_path(gpu, rng, tma):
    knobs.tma = tma
    kernel = make_kernel()
    maps = 0
    for _ in range(12):
        dtype = rng.choice(DTYPES)
        ranks = [rng.choice([2, 2, 3, 4]) for _ in range(3)]
        descs = [random_descriptor(rng, dtype, rank) for rank in ranks]
        x = torch.zeros(40, dtype=torch.float32)
        args = [descs[0], x, descs[1], rng.randrange(1, 1000), descs[2]]
        first, _, fast = launch(gpu, kernel, args, BLOCK=64)
        assert not fast or first.expansion is not None
        # The same specialization again, from other tensors: from C++, packed as Python packs.
        again = [TensorDescriptor(d.base.clone(), d.shape, d.strides, d.block_shape, d.padding)
                 for d in descs]
        args = [again[0], x, again[1], args[3], again[2]]
        launched, parameters, fast = launch(gpu, kernel, args, BLOCK=64)
        assert fast and launched is first
        assert parameters == python_packed(launched, args)
        assert parameters == expected_parameters(args, tma)
        maps += sum(map_bytes(d) in parameters for d in again)
    assert (maps > 0) == tma  # the maps were packed where the kernel takes them


def test_both_paths_pack_rank_1_to_5(gpu, rng):
    knobs.tma = True
    kernel = make_kernel()
    for rank in range(1, 6):
        for block in ([1] * (rank - 1) + [32], [1] * max(0, rank - 2) + [16, 16][-rank:]):
            descs = [random_descriptor(rng, torch.float16, rank, block) for _ in range(3)]
            args = [descs[0], torch.zeros(8), descs[1], 7, descs[2]]
            launch(gpu, kernel, args, BLOCK=16)
            launched, parameters, fast = launch(gpu, kernel, args, BLOCK=16)
            assert fast
            assert parameters == python_packed(launched, args)
            assert parameters == expected_parameters(args, True)


def python_key(kernel, args, kwargs):
    values, constexprs, keys = kernel._arguments(args, kwargs)
    return kernel._specialization(keys), kernel._constexpr_dict(constexprs)


def test_a_changed_descriptor_key_specializes_again(gpu):
    """Another block shape, dtype, padding or set of dims divisible by 16 is another kernel:
    the fast path never launches one compiled for the other key."""
    kernel = make_kernel()
    x = torch.zeros(8)

    def desc(rows=48, cols=40, dtype=torch.float16, block=(16, 32), padding="zero"):
        return TensorDescriptor.from_tensor(torch.zeros(rows, 48, dtype=dtype)[:, :cols],
                                            list(block), padding)
    variants = [desc(), desc(block=(32, 32)), desc(block=(16, 16)), desc(dtype=torch.float32),
                desc(dtype=torch.bfloat16), desc(padding="nan"), desc(rows=47),
                desc(cols=32), desc(rows=47, cols=32)]  # dims divisible by 16: 0, none, both, 1
    seen = {}
    for rounds in range(2):
        for variant in variants:
            args = [variant, x, desc(), 3, desc()]
            launched, parameters, fast = launch(gpu, kernel, args, BLOCK=16)
            key = repr(python_key(kernel, args, {"BLOCK": 16}))
            assert fast == (rounds == 1)
            assert seen.setdefault(key, launched) is launched
            signature, constexprs = launched.prepared_for[0:2]
            assert repr((signature, constexprs)) == key
            assert parameters == expected_parameters(args, bool(knobs.tma))
    assert len(seen) == len(variants)


def test_descriptors_the_fast_path_cannot_read_launch_from_python(gpu):
    import numpy as np
    kernel = make_kernel()
    host = TensorDescriptor.from_tensor(np.zeros((32, 32), np.float16), [16, 16])
    args = [host, torch.zeros(8), host, 3, host]
    for _ in range(3):
        _, _, fast = launch(gpu, kernel, args, BLOCK=16)
        assert not fast
    # A tuple of descriptors stays on the Python path too (tuples do).
    good = TensorDescriptor.from_tensor(torch.zeros(32, 32, dtype=torch.float16), [16, 16])
    values, constexprs, _ = kernel._arguments([good, torch.zeros(8), good, 3, (good,)],
                                              {"BLOCK": 16})
    assert not kernel._dispatch_register(tuple(values), tuple(constexprs), 4, 1, object())


def test_a_kernel_with_global_scratch_is_not_taken(gpu):
    """A kernel that takes global scratch (device tensor maps) has one more parameter than the
    fast path passes: registering it fails, and its launches stay on the Python path."""
    kernel = make_kernel()
    good = TensorDescriptor.from_tensor(torch.zeros(32, 32, dtype=torch.float16), [16, 16])
    args = [good, torch.zeros(8), good, 3, good]
    launched, _, _ = launch(gpu, kernel, args, BLOCK=16)
    with_scratch = type(launched).__new__(type(launched))
    with_scratch.__dict__.update(launched.__dict__)
    kinds = descriptor_arguments.launch_kinds(kernel.runtime_names, launched.prepared_for[0][0],
                                              launcher._launcher_kind, launched.tensor_maps)
    with_scratch.launcher = driver.KernelLauncher(kinds + ["ptr"], None, 4)
    values, constexprs, _ = kernel._arguments(args, {"BLOCK": 16})
    kernel._dispatch_clear()
    assert not kernel._dispatch_register(tuple(values), tuple(constexprs), 4, 1, with_scratch)
    assert kernel._dispatch_register(tuple(values), tuple(constexprs), 4, 1, launched)


def test_a_bad_descriptor_gets_the_same_error_on_both_paths(gpu):
    """A descriptor changed after it was made so that its shape no longer fits the i32 it
    passes: the fast path leaves the launch to Python, whose error names the kernel and the
    argument, as it does when no kernel is registered."""
    messages = []
    for registered in (False, True):
        kernel = make_kernel()
        good = TensorDescriptor.from_tensor(torch.zeros(32, 32, dtype=torch.float16), [16, 16])
        args = [good, torch.zeros(8), good, 3, good]
        if registered:
            launch(gpu, kernel, args, BLOCK=16)
            assert launch(gpu, kernel, args, BLOCK=16)[2]
        bad = TensorDescriptor.from_tensor(torch.zeros(32, 32, dtype=torch.float16), [16, 16])
        bad.shape = [2**32 + 32, 32]  # still divisible by 16: the same key
        with pytest.raises(TypeError) as error:
            kernel[(1,)](bad, torch.zeros(8), good, 3, good, BLOCK=16)
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    assert "three_descriptors" in messages[0] and "a_desc.shape[0]" in messages[0]
