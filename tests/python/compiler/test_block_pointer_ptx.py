"""Block pointers and tensor descriptors through every stage for sm_80 and sm_90a, on the CPU.

Contiguous row-major blocks (stride 1 along the last dim) give 16-byte vector loads and
stores, under bounds masks too when the checked extent is a multiple of 16 elements; a
matmul that advances block pointers in its loop carries only the offsets (and the
accumulator), is pipelined with cp.async, uses mma.sync / wgmma, assembles with ptxas with
zero spills, and its pipelined IR run by the interpreter matches float64 on ragged shapes.
"""
import re

import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import ptxas
from tessera.tools.tensor_descriptor import TensorDescriptor

VECTOR_LOAD = re.compile(r"ld\.global(\.\w+)*\.v4\.")
VECTOR_STORE = re.compile(r"st\.global(\.\w+)*\.v4\.")


@tessera.jit
def copy_kernel(x_ptr, y_ptr, M, N, sxm, sym, BM: tl.constexpr, BN: tl.constexpr,
                CHECK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    x = tl.make_block_ptr(x_ptr, (M, N), (sxm, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    y = tl.make_block_ptr(y_ptr, (M, N), (sym, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    tl.store(y, tl.load(x, boundary_check=CHECK, padding_option="zero"), boundary_check=CHECK)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("check", [(), (0,), (1,), (0, 1)])
def test_contiguous_blocks_use_vector_accesses(arch, check):
    x = np.zeros((128, 256), np.float32)
    # 32x64 fp32 over 128 threads: 16 elements each, four 16-byte vectors per access.
    ptx = copy_kernel.asm(x, x, 100, 256, 256, 256, BM=32, BN=64, CHECK=check, arch=arch)["ptx"]
    assert len(VECTOR_LOAD.findall(ptx)) == 4 and len(VECTOR_STORE.findall(ptx)) == 4
    if ptxas.find_ptxas() is not None:
        assert ptxas.assemble(ptx, arch).report["spill_stores"] == 0


@tessera.jit
def column_major_copy_kernel(x_ptr, y_ptr, M, N, sxn, syn, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    x = tl.make_block_ptr(x_ptr, (M, N), (1, sxn), (pm * BM, pn * BN), (BM, BN), (0, 1))
    y = tl.make_block_ptr(y_ptr, (M, N), (1, syn), (pm * BM, pn * BN), (BM, BN), (0, 1))
    tl.store(y, tl.load(x, boundary_check=(0, 1)), boundary_check=(0, 1))


def test_column_major_blocks_use_vector_accesses():
    # Stride 1 along dim 0 (order (0, 1)): the vectors run down the columns.
    x = np.zeros((256, 128), np.float32)
    ptx = column_major_copy_kernel.asm(x, x, 256, 100, 256, 256, BM=64, BN=32,
                                       arch="sm_80")["ptx"]
    assert len(VECTOR_LOAD.findall(ptx)) == 4 and len(VECTOR_STORE.findall(ptx)) == 4


def test_ragged_checked_columns_fall_back_to_scalar_accesses():
    # N = 250: the column mask may change inside a 4-element vector.
    x = np.zeros((128, 256), np.float32)
    ptx = copy_kernel.asm(x, x, 100, 250, 256, 256, BM=32, BN=64, CHECK=(0, 1),
                          arch="sm_80")["ptx"]
    assert not VECTOR_LOAD.findall(ptx) and not VECTOR_STORE.findall(ptx)
    assert "ld.global" in ptx


@tessera.jit
def descriptor_copy_kernel(x_desc, y_desc, BM: tl.constexpr, BN: tl.constexpr):
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    y_desc.store([m, n], x_desc.load([m, n]))


@tessera.jit
def device_descriptor_copy_kernel(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    x_desc = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    y_desc = tl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    y_desc.store([m, n], x_desc.load([m, n]))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_descriptors_use_vector_accesses(arch):
    x = np.zeros((100, 256), np.float32)
    desc = TensorDescriptor.from_tensor(x, [32, 64])
    for ptx in (descriptor_copy_kernel.asm(desc, desc, BM=32, BN=64, arch=arch)["ptx"],
                device_descriptor_copy_kernel.asm(x, x, 100, 256, BM=32, BN=64,
                                                  arch=arch)["ptx"]):
        assert len(VECTOR_LOAD.findall(ptx)) == 4 and len(VECTOR_STORE.findall(ptx)) == 4
        if ptxas.find_ptxas() is not None:
            assert ptxas.assemble(ptx, arch).report["spill_stores"] == 0


@tessera.jit
def block_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_block = tl.make_block_ptr(a_ptr, (M, K), (sam, sak), (pid_m * BM, 0), (BM, BK), (1, 0))
    b_block = tl.make_block_ptr(b_ptr, (K, N), (sbk, sbn), (0, pid_n * BN), (BK, BN), (1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_block, boundary_check=(0, 1), padding_option="zero")
        acc += tl.dot(a, b)
        a_block = tl.advance(a_block, (0, BK))
        b_block = tl.advance(b_block, (BK, 0))
    c_block = tl.make_block_ptr(c_ptr, (M, N), (scm, scn), (pid_m * BM, pid_n * BN), (BM, BN),
                                (1, 0))
    tl.store(c_block, acc.to(tl.float16), boundary_check=(0, 1))


@tessera.jit
def descriptor_matmul_kernel(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                             BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]))
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


def _block_matmul(arch, size=512):
    a = np.zeros((size, size), np.float16)
    return block_matmul_kernel.compile(a, a, a, size, size, size, size, 1, size, 1, size, 1,
                                       BM=128, BN=128, BK=32, arch=arch, num_stages=3)


def _descriptor_matmul(arch, size=512):
    a = np.zeros((size, size), np.float16)
    descs = [TensorDescriptor.from_tensor(a, shape) for shape in ([128, 32], [32, 128],
                                                                   [128, 128])]
    return descriptor_matmul_kernel.compile(*descs, size, BM=128, BN=128, BK=32, arch=arch,
                                            num_stages=3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("build", [_block_matmul, _descriptor_matmul])
def test_matmul_pipelined_on_tensor_cores(arch, build):
    kernel = build(arch)
    ptx = kernel.asm["ptx"]
    if arch == "sm_90a" and build is _descriptor_matmul:  # TMA is the default for descriptors
        assert "cp.async.bulk.tensor.2d" in ptx and "cp.async.cg" not in ptx
    else:
        assert re.search(r"cp\.async\.cg\.shared\.global(\.\w+)* \[[^]]+\], \[[^]]+\], 16",
                         ptx)
    assert ("wgmma.mma_async" in ptx) if arch == "sm_90a" else ("mma.sync" in ptx)
    if "spill_stores" in kernel.metadata:
        assert kernel.metadata["spill_stores"] == 0


def test_loop_carries_only_the_offsets():
    # Base, shape and strides are loop-invariant: canonicalize drops them from the loop, so
    # the loop carries the accumulator and two int32 offsets, and the address tile is hoisted.
    tir = _block_matmul("sm_80").asm["tir"]
    loop = re.search(r"= for [^\n]*-> \(([^)]*)\)", tir)
    assert loop and loop.group(1) == "tensor<128x128xf32>, i32, i32", loop
    body = tir[loop.end():tir.index("yield", loop.end())]
    assert not re.search(r"muli [^\n]*-> tensor<", body), body


@pytest.mark.parametrize("build", [_block_matmul, _descriptor_matmul])
def test_pipelined_ir_runs_exactly_in_the_interpreter(build):
    kernel = build("sm_80", size=64)
    tgir = kernel.asm["tgir"]
    assert "async_copy" in tgir
    module = ir.parse_module(tgir)
    rng = np.random.default_rng(11)
    m, n, k = 208, 144, 112  # multiples of 16 (the specialization), not of the blocks
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    grid = ((m + 127) // 128, (n + 127) // 128)
    if build is _block_matmul:
        args = [a, b, c, m, n, k, k, 1, n, 1, n, 1]
    else:  # each descriptor expands to its base, shape and strides
        args = [a, m, k, k, 1, b, k, n, n, 1, c, m, n, n, 1, k]
    interpreter.run(module, grid=grid, args=args)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3
