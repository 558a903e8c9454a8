# Memory through the interpreter: bounds and alignment errors that name kernel, program and
# line; read-only buffers; repeated store addresses; strided arrays; DLPack (PyTorch) in place;
# argument checking and the plan cache.
import math

import numpy as np
import pytest
from interpreter_ir import KernelBuilder, T, block_offsets, ptr
from tessera import interpreter
from tessera.interpreter import KernelRuntimeError
from test_interpreter_kernels import build_vector_add


def copy_kernel(block: int, element: str = "f32", masked: bool = False):
    kb = KernelBuilder("copy_kernel", [ptr(element), ptr(element), T("i32")])
    x, out, n = kb.args
    offsets = block_offsets(kb, block)
    mask = kb.cmpi("slt", offsets, kb.splat(n, [block])) if masked else None
    values = kb.load(kb.pointers(x, offsets), mask)
    kb.store(kb.pointers(out, offsets), values, mask)
    return kb


def test_unmasked_out_of_bounds_load_names_kernel_program_line_and_buffer(rng):
    kb = copy_kernel(32)
    x = rng.standard_normal(40).astype(np.float32)
    out = np.zeros(64, np.float32)
    with pytest.raises(KernelRuntimeError) as info:
        interpreter.run(kb.finish(), (2,), [x, out, 40])
    message = str(info.value)
    load_line = kb.lines["load"][0]
    assert "kernel 'copy_kernel'" in message and "program (1,)" in message, message
    assert f"kernel.py:{load_line}:5 (load)" in message, message
    assert "out of bounds" in message and "element offset 40" in message, message
    assert "argument #0" in message and "(40,)" in message, message
    assert "lane (8,)" in message, message  # program 1 covers 32..63: lane 8 is element 40
    np.testing.assert_array_equal(out[:32], x[:32])  # program 0 completed before the fault
    assert info.value.pid == (1,) and info.value.location == f"kernel.py:{load_line}:5"


def test_out_of_bounds_store_and_negative_offsets_raise(rng):
    kb = KernelBuilder("k", [ptr("i32"), T("i32")])
    out, shift = kb.args
    offsets = kb.op("addi", kb.range(0, 8), kb.splat(shift, [8]))
    kb.store(kb.pointers(out, offsets), kb.range(0, 8))
    module = kb.finish()
    with pytest.raises(KernelRuntimeError, match=r"store of int32 .* element offset -1 "):
        interpreter.run(module, (1,), [np.zeros(8, np.int32), -1])
    with pytest.raises(KernelRuntimeError, match=r"out of bounds.*element offset 8 "):
        interpreter.run(module, (1,), [np.zeros(8, np.int32), 1])
    data = np.zeros(8, np.int32)
    interpreter.run(module, (1,), [data, 0])
    np.testing.assert_array_equal(data, np.arange(8))


def test_masked_lanes_may_point_anywhere(rng):
    n = 5
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    interpreter.run(copy_kernel(64, masked=True).finish(), (1,), [x, out, n])
    np.testing.assert_array_equal(out, x)


def test_misaligned_and_wild_pointers_raise():
    # a byte pointer cast to ptr<i32> one byte in: misaligned
    kb = KernelBuilder("k", [ptr("i8"), ptr("i32")])
    raw, out = kb.args
    moved = kb.op("addptr", raw, kb.const(1, "i32"), type=raw.type)
    as_int = kb.op("ptrtoint", moved, type=T("i64"))
    kb.store(out, kb.load(kb.op("inttoptr", as_int, type=ptr("i32"))))
    with pytest.raises(KernelRuntimeError, match="not aligned to 4 bytes"):
        interpreter.run(kb.finish(), (1,), [np.zeros(16, np.int8), np.zeros(1, np.int32)])
    kb = KernelBuilder("k", [ptr("f32")])
    (out,) = kb.args
    null = kb.op("inttoptr", kb.const(0, "i64"), type=ptr("f32"))
    kb.store(out, kb.load(null))
    with pytest.raises(KernelRuntimeError, match="does not point into any argument buffer"):
        interpreter.run(kb.finish(), (1,), [np.zeros(1, np.float32)])


def test_store_into_read_only_array_raises(rng):
    x = rng.standard_normal(8).astype(np.float32)
    out = np.zeros(8, np.float32)
    out.flags.writeable = False
    with pytest.raises(KernelRuntimeError, match="read-only"):
        interpreter.run(copy_kernel(8).finish(), (1,), [x, out, 8])


def test_repeated_store_addresses_last_lane_wins():
    kb = KernelBuilder("scatter", [ptr("i32"), ptr("i32")])
    index, out = kb.args
    lanes = kb.range(0, 8)
    targets = kb.load(kb.pointers(index, lanes))
    kb.store(kb.pointers(out, targets), lanes)
    targets_data = np.array([3, 1, 3, 0, 1, 3, 2, 0], np.int32)
    out_data = np.full(4, -1, np.int32)
    interpreter.run(kb.finish(), (1,), [targets_data, out_data])
    np.testing.assert_array_equal(out_data, [7, 4, 6, 5])


def test_strided_views_are_addressed_through_their_base(rng):
    # the kernel sees the first element's address; other elements follow the caller's stride
    kb = KernelBuilder("strided", [ptr("f32"), ptr("f32"), T("i32")])
    x, out, stride = kb.args
    lanes = kb.range(0, 4)
    values = kb.load(kb.pointers(x, kb.op("muli", lanes, kb.splat(stride, [4]))))
    kb.store(kb.pointers(out, lanes), values)
    base = rng.standard_normal((4, 3)).astype(np.float32)
    column = base[:, 1]  # not contiguous
    out = np.zeros(4, np.float32)
    interpreter.run(kb.finish(), (1,), [column, out, 3])
    np.testing.assert_array_equal(out, column)


def test_same_array_twice_aliases(rng):
    # in-place: x += y with out = x
    x = rng.standard_normal(100).astype(np.float32)
    y = rng.standard_normal(100).astype(np.float32)
    expected = x + y
    interpreter.run(build_vector_add(32), (4,), [x, y, x, 100])
    np.testing.assert_array_equal(x, expected)


def test_torch_cpu_tensors_are_updated_in_place(rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    n = 300
    x = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
    out = torch.zeros(n, requires_grad=True)
    interpreter.run(build_vector_add(128), (math.ceil(n / 128),), [x, y, out, n])
    np.testing.assert_array_equal(out.detach().numpy(), (x + y).numpy())
    # bf16 has no NumPy dtype: the memory is shared as int16 and read as bf16 by the kernel
    xb, yb = x.to(torch.bfloat16), y.to(torch.bfloat16)
    outb = torch.zeros(n, dtype=torch.bfloat16)
    interpreter.run(build_vector_add(128, "bf16"), (3,), [xb, yb, outb, n])
    assert torch.equal(outb, xb + yb)


def test_dlpack_objects_and_read_only_exports(rng):
    class ReadOnlyExport:  # like a JAX array: DLPack with the read-only flag
        def __init__(self, array):
            self.array = array.copy()
            self.array.flags.writeable = False

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    x = ReadOnlyExport(rng.standard_normal(16).astype(np.float32))
    out = np.zeros(16, np.float32)
    interpreter.run(copy_kernel(16).finish(), (1,), [x, out, 16])  # reading is fine
    np.testing.assert_array_equal(out, x.array)
    with pytest.raises(KernelRuntimeError, match="argument #1 .*read-only"):
        interpreter.run(copy_kernel(16).finish(), (1,), [out, ReadOnlyExport(out), 16])


def test_device_tensors_are_refused_clearly():
    class DeviceTensor:  # a GPU tensor: DLPack cannot hand its memory to the CPU
        device = "cuda:0"

        def __dlpack__(self, **kwargs):
            raise BufferError("cannot export device memory to the CPU")

        def __dlpack_device__(self):
            return (2, 0)

    x = np.zeros(16, np.float32)
    with pytest.raises(KernelRuntimeError, match=r"argument #1 .*CPU arrays \(this one is on "
                                                 r"cuda:0\)"):
        interpreter.run(copy_kernel(16).finish(), (1,), [x, DeviceTensor(), 16])


def test_arguments_are_checked():
    module = build_vector_add(16)
    x = np.zeros(16, np.float32)
    with pytest.raises(KernelRuntimeError, match="takes 4 arguments"):
        interpreter.run(module, (1,), [x, x, x])
    with pytest.raises(KernelRuntimeError, match=r"argument #3 \(i32\): 4294967296 does not fit"):
        interpreter.run(module, (1,), [x, x, x, 2**32])
    with pytest.raises(KernelRuntimeError, match=r"argument #3 \(i32\): expected an integer"):
        interpreter.run(module, (1,), [x, x, x, 1.5])
    with pytest.raises(KernelRuntimeError, match=r"argument #0 \(ptr<f32>\): got list"):
        interpreter.run(module, (1,), [[1.0], x, x, 16])
    with pytest.raises(KernelRuntimeError, match="grid"):
        interpreter.run(module, (1, 2, 3, 4), [x, x, x, 16])


def test_plan_is_cached_per_module_text_and_rebuilt_after_changes(rng):
    from tessera.interpreter import evaluator

    module = build_vector_add(16)
    x = rng.standard_normal(16).astype(np.float32)
    out = np.zeros(16, np.float32)
    interpreter.run(module, (1,), [x, x, out, 16])
    plan = evaluator.plan_for(module, None)
    assert evaluator.plan_for(module, "add_kernel") is plan
    # change the IR in place (addf -> mulf would need a new op; retarget the store instead)
    store = [op for op in module.functions()[0].body(0).operations if op.name == "store"][0]
    addf = store.operands[1].defining_op
    store.set_operand(1, addf.operands[0])
    assert evaluator.plan_for(module, None) is not plan
    interpreter.run(module, (1,), [x, x * 0, out, 16])
    np.testing.assert_array_equal(out, x)


def test_arguments_must_match_the_divisibility_specialization(rng):
    kb = copy_kernel(16)
    kb.func.set_attr("divisibility", [16, 16, 16])
    module = kb.finish()
    base = np.zeros(64, np.float32)
    out = np.zeros(64, np.float32)
    interpreter.run(module, (1,), [base, out, 32])
    with pytest.raises(KernelRuntimeError, match=r"argument #0 .*divisible by 16.*address is 4"):
        interpreter.run(module, (1,), [base[1:], out, 32])
    with pytest.raises(KernelRuntimeError, match=r"argument #2 .*value is 8"):
        interpreter.run(module, (1,), [base, out, 40])
