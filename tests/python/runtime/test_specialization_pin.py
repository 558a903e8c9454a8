"""The specialization of a call is computed twice: in Python (tessera/runtime/specialization.py, the
launch path that compiles) and in C++ (cpp/bindings/python_specialize.h, the fast path that
only looks kernels up). The C++ words must say exactly what the Python keys say, and be at
least as fine: two calls with equal words must have equal Python keys, or the fast path would
launch a kernel compiled for another specialization. Pinned here on many random argument
lists, with random @jit(do_not_specialize...) masks."""
import random

import numpy as np
import pytest
from tessera._tessera import runtime as _runtime
from tessera.specialization import Described, argument_key, describe, masked_key

torch = pytest.importorskip("torch")

INT, BOOL, FLOAT, DLPACK_TENSOR, DTYPE_TENSOR, CONST_NONE = 1, 2, 3, 4, 5, 8
INT_CODES = {0: "i32", 1: "i64", 2: "u64"}
# torch dtype -> (DLPack type code, bits), from the DLPack standard (dlpack.h's DLDataTypeCode).
DLPACK = {torch.int8: (0, 8), torch.int16: (0, 16), torch.int32: (0, 32), torch.int64: (0, 64),
          torch.uint8: (1, 8), torch.float16: (2, 16), torch.float32: (2, 32),
          torch.float64: (2, 64), torch.bfloat16: (4, 16), torch.bool: (6, 8),
          torch.float8_e4m3fn: (10, 8), torch.float8_e4m3fnuz: (11, 8),
          torch.float8_e5m2: (12, 8), torch.float8_e5m2fnuz: (13, 8)}


def random_argument(rng: random.Random):
    kind = rng.randrange(7)
    if kind == 0:  # ints around the specialization boundaries, signed and unsigned widths
        return rng.choice([0, 1, -1, 16, 17, 2 ** 31 - 1, 2 ** 31, -2 ** 31, -2 ** 31 - 1,
                           2 ** 63 - 1, 2 ** 63, 2 ** 64 - 16, 2 ** 64 - 1,
                           rng.randrange(-2 ** 40, 2 ** 40), 16 * rng.randrange(1, 10 ** 6)])
    if kind == 1:
        return rng.random() * 100 - 50
    if kind == 2:
        return rng.random() < 0.5
    if kind == 3:
        return None
    dtype = rng.choice(list(DLPACK))
    base = torch.zeros(64, dtype=torch.float32).view(torch.uint8)[:200].view(torch.uint8)
    offset = rng.choice([0, 1, 2, 4, 8, 16, 32]) if kind != 4 else 0
    itemsize = torch.empty((), dtype=dtype).element_size()
    offset -= offset % itemsize
    return base[offset:offset + 8 * itemsize].view(dtype)  # 16-byte aligned or not


@pytest.fixture(scope="module")
def large_views():
    """Views whose extents lie on either side of 2**31 elements, over one 2 GiB allocation
    that is never written (its pages are never touched, so it costs no memory): the tensor
    extent bit of both paths (spans_2_31, spansLargeTensor) on real tensors."""
    big = torch.empty(2 ** 31 + 64, dtype=torch.uint8)
    return [
        big[:2 ** 31],                                     # 2**31 elements: large
        big[:2 ** 31 - 1],                                 # one fewer: not
        big[64:].view(torch.int16)[:2 ** 30],              # 2**30 int16: not
        big.as_strided((3, 2), (2 ** 30, 1)),              # 6 elements spanning 2**31 + 2: large
        big.as_strided((2, 3), (2 ** 30, 1)),              # spanning 2**30 + 3: not
        big[:2 ** 31].view(2 ** 15, 2 ** 16).t(),            # transposed, spanning 2**31: large
        big[:1].expand(2 ** 40),                           # stride 0: one element read
        big.as_strided((0, 4), (2 ** 31, 1)),              # empty: addresses nothing
        big.as_strided((2, 2 ** 31 - 1), (0, 1)),          # a broadcast row: 2**31 - 1
        big.as_strided((2, 2 ** 30 + 1), (2 ** 30 - 1, 1)),  # rows overlapping: 2**31 exactly
    ]


def test_the_tensor_extent_bit_is_the_same_on_both_paths(large_views):
    expected = [True, False, False, True, False, True, False, False, False, True]
    words = _runtime.specialization_words(large_views, [0] * len(large_views))
    for view, word, large in zip(large_views, words, expected):
        key = argument_key(view)
        assert key[3] is large, (view.shape, view.stride())
        assert decoded(word) == describe(key), (view.shape, view.stride(), hex(word))
    # do_not_specialize never drops it: a kernel with int32 offsets is wrong for the tensor.
    masked = _runtime.specialization_words(large_views, [3] * len(large_views))
    for view, word in zip(large_views, masked):
        assert decoded(word) == describe(masked_key(argument_key(view), 3))
        assert describe(masked_key(argument_key(view), 3)).large == argument_key(view)[3]


class CudaArrayInterfaceTensor:
    """A device tensor known only through __cuda_array_interface__ (Numba, CuPy): its extent
    comes from the interface's shape and byte strides on both paths. Never dereferenced."""

    def __init__(self, shape, strides, address=1 << 40):
        self.dtype = np.dtype(np.float16)
        self.interface = {"shape": shape, "strides": strides, "typestr": "<f2",
                          "data": (address, False), "version": 3}

    @property
    def __cuda_array_interface__(self):
        return self.interface


def test_the_extent_bit_of_array_interface_tensors():
    tensors = [CudaArrayInterfaceTensor((2 ** 31,), None),          # row-major: large
               CudaArrayInterfaceTensor((2 ** 31 - 1,), None),
               CudaArrayInterfaceTensor((3, 2), (2 ** 31, 2)),       # 2**30-element rows
               CudaArrayInterfaceTensor((2, 3), (2 ** 31, 2)),
               CudaArrayInterfaceTensor((2 ** 20, 2 ** 20), (0, 0)),  # one element
               CudaArrayInterfaceTensor((2, 2 ** 30 + 1), (2 ** 31 - 2, 2), 16)]
    words = _runtime.specialization_words(tensors, [0] * len(tensors))
    for tensor, word in zip(tensors, words):
        key = argument_key(tensor)
        assert word is not None and word >> 56 == DTYPE_TENSOR
        assert (bool(word & 2), bool(word & 1)) == (key[3], key[2]), tensor.interface
    assert [argument_key(t)[3] for t in tensors] == [True, False, True, False, False, True]


def test_numpy_and_stand_in_extents():
    from numpy.lib.stride_tricks import as_strided
    from tessera.specialization import spans_2_31
    from tessera.warmup import MockTensor
    base = np.zeros(4, np.float32)
    # Views that are never read: only their shapes and strides are looked at.
    assert argument_key(as_strided(base, (3, 2), (2 ** 30 * 4, 4)))[3] is True
    assert argument_key(as_strided(base, (2, 3), (2 ** 30 * 4, 4)))[3] is False
    assert argument_key(as_strided(base, (2 ** 40,), (0,)))[3] is False
    assert argument_key(as_strided(base, (2, 2), (-(2 ** 31) * 4, 4)))[3] is True  # negative
    assert spans_2_31((2 ** 31,), (1,)) and not spans_2_31((2 ** 31 - 1,), (1,))
    assert not spans_2_31((0, 2 ** 40), (2 ** 40, 1))
    assert describe(MockTensor(torch.float16, [2 ** 20, 2 ** 11]).specialization_key()).large
    assert not describe(MockTensor(torch.float16, [2 ** 20, 2 ** 11 - 1])
                        .specialization_key()).large


def decoded(word: int):
    """The Python key's description that a C++ word stands for (None: the constexpr None)."""
    tag, payload = word >> 56, word & ((1 << 56) - 1)
    if tag == INT:
        return Described(INT_CODES[payload & 3], bool(payload & 4), bool(payload & 8))
    if tag == BOOL:
        return Described("i1", False, False)
    if tag == FLOAT:
        return Described("fp32", False, False)
    if tag == CONST_NONE:
        return None
    assert tag == DLPACK_TENSOR, f"unexpected tag {tag} in {word:#x}"
    code, bits, lanes = payload >> 8 & 0xFF, payload >> 16 & 0xFF, payload >> 24 & 0xFFFF
    dtype = {v: k for k, v in DLPACK.items()}[code, bits]
    assert lanes == 1
    return describe(("tensor", dtype, bool(payload & 1), bool(payload & 2)))


@pytest.mark.parametrize("seed", range(20))
def test_the_fast_path_words_say_what_the_python_keys_say(seed):
    rng = random.Random(seed)
    args = [random_argument(rng) for _ in range(rng.randrange(1, 40))]
    flags = [rng.choice([0, 0, 1, 2, 3]) for _ in args]
    words = _runtime.specialization_words(args, flags)
    for arg, flag, word in zip(args, flags, words):
        key = masked_key(argument_key(arg), flag)
        if word is None:
            continue  # left to the Python path: nothing to agree on
        if key == ("none",):
            assert decoded(word) is None
        else:
            assert decoded(word) == describe(key), (arg, flag, hex(word), key)
    # The common arguments all take the fast path (else this test would pin nothing).
    for arg, word in zip(args, words):
        if arg is None or isinstance(arg, (bool, float)) or \
                (isinstance(arg, int) and -2 ** 63 <= arg < 2 ** 64):
            assert word is not None, arg


def test_equal_words_mean_equal_python_keys():
    rng = random.Random(1234)
    pool = [random_argument(rng) for _ in range(600)]
    for flag in (0, 1, 2, 3):
        words = _runtime.specialization_words(pool, [flag] * len(pool))
        keys_of_word = {}
        for arg, word in zip(pool, words):
            if word is not None:
                keys_of_word.setdefault(word, set()).add(masked_key(argument_key(arg), flag))
        assert len(keys_of_word) > 10  # ints, bool, float, None, tensors of many dtypes
        for word, keys in keys_of_word.items():
            assert len(keys) == 1, (hex(word), keys)


def test_arguments_the_fast_path_does_not_know_are_left_to_python():
    words = _runtime.specialization_words([2 ** 64, -2 ** 63 - 1, np.zeros(4, np.float32),
                                           "text", object()], [0] * 5)
    assert words == [None] * 5


class TensorSubclass(torch.Tensor):
    """A Python subclass: its instances hold their at::Tensor where torch.Tensor's do."""


def test_torch_tensors_are_read_in_place():
    """With torch's DLPack exchange table, the fast path reads a torch tensor's at::Tensor in
    place (cpp/bindings/python_torch_tensor.h) instead of calling the table, whose copy of the
    at::Tensor costs most of each tensor argument's time; each type decides on its first
    instance, checked against the exchange call."""
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this torch has no DLPack exchange table")
    tensors = [torch.zeros(4), torch.nn.Parameter(torch.zeros(4)),
               torch.zeros(4).as_subclass(TensorSubclass)]
    assert None not in _runtime.specialization_words(tensors, [0] * len(tensors))
    for tensor in tensors:
        assert _runtime.fast_tensor_read(tensor) == "in place", type(tensor)


def test_in_place_reads_say_what_the_python_keys_say():
    """Tensors of every dtype, offset, view, subclass and autograd state, read in place."""
    rng = random.Random(7)
    base = torch.zeros(256, dtype=torch.float32)
    tensors = [random_argument(rng) for _ in range(200)]
    tensors = [t for t in tensors if isinstance(t, torch.Tensor)] + [
        torch.zeros(4, requires_grad=True), torch.nn.Parameter(torch.zeros(3, 5)),
        base[1:].as_subclass(TensorSubclass), base.view(16, 16).t(), base[::3], base[4:4],
        torch.tensor(2.0), base.view(torch.bfloat16)[1:], base.expand(3, 256)]
    words = _runtime.specialization_words(tensors, [0] * len(tensors))
    for tensor, word in zip(tensors, words):
        assert word is not None and decoded(word) == describe(argument_key(tensor)), tensor


def test_tensors_dlpack_cannot_describe_are_left_to_python_after_in_place_reads():
    """toDLPackNonOwning raises (a C++ exception) for them, as the exchange call fails: the fast
    path leaves them to the Python path, with no Python error left behind, and goes on."""
    plain = torch.zeros(8)
    _runtime.specialization_words([plain], [0])  # the type decides here
    odd = [torch.zeros(4).to_sparse(), torch.empty(4, device="meta")]
    assert _runtime.specialization_words(odd + [plain], [0] * 3) == [None] * 2 + [
        _runtime.specialization_words([plain], [0])[0]]


# --- TensorDescriptor arguments: two words, (its base's tensor word, its own) ------------------
DESCRIPTOR = 10


def random_descriptor(rng: random.Random):
    """A descriptor of a random view: rank 1 to 5, ragged sizes, any block and padding."""
    from tessera.tools.tensor_descriptor import TensorDescriptor
    dtype = rng.choice([d for d in DLPACK if d != torch.bool])
    rank = rng.randrange(1, 6)
    shape = [rng.choice([1, 16, 32, 48, rng.randrange(1, 70)]) for _ in range(rank)]
    whole = torch.zeros(*shape[:-1], -(-shape[-1] // 16) * 16, dtype=dtype)
    block = [2 ** rng.randrange(0, 20 // rank + 1) for _ in range(rank)]  # 2**20 elements at most
    padding = rng.choice(["zero", "nan"]) if dtype.is_floating_point else "zero"
    return TensorDescriptor.from_tensor(whole[..., :shape[-1]], block, padding)


def decoded_descriptor(words):
    """descriptor_arguments.key that a descriptor's two words stand for."""
    base, own = words
    assert base >> 56 == DLPACK_TENSOR and own >> 56 == DESCRIPTOR, (hex(base), hex(own))
    code, bits = base >> 8 & 0xFF, base >> 16 & 0xFF
    dtype = {v: k for k, v in DLPACK.items()}[code, bits]
    rank = own & 7
    block = tuple(1 << (own >> (9 + 5 * d) & 31) for d in range(rank))
    padding = "nan" if own & 8 else "zero"
    div16 = tuple(d for d in range(rank) if own >> (4 + d) & 1)
    return ("tensordesc", dtype, block, padding, div16)


@pytest.mark.parametrize("seed", range(10))
def test_descriptor_words_say_what_the_python_keys_say(seed):
    rng = random.Random(seed)
    descs = [random_descriptor(rng) for _ in range(30)]
    for flag in (0, 3):  # @jit(do_not_specialize) has nothing to drop from a descriptor's key
        words = _runtime.specialization_words(descs, [flag] * len(descs))
        for desc, word in zip(descs, words):
            assert isinstance(word, tuple), desc
            assert decoded_descriptor(word) == argument_key(desc), (desc, word)


def test_equal_descriptor_words_mean_equal_python_keys():
    rng = random.Random(99)
    pool = [random_descriptor(rng) for _ in range(400)]
    keys_of_words = {}
    for desc, words in zip(pool, _runtime.specialization_words(pool, [0] * len(pool))):
        keys_of_words.setdefault(words, set()).add(argument_key(desc))
    assert len(keys_of_words) > 50
    assert all(len(keys) == 1 for keys in keys_of_words.values())


def test_descriptors_the_fast_path_cannot_read_are_left_to_python():
    from tessera.tools.tensor_descriptor import TensorDescriptor
    on_numpy = TensorDescriptor.from_tensor(np.zeros((16, 16), np.float32), [16, 16])
    odd_block = TensorDescriptor.from_tensor(torch.zeros(16, 16), [16, 16])
    odd_block.block_shape = [16, 12]  # changed after the checks: the Python path decides
    odd_padding = TensorDescriptor.from_tensor(torch.zeros(16, 16), [16, 16])
    odd_padding.padding = "reflect"
    too_wide = TensorDescriptor.from_tensor(torch.zeros(16, 16), [16, 16])
    too_wide.shape = [2 ** 64, 16]
    words = _runtime.specialization_words([on_numpy, odd_block, odd_padding, too_wide], [0] * 4)
    assert words == [None] * 4
