"""The wgmma path (sm_90a) without a GPU: every config of tessera.ops.matmul compiles to
wgmma.mma_async m64nNk16 with the instruction count and shape that the warp tiling implies
(warpgroups of 4 warps along M while they keep 16 rows each, then along N), the
fence/commit/wait sequence, no fence.proxy.async after the cp.async waits, rings in wgmma's
swizzle, 1 KiB aligned tiles, no ldmatrix/mma.sync, and ptxas assembles it without spills;
turning knobs.wgmma off (or sm_80) gives mma.sync. The pipelined IR runs in the interpreter
against float64 on ragged sizes; operands that are transposed, computed in registers, or
chained (P of attention, read from registers) compile to wgmma too."""
import re

import ml_dtypes
import numpy as np
import pytest
import tessera.language as tl
from tessera import interpreter
from tessera._tessera import ir
from tessera.compiler import compiler, ptxas
from tessera.config import knobs
from tessera.ops import gemm

CONFIGS = gemm.CONFIGS  # the autotuner's candidates


@pytest.fixture(scope="module")
def matmul_kernel():
    return gemm.matmul_kernel


CONFIG_IDS = ["{BLOCK_M}x{BLOCK_N}x{BLOCK_K}".format(**c.kwargs)
              + f"-w{c.num_warps}-s{c.num_stages}" for c in CONFIGS]


def compile_config(kernel, config, arch="sm_90a", dtype=np.float16, size=512):
    x = np.zeros((size, size), dtype)
    return kernel.compile(x, x, x, x, size, size, size, size, 1, size, 1, size, 1,
                          HAS_BIAS=True, ACTIVATION="leaky_relu", arch=arch,
                          num_warps=config.num_warps, num_stages=config.num_stages,
                          **config.kwargs)


def expected_tiling(block_m: int, block_n: int, num_warps: int):
    """Warps [wm, wn] and the instruction's N, from the rule: a warpgroup of 4 warps along M,
    doubled along M while each warp still has 16 rows of its own, then along N; N is the
    columns of one warp column (at most 256, the largest wgmma)."""
    wm, wn = 4, 1
    while wm * wn < num_warps:
        if block_m > 16 * wm:
            wm *= 2
        else:
            wn *= 2
    return wm, wn, min(256, block_n // wn)


def wgmma_swizzle(row_bytes: int):
    """(vec, perPhase, maxPhase) of the PTX 32/64/128-byte swizzle modes for 2-byte elements:
    16-byte chunks, chunk ^= (row / perPhase) % maxPhase within each 1 KiB pattern."""
    swizzle = min(128, row_bytes)
    return 8, 128 // swizzle, swizzle // 16


def count(text: str, pattern: str) -> int:
    return len(re.findall(pattern, text))


def check_kilobyte_alignment(tgir: str):
    """local_alloc buffers of 1 KiB or more start on a 1 KiB boundary (the 128-byte swizzle's
    period: wgmma descriptors assume the pattern starts with the tile)."""
    sizes = {"f16": 2, "bf16": 2, "f32": 4}
    allocs = re.findall(r"local_alloc[^{\n]*\{offset = (\d+)\}[^\n]*-> tensor<([0-9x]+)x(\w+),",
                        tgir)
    assert allocs
    for offset, shape, element in allocs:
        size = int(np.prod([int(d) for d in shape.split("x")])) * sizes[element]
        assert int(offset) % (1024 if size >= 1024 else 128) == 0, (offset, shape, element)


def resolve_aliases(text: str) -> str:
    """The module text with every #alias replaced by its definition."""
    aliases = dict(re.findall(r"^(#\w+) = (.*)$", text, re.MULTILINE))
    body = "\n".join(line for line in text.splitlines() if not re.match(r"#\w+ = ", line))
    return re.sub(r"#\w+\b", lambda m: aliases.get(m.group(0), m.group(0)), body)


def descriptor_fields(ptx: str):
    """(swizzle mode, stride byte offset >> 4, leading byte offset >> 4) of the A and B matrix
    descriptors of every wgmma: the constant each descriptor register is or-ed with (PTX ISA
    "Matrix Descriptor Format": bits 16-29 LBO, 32-45 SBO, 62-63 the swizzle mode). An
    instruction's descriptor is its dot's base descriptor (the 14-bit start address or-ed
    with the fields) plus a start-address step below 2^14, and LLVM may fold the fields and
    the step into one add: the constants along the chain back to the start are summed."""
    def decode(register):
        total, seen = 0, 0
        while True:
            step = re.search(rf"(?:add\.s64|or\.b64)\s+{re.escape(register)}, (%rd\d+), "
                             rf"(-?\d+);", ptx)
            if not step:
                break
            total, seen, register = total + int(step.group(2)), seen + 1, step.group(1)
        assert seen, f"no constant fields for descriptor {register}"
        value = total & (2**64 - 1)
        return value >> 62, (value >> 32) & 0x3FFF, (value >> 16) & 0x3FFF
    return {(decode(a), decode(b)) for a, b in re.findall(r"\}, (%rd\d+), (%rd\d+), p,", ptx)}


MODES = {128: 1, 64: 2, 32: 3}  # the descriptor's swizzle-mode encodings


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_library_configs_compile_to_wgmma(matmul_kernel, config):
    kernel = compile_config(matmul_kernel, config)
    ptx, tgir = kernel.asm["ptx"], kernel.asm["tgir"]
    bm, bn, bk = (config.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    wm, wn, n = expected_tiling(bm, bn, config.num_warps)
    assert f"#mma<{{version = 3, warpsPerCTA = [{wm}, {wn}], instrShape = [16, {n}]}}>" in tgir
    # One loop body: each warpgroup covers [64, N] per instruction, the CTA tile
    # [16 wm, N wn] repeats over the block, and K advances by 16.
    instructions = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)\.f32\.f16\.f16",
                              ptx)
    assert set(instructions) == {f"m64n{n}k16"}
    assert len(instructions) == (bm // (16 * wm)) * (bn // (n * wn)) * (bk // 16)
    assert count(ptx, r"wgmma\.mma_async") == len(instructions)
    # A [M, K] is K-major (no transpose), B [K, N] N-major (imm-trans-b = 1).
    assert count(ptx, r", p, 1, 1, 0, 1;") == len(instructions)
    assert count(ptx, r"wgmma\.fence\.sync\.aligned;") == 1
    assert count(ptx, r"wgmma\.commit_group\.sync\.aligned;") == 1
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+);", ptx)
    # wait_group 1 in the loop with products in flight across steps (knobs.wgmma_pipeline)
    assert waits and set(waits) == ({"0", "1"} if knobs.wgmma_pipeline else {"0"})
    # wgmma reads the cp.async rings after the wait and the barrier, with no proxy fence (as
    # Triton 3.6 and CUTLASS: its MEMBAR.ALL.CTA cost every step; docs/perf/matmul_sass.md).
    assert count(ptx, r"cp\.async\.wait_group") >= 2
    assert "fence.proxy.async" not in ptx
    assert "ldmatrix" not in ptx and "mma.sync" not in ptx
    assert re.search(r"\.shared \.align 1024 \.b8 global_smem\[\];", ptx)
    # Rings of [stages, BM, BK] and [stages, BK, BN] in the swizzle of their rows' bytes; B
    # rows over 128 bytes are cut into 64-element column blocks.
    vec, per_phase, max_phase = wgmma_swizzle(bk * 2)
    ring_a = (f"tensor<{config.num_stages}x{bm}x{bk}xf16, #shared<{{vec = {vec}, perPhase = "
              f"{per_phase}, maxPhase = {max_phase}, order = [2, 1, 0]}}>>")
    vec, per_phase, max_phase = wgmma_swizzle(bn * 2)
    blocks = ", blockCols = 64" if bn * 2 > 128 else ""
    ring_b = (f"tensor<{config.num_stages}x{bk}x{bn}xf16, #shared<{{vec = {vec}, perPhase = "
              f"{per_phase}, maxPhase = {max_phase}, order = [2, 1, 0]{blocks}}}>>")
    resolved = resolve_aliases(tgir)
    assert ring_a in resolved and ring_b in resolved
    # Descriptors: 8-row groups SBO = 8 rows apart; B's 64-column blocks LBO = BK rows of 128
    # bytes apart (A is K-major and B not blocked: LBO unused).
    swizzle_a, swizzle_b = min(128, bk * 2), min(128, bn * 2)
    fields = descriptor_fields(ptx)
    assert {(a[:2], b[:2]) for a, b in fields} == {((MODES[swizzle_a], 8 * swizzle_a // 16),
                                                   (MODES[swizzle_b], 8 * swizzle_b // 16))}
    if bn * 2 > 128:
        assert {b[2] for _, b in fields} == {bk * 128 // 16}
    check_kilobyte_alignment(tgir)
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not found: PTX not assembled")
    assert kernel.asm["cubin"][:4] == b"\x7fELF"
    assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["spill_loads"] == 0


def test_bf16_uses_the_bf16_instruction(matmul_kernel):
    kernel = compile_config(matmul_kernel, CONFIGS[1], dtype=ml_dtypes.bfloat16)
    ptx = kernel.asm["ptx"]
    assert count(ptx, r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.bf16\.bf16") == 4
    assert "f32.f16.f16" not in ptx


@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[2]], ids=[CONFIG_IDS[0], CONFIG_IDS[2]])
def test_knob_off_gives_mma_sync(matmul_kernel, config):
    knobs.wgmma = False
    try:
        kernel = compile_config(matmul_kernel, config)
    finally:
        knobs.reset("wgmma")
    ptx = kernel.asm["ptx"]
    assert "wgmma" not in ptx and "version = 3" not in kernel.asm["tgir"]
    assert count(ptx, r"mma\.sync\.aligned\.m16n8k16") > 0 and "ldmatrix" in ptx
    # The knob is back on: the same config is wgmma again.
    assert "wgmma.mma_async" in compile_config(matmul_kernel, config).asm["ptx"]


@pytest.mark.parametrize("config", CONFIGS[:3], ids=CONFIG_IDS[:3])
def test_sm80_never_uses_wgmma(matmul_kernel, config):
    kernel = compile_config(matmul_kernel, config, arch="sm_80")
    assert "wgmma" not in kernel.asm["ptx"] and "fence.proxy.async" not in kernel.asm["ptx"]
    assert "version = 3" not in kernel.asm["tgir"]
    assert count(kernel.asm["ptx"], r"mma\.sync\.aligned\.m16n8k16") > 0


def relative_error(out, ref) -> float:
    return float(np.linalg.norm(out.astype(np.float64) - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("index", [0, 6, 7], ids=[CONFIG_IDS[i] for i in (0, 6, 7)])
def test_pipelined_wgmma_ir_runs_exactly_in_the_interpreter(matmul_kernel, index):
    # The compiled stage (rings in wgmma's swizzle, the #mma version 3 accumulator) computes
    # the product: M, N, K multiples of 16 (the specialization) but not of the blocks.
    config = CONFIGS[index]
    tgir = compile_config(matmul_kernel, config, size=256).asm["tgir"]
    assert "version = 3" in tgir and "async_copy" in tgir
    rng = np.random.default_rng(index)
    m, n, k = 208, 144, 112
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    grid = (-(-m // bm) * -(-n // bn),)
    interpreter.run(ir.parse_module(tgir), grid=grid,
                    args=[a, b, c, bias, m, n, k, k, 1, n, 1, n, 1])
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    ref = np.where(ref >= 0, ref, 0.01 * ref)
    assert relative_error(c, ref) < 1e-3


@pytest.mark.parametrize("index", [0, 6], ids=[CONFIG_IDS[i] for i in (0, 6)])
def test_ragged_k_stages_a_inside_the_loop(matmul_kernel, index):
    # K = 1000: A's rows are not 16-byte aligned, so A is not copied into a ring; its tile is
    # stored to a buffer of its own in every iteration (materialize_wgmma_operands), while B
    # (rows of N = 512 elements) still has its ring.
    config = CONFIGS[index]
    bm, bn, bk = (config.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    a, b = np.zeros((512, 1000), np.float16), np.zeros((1000, 512), np.float16)
    kernel = matmul_kernel.compile(a, b, b, b, 512, 512, 1000, 1000, 1, 512, 1, 512, 1,
                                   HAS_BIAS=False, ACTIVATION="", arch="sm_90a",
                                   num_warps=config.num_warps, num_stages=config.num_stages,
                                   **config.kwargs)
    tgir = kernel.asm["tgir"]
    loop = tgir[tgir.index(" = for "):tgir.rindex("yield")]
    assert re.search(rf"local_alloc %\d+ \{{offset = \d+\}} : \(tensor<{bm}x{bk}xf16", loop)
    assert re.search(rf"local_alloc \{{offset = \d+\}} : \(\) -> tensor<{config.num_stages}x"
                     rf"{bk}x{bn}xf16", tgir)
    check_kilobyte_alignment(tgir)
    assert "wgmma.mma_async" in kernel.asm["ptx"] and "mma.sync" not in kernel.asm["ptx"]
    rng = np.random.default_rng(index + 11)
    m, n, k = 208, 144, 100  # K neither a multiple of BLOCK_K nor of 16
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    grid = (-(-m // bm) * -(-n // bn),)
    interpreter.run(ir.parse_module(tgir), grid=grid, args=[a, b, c, c, m, n, k, k, 1, n, 1, n, 1])
    assert relative_error(c, a.astype(np.float64) @ b.astype(np.float64)) < 1e-3
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["spill_loads"] == 0


def dot_trans_b(a_ptr, bt_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr):
    # c = a @ bt^T for a [M, K], bt [N, K], both K-major; one BM x BN tile per program. Rows
    # past M and N wrap around (the store drops them), K's tail is masked to zeros.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + (rm[:, None] % M) * K + rk[None, :]
    bt_ptrs = bt_ptr + (rn[:, None] % N) * K + rk[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        bt = tl.load(bt_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        acc = tl.dot(a, tl.trans(bt), acc)
        a_ptrs += BK
        bt_ptrs += BK
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def dot_scaled_a(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr):
    # c = (2 a) @ b: A is computed in registers before the dot.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + (rm[:, None] % M) * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * N + (rn[None, :] % N)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a * 2.0, b, acc)
        a_ptrs += BK
        b_ptrs += BK * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


# (kernel, blocks, num_warps, num_stages, imm-trans-b): a trans of a K-major tile is K-major
# (imm-trans-b = 0); B loaded as [K, N] is N-major (1).
OWN_TILE = [(dot_trans_b, (64, 128, 32), 4, 1, 0), (dot_trans_b, (128, 64, 64), 8, 3, 0),
          (dot_scaled_a, (64, 64, 32), 4, 1, 1), (dot_scaled_a, (128, 128, 32), 4, 4, 1),
          (dot_scaled_a, (128, 64, 64), 8, 3, 1)]


def own_tile_values(tgir: str) -> set:
    """The values stored to a tile of their own (local_alloc %v), by their defining op."""
    defs = dict(re.findall(r"(%\d+) = (\w+) ", tgir))
    return {defs.get(v) for v in re.findall(r"local_alloc (%\d+) ", tgir)}


@pytest.mark.parametrize("fn,blocks,num_warps,num_stages,trans_b", OWN_TILE,
                         ids=[f"{s[0].__name__}-{'x'.join(map(str, s[1]))}-w{s[2]}-s{s[3]}"
                              for s in OWN_TILE])
def test_operands_in_own_tiles_compile_to_wgmma(fn, blocks, num_warps, num_stages, trans_b):
    bm, bn, bk = blocks
    b_name = "bt_ptr" if fn is dot_trans_b else "b_ptr"
    signature = {"a_ptr": "*fp16", b_name: "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32",
                 "K": "i32"}
    kernel = compiler.compile_kernel(
        fn, signature, {"BM": bm, "BN": bn, "BK": bk}, {"a_ptr", b_name, "c_ptr", "N", "K"},
        options=compiler.CompileOptions(arch="sm_90a", num_warps=num_warps,
                                        num_stages=num_stages))
    tgir, ptx = kernel.asm["tgir"], kernel.asm["ptx"]
    wm, wn, n = expected_tiling(bm, bn, num_warps)
    assert f"#mma<{{version = 3, warpsPerCTA = [{wm}, {wn}], instrShape = [16, {n}]}}>" in tgir
    # What the pipeliner does not read from a ring is stored to a tile of its own
    # (materialize_wgmma_operands): 2 a always; bt itself when not pipelined, read as a
    # transposed view of its tile (trans(bt) is not stored); a pipelined bt is read from its
    # ring as a transposed view.
    own_tile = own_tile_values(tgir)
    if fn is dot_scaled_a:
        assert "mulf" in own_tile
    elif num_stages == 1:
        assert "load" in own_tile and "trans" not in own_tile
        assert re.search(r"local_load %\d+ \{order = \[1, 0\]\}", tgir)
    else:
        assert not own_tile and re.search(r"local_load %\d+, %\d+ \{order = \[1, 0\]\}", tgir)
    check_kilobyte_alignment(tgir)
    instructions = count(ptx, rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k16\.f32\.f16\.f16")
    assert instructions == (bm // (16 * wm)) * (bn // (n * wn)) * (bk // 16)
    assert count(ptx, r"wgmma\.mma_async") == instructions
    assert count(ptx, rf", p, 1, 1, 0, {trans_b};") == instructions
    assert "ldmatrix" not in ptx and "mma.sync" not in ptx
    # B's rows run along K (trans) or N; either way the swizzle of their width.
    swizzle_a, swizzle_b = min(128, bk * 2), min(128, (bn if trans_b else bk) * 2)
    fields = descriptor_fields(ptx)
    assert {(a[:2], b[:2]) for a, b in fields} == {((MODES[swizzle_a], 8 * swizzle_a // 16),
                                                   (MODES[swizzle_b], 8 * swizzle_b // 16))}
    if trans_b and bn * 2 > 128:
        assert {b[2] for _, b in fields} == {bk * 128 // 16}
    # Stores to an operand's own tile are made visible to wgmma's async proxy: the last st.shared
    # before the wgmma, then fence.proxy.async, then the barrier.
    if own_tile:
        before = ptx[:ptx.index("wgmma.fence")]
        assert (before.rindex("st.shared") < before.rindex("fence.proxy.async.shared::cta")
                < before.rindex("bar.sync"))
    rng = np.random.default_rng(bm + bn + num_stages)
    m, n_, k = 150, 80, 112  # N and K multiples of 16 (the specialization), not of the blocks
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n_)).astype(np.float16)
    c = np.full((m, n_), np.nan, np.float32)
    operand_b = np.ascontiguousarray(b.T) if fn is dot_trans_b else b
    grid = (-(-m // bm), -(-n_ // bn))
    interpreter.run(ir.parse_module(tgir), grid=grid, args=[a, operand_b, c, m, n_, k])
    scale = 1.0 if fn is dot_trans_b else 2.0
    ref = scale * a.astype(np.float64) @ b.astype(np.float64)
    assert relative_error(c, ref) < 1e-5
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["spill_loads"] == 0


def chained_dots(q_ptr, k_ptr, v_ptr, o_ptr, M: tl.constexpr, D: tl.constexpr):
    # o = (q k^T cast to f16) v for one [M, D] tile: the first product feeds the second's A.
    rm = tl.arange(0, M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    kt = tl.load(k_ptr + rd[:, None] + rm[None, :] * D)
    v = tl.load(v_ptr + rm[:, None] * D + rd[None, :])
    p = tl.dot(q, kt).to(tl.float16)
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], tl.dot(p, v))


@pytest.mark.parametrize("m,d,num_warps", [(64, 64, 4), (128, 64, 8)])
def test_chained_dot_reads_p_from_registers(m, d, num_warps):
    signature = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp32"}
    kernel = compiler.compile_kernel(chained_dots, signature, {"M": m, "D": d}, set(signature),
                                     options=compiler.CompileOptions(arch="sm_90a",
                                                                     num_warps=num_warps))
    tgir, ptx = kernel.asm["tgir"], kernel.asm["ptx"]
    # Every warp along M, so that a row of P stays in one warp.
    assert f"#mma<{{version = 3, warpsPerCTA = [{num_warps}, 1], instrShape = [16, {m}]}}>" in tgir
    assert f"#mma<{{version = 3, warpsPerCTA = [{num_warps}, 1], instrShape = [16, {d}]}}>" in tgir
    reps = m // (16 * num_warps)
    # S = Q K^T: A from a descriptor; O = P V: A from four 32-bit registers per k step.
    from_shared = count(ptx, rf"wgmma\.mma_async\.sync\.aligned\.m64n{m}k16\.f32\.f16\.f16 "
                             r"\{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, 0, 0;")
    from_registers = count(ptx, rf"wgmma\.mma_async\.sync\.aligned\.m64n{d}k16\.f32\.f16\.f16 "
                                r"\{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1, 1;")
    assert from_shared == reps * (d // 16) and from_registers == reps * (m // 16)
    assert count(ptx, r"wgmma\.mma_async") == from_shared + from_registers
    rng = np.random.default_rng(m)
    q = rng.standard_normal((m, d)).astype(np.float16)
    k = rng.standard_normal((m, d)).astype(np.float16)
    v = rng.standard_normal((m, d)).astype(np.float16)
    o = np.full((m, d), np.nan, np.float32)
    interpreter.run(ir.parse_module(tgir), grid=(1,), args=[q, k, v, o])
    p = (q.astype(np.float64) @ k.astype(np.float64).T).astype(np.float16)
    assert relative_error(o, p.astype(np.float64) @ v.astype(np.float64)) < 1e-5
    if ptxas.find_ptxas() is not None:
        assert kernel.metadata["spill_stores"] == 0 and kernel.metadata["spill_loads"] == 0
