"""GPU lowering of tl.device_print (vprintf) and tl.device_assert (__assertfail), checked on the
PTX text: the format strings are the interpreter's format, each element prints once per
program, asserts name the message, file and line; ptxas accepts the result where installed.
"""
import inspect
import re

import numpy as np
import pytest
import tessera
import tessera.language as tl
from tessera._tessera import ir
from tessera.compiler import ptxas


@tessera.jit(debug=True)  # device asserts build code in debug mode only
def debug_kernel(x_ptr, u_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    u = tl.load(u_ptr + offs)
    tl.device_print("x%d", x, n)
    tl.device_print("u", u, hex=True)
    tl.device_print("hello")
    tl.device_assert(x < 3, "x too big")  # ASSERT


def strings(ptx: str):
    """name -> text of every .b8 array constant of the PTX."""
    out = {}
    for name, body in re.findall(r"\.global \.align 1 \.b8 (\w+)\[\d+\] = \{([\d, ]+)\};", ptx):
        out[name] = bytes(int(b) for b in body.split(",")).rstrip(b"\0").decode()
    return out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_print_and_assert_lower_to_the_device_runtime(arch):
    x = np.zeros(256, np.float32)
    compiled = debug_kernel.compile(x, np.zeros(256, np.int64), 256, BLOCK=256, arch=arch,
                                    num_warps=4)
    ptx = compiled.asm["ptx"]
    texts = strings(ptx)
    formats = sorted(t for n, t in texts.items() if n.startswith("printf_format"))
    head = "pid (%u, %u, %u)"
    assert formats == sorted([
        f"{head} idx (%3u) x%%d: (operand 0) %f\n",  # '%' of the prefix is escaped
        f"{head} idx () x%%d: (operand 1) %i\n",
        f"{head} idx (%3u) u: 0x%016llx\n",
        f"{head} hello\n",
    ])
    # 256 elements over 128 threads: 2 registers per tensor, 1 call each for the scalar and
    # the text; every element prints once per program.
    assert ptx.count("vprintf, (") == 2 + 1 + 2 + 1
    # The assert, and the overflow checks of the offsets' int32 arithmetic that LLVM kept
    # (transforms/check_offsets.cpp: debug builds check them too).
    offsets = [t for t in texts.values() if t.startswith("int32 overflow in ")]
    assert offsets and ptx.count("call.uni __assertfail") == 1 + len(offsets)
    lines, start = inspect.getsourcelines(debug_kernel.fn)
    line = start + next(i for i, text in enumerate(lines) if "# ASSERT" in text)
    assert "x too big" in texts.values() and __file__ in texts.values()
    assert "debug_kernel" in texts.values()
    assert re.search(rf"st\.param\.b32\s+\[param2\], {line};", ptx)  # the line argument
    if ptxas.find_ptxas() is not None:
        assert compiled.asm["cubin"] and compiled.metadata["spill_stores"] == 0


@tessera.jit
def fp8_print_kernel(x_ptr):
    tl.device_print("x", tl.load(x_ptr + tl.arange(0, 128)))


def test_fp8_print_is_refused_clearly():
    import ml_dtypes
    x = np.zeros(128, ml_dtypes.float8_e4m3fn)
    with pytest.raises(ir.CompileError, match="device_print of fp8 values is not supported"):
        fp8_print_kernel.compile(x, arch="sm_90a")


@tessera.jit
def pointer_print_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.device_print("ptr ", x_ptr + tl.arange(0, BLOCK))
    tl.device_print("p", x_ptr)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_pointers_print_their_addresses_as_percent_p(arch):
    compiled = pointer_print_kernel.compile(np.zeros(128, np.float32), BLOCK=128, arch=arch,
                                            num_warps=4)
    ptx = compiled.asm["ptx"]
    formats = sorted(t for n, t in strings(ptx).items() if n.startswith("printf_format"))
    head = "pid (%u, %u, %u)"
    assert formats == sorted([f"{head} idx (%3u) ptr: %p\n", f"{head} idx () p: %p\n"])
    assert ptx.count("vprintf, (") == 1 + 1   # 128 elements over 128 threads, and the scalar
    if ptxas.find_ptxas() is not None:
        assert compiled.asm["cubin"]


@tessera.jit
def row_copy_kernel(x_ptr, out_ptr, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    tl.store(out_ptr + row * BLOCK + tl.arange(0, BLOCK),
             tl.load(x_ptr + row * stride + tl.arange(0, BLOCK)))  # OFFSETS


def test_offset_overflow_checks_build_only_in_debug_mode():
    """As Triton's sanitize_overflow: with debug, the int32 arithmetic of pointer offsets fails
    a device assertion naming the op and the line where it wraps; without, nothing is built."""
    x = np.zeros(256, np.float32)
    lines, start = inspect.getsourcelines(row_copy_kernel.fn)
    line = start + next(i for i, text in enumerate(lines) if "# OFFSETS" in text)
    checked = row_copy_kernel.compile(x, x, 64, BLOCK=64, arch="sm_90a", debug=True)
    texts = strings(checked.asm["ptx"])
    assert any(t.startswith("int32 overflow in muli computing a pointer offset") and
               "tensors of 2**31 elements or more" in t for t in texts.values())
    assert re.search(rf"st\.param\.b32\s+\[param2\], {line};", checked.asm["ptx"])
    unchecked = row_copy_kernel.compile(x, x, 64, BLOCK=64, arch="sm_90a", debug=False)
    assert "__assertfail" not in unchecked.asm["ptx"]
    assert "check_overflow" not in unchecked.asm["tir"]
