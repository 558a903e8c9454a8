"""Compares the SASS of a compat matmul compiled by Tessera and by Triton 3.6 (sm_90a, no GPU):
instructions per K step (the loop with the wgmma) and per output tile (the epilogue, and in a
persistent kernel the tile's set-up), by opcode, and registers. Instruction counts, not speed
(docs/perf/matmul_sass.md).

The kernel (``--kernel``) is a @jit of tests/compat/kernels (Triton's tutorial text) at one
config, specialized as a launch on M = N = K = n contiguous fp16 matrices would be:
matmul_autotune (tutorial 03) or descriptor_matmul (the persistent tutorial's device-side
tensor descriptors, NUM_SMS = 132: an H100 / H200). Each side runs in its own interpreter
(Triton's without Tessera, in a separate environment) and writes its cubin; the third step
disassembles both (cuobjdump, CUDA 12.8+)::

    PYTHONPATH=$PWD/python python3 scripts/matmul_sass.py tessera OUT [--config 128,256,64,8,3]
        [--size 8192] [--kernel descriptor_matmul]
    /tmp/tvenv/bin/python scripts/matmul_sass.py triton OUT [same options]
    python3 scripts/matmul_sass.py compare OUT [--cuobjdump PATH]

Tessera's side honours the knobs of the environment (TESSERA_WGMMA_PIPELINE=0 / 1, ...).
"""
import argparse
import ast
import collections
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "tests", "compat", "kernels")
# Per compat module: its @jit kernel and the @jit helpers it calls.
FUNCTIONS = {"matmul_autotune": ("matmul_kernel", ("leaky_relu",)),
             "descriptor_matmul": ("matmul_kernel_descriptor_persistent", ())}
NUM_SMS = 132  # H100 SXM and H200


def kernel_source(kernel: str) -> str:
    """The kernel and its @jit helpers from the compat file, without decorators or imports."""
    tree = ast.parse(open(os.path.join(KERNELS, kernel + ".py")).read())
    name, helpers = FUNCTIONS[kernel]
    functions = [node for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.name in (name,) + helpers]
    for function in functions:
        function.decorator_list = [ast.parse("triton.jit").body[0].value]
    return ("import triton\nimport triton.language as tl\n\n"
            + "\n\n".join(ast.unparse(function) for function in functions) + "\n")


def constexprs(kernel, config, size):
    block_m, block_n, block_k, _, _ = config
    blocks = {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k,
              "GROUP_SIZE_M": 8}
    if kernel == "descriptor_matmul":
        return {**blocks, "NUM_SMS": NUM_SMS}
    return {**blocks, "EVEN_K": size % block_k == 0, "ACTIVATION": ""}


def runtime_ints(kernel, size):
    """The kernel's integer arguments after the three pointers, by name."""
    if kernel == "descriptor_matmul":
        return {"M": size, "N": size, "K": size}
    return {"M": size, "N": size, "K": size, "stride_am": size, "stride_ak": 1,
            "stride_bk": size, "stride_bn": 1, "stride_cm": size, "stride_cn": 1}


def compile_tessera(kernel_name, config, size) -> bytes:
    import torch
    from tessera.warmup import MockTensor
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from compat import loader
    kernel = getattr(loader.load_tessera(kernel_name), FUNCTIONS[kernel_name][0])
    while not hasattr(kernel, "compile"):  # autotune -> heuristics -> jit
        kernel = kernel.fn
    x = MockTensor(torch.float16, [size, size])
    compiled = kernel.compile(x, x, x, *runtime_ints(kernel_name, size).values(),
                              num_warps=config[3], num_stages=config[4], arch="sm_90a",
                              **constexprs(kernel_name, config, size))
    return compiled.asm["cubin"]


def compile_triton(kernel_name, config, size) -> bytes:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as file:
        file.write(kernel_source(kernel_name))  # Triton reads a kernel's source from its file
    spec = importlib.util.spec_from_file_location("matmul_sass_kernel", file.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jitted = getattr(module, FUNCTIONS[kernel_name][0])
    signature = {name: "*fp16" for name in ("a_ptr", "b_ptr", "c_ptr")}
    constants = constexprs(kernel_name, config, size)
    for name, value in runtime_ints(kernel_name, size).items():
        if value == 1:  # unit strides: specialized to constants, as a launch does
            constants[name] = 1
        else:
            signature[name] = "i32"
    signature.update({name: "constexpr" for name in constants})
    names = jitted.arg_names
    signature = {name: signature[name] for name in names}
    # Pointers are 16-byte aligned; ints divisible by 16 specialize as a launch would.
    divisible = [name for name in signature if signature[name] == "*fp16"
                 or (signature[name] == "i32" and size % 16 == 0)]
    attrs = {(names.index(name),): [["tt.divisibility", 16]] for name in divisible}
    source = ASTSource(jitted, signature, constants, attrs)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": config[3], "num_stages": config[4]})
    return compiled.asm["cubin"]


def parse_sass(text: str):
    """[(address, instruction text)] of a cuobjdump -sass listing."""
    return [(int(m.group(1), 16), m.group(2).strip())
            for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", text)]


def opcode(text: str) -> str:
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]


def branch_target(text: str):
    """The target address of a branch (not of a warp-uniform retry loop, BRA.U.ANY), or None."""
    target = re.search(r"\bBRA(?:\.DIV)?\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)", text)
    return int(target.group(1), 16) if target else None


def regions(instructions):
    """(k step, per tile) instruction texts, NOPs left out. The K loop is the innermost loop
    (backward branch) holding the HGMMAs, or the first loop when there are none. Per tile: a
    persistent kernel's tile loop less the K loop; after a K loop nested in none, everything
    after it (the epilogue); and inside the K loop the blocks a forward branch skips that
    store the tile or divide (a flattened loop's epilogue and tile set-up), which leave the
    K step's count."""
    addresses = [address for address, _ in instructions]
    loops = []  # (first index, last index): the branch's target .. the branch
    for index, (address, text) in enumerate(instructions):
        target = branch_target(text)
        # Not a spin on an mbarrier's phase, nor the jump back from one placed out of line.
        spin = any(opcode(text).startswith("SYNCS.PHASECHK")
                   for _, text in instructions[max(0, index - 2):index])
        if target is not None and target < address and target in addresses and not spin:
            loops.append((addresses.index(target), index))
    if not loops:
        raise ValueError("no loop found")

    def has(first, last, names):  # names: opcodes without their .modifiers
        return any(opcode(text).split(".")[0] in names
                   for _, text in instructions[first:last + 1])

    with_mma = [loop for loop in loops if has(*loop, ("HGMMA", "HMMA"))]
    kloop = min(with_mma or loops[:1], key=lambda loop: loop[1] - loop[0])
    tile_work = ("STSM", "STG", "UTMASTG", "UBLKCP", "I2F")  # I2F: an integer division
    per_tile_inside = set()
    for index in range(kloop[0], kloop[1] + 1):
        address, text = instructions[index]
        target = branch_target(text)
        if target is None or not address < target <= instructions[kloop[1]][0]:
            continue
        end = addresses.index(target) - 1
        if has(index + 1, end, tile_work) and not has(index + 1, end, ("HGMMA",)):
            per_tile_inside.update(range(index + 1, end + 1))
    outer = [loop for loop in loops if loop[0] <= kloop[0] and kloop[1] <= loop[1] and
             loop != kloop]
    if outer:
        tile = min(outer, key=lambda loop: loop[1] - loop[0])
        per_tile = [i for i in range(tile[0], tile[1] + 1) if not kloop[0] <= i <= kloop[1]]
    elif per_tile_inside:
        per_tile = []
    else:
        per_tile = list(range(kloop[1] + 1, len(instructions)))
    per_tile = sorted(set(per_tile) | per_tile_inside)
    step = [i for i in range(kloop[0], kloop[1] + 1) if i not in per_tile_inside]

    def texts(indices):
        return [instructions[i][1] for i in indices
                if opcode(instructions[i][1]) not in ("NOP",)]
    return texts(step), texts(per_tile)


def compare(out: str, cuobjdump: str) -> None:
    for side in ("triton", "tessera"):
        path = os.path.join(out, side + ".cubin")
        if not os.path.exists(path):
            print(f"{side}: {path} missing")
            continue
        sass = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True).stdout
        usage = subprocess.run([cuobjdump, "-res-usage", path], capture_output=True,
                               text=True).stdout
        loop, after = regions(parse_sass(sass))
        registers = re.search(r"REG:\d+ STACK:\d+", usage).group(0)
        print(f"{side}: {registers}, K step {len(loop)} instructions, per tile {len(after)}")
        for name, part in (("  K step", loop), ("  per tile", after)):
            counts = collections.Counter(opcode(t) for t in part)
            print(name + ": " + " ".join(f"{k}:{v}" for k, v in counts.most_common()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("side", choices=("tessera", "triton", "compare"))
    parser.add_argument("out", help="folder for tessera.cubin and triton.cubin")
    parser.add_argument("--config", default="128,256,64,8,3",
                        help="BLOCK_M,BLOCK_N,BLOCK_K,num_warps,num_stages")
    parser.add_argument("--size", type=int, default=8192, help="M = N = K")
    parser.add_argument("--kernel", default="matmul_autotune", choices=sorted(FUNCTIONS))
    parser.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    options = parser.parse_args()
    if options.side == "compare":
        return compare(options.out, options.cuobjdump)
    config = tuple(int(v) for v in options.config.split(","))
    build = compile_tessera if options.side == "tessera" else compile_triton
    os.makedirs(options.out, exist_ok=True)
    with open(os.path.join(options.out, options.side + ".cubin"), "wb") as file:
        file.write(build(options.kernel, config, options.size))


if __name__ == "__main__":
    main()
