"""Compares the SASS of the tutorial matmul compiled by Tessera and by Triton 3.6 (sm_90a, no
GPU): instructions in the main K loop and after it (the epilogue), by opcode, and registers.
Instruction counts, not speed (docs/perf/matmul_sass.md).

The kernel is tests/compat/kernels/matmul_autotune.py's @jit (Triton's tutorial text) at one
config, specialized as a launch on M = N = K = n contiguous fp16 matrices would be. Each side
runs in its own interpreter (Triton's without Tessera, in a separate environment) and writes
its cubin; the third step disassembles both (cuobjdump, CUDA 12.8+)::

    PYTHONPATH=$PWD/python python3 scripts/matmul_sass.py tessera OUT [--config 128,256,64,8,3]
        [--size 8192]
    /tmp/tvenv/bin/python scripts/matmul_sass.py triton OUT [same options]
    python3 scripts/matmul_sass.py compare OUT [--cuobjdump PATH]
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
KERNEL_FILE = os.path.join(ROOT, "tests", "compat", "kernels", "matmul_autotune.py")


def kernel_source() -> str:
    """The kernel and its @jit helper from the compat file, without decorators or imports."""
    tree = ast.parse(open(KERNEL_FILE).read())
    functions = [node for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.name in ("leaky_relu",
                                                                         "matmul_kernel")]
    for function in functions:
        function.decorator_list = [ast.parse("triton.jit").body[0].value]
    return ("import triton\nimport triton.language as tl\n\n"
            + "\n\n".join(ast.unparse(function) for function in functions) + "\n")


def constexprs(config, size):
    block_m, block_n, block_k, _, _ = config
    return {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k,
            "GROUP_SIZE_M": 8, "EVEN_K": size % block_k == 0, "ACTIVATION": ""}


def compile_tessera(config, size) -> bytes:
    import torch
    from tessera.warmup import MockTensor
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from compat import loader
    kernel = loader.load_tessera("matmul_autotune").matmul_kernel
    while not hasattr(kernel, "compile"):  # autotune -> heuristics -> jit
        kernel = kernel.fn
    x = MockTensor(torch.float16, [size, size])
    compiled = kernel.compile(x, x, x, size, size, size, size, 1, size, 1, size, 1,
                              num_warps=config[3], num_stages=config[4], arch="sm_90a",
                              **constexprs(config, size))
    return compiled.asm["cubin"]


def compile_triton(config, size) -> bytes:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as file:
        file.write(kernel_source())  # Triton reads a kernel's source from its file
    spec = importlib.util.spec_from_file_location("matmul_sass_kernel", file.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ints = ["M", "N", "K", "stride_am", "stride_bk", "stride_cm"]
    signature = {name: "*fp16" for name in ("a_ptr", "b_ptr", "c_ptr")}
    signature.update({name: "i32" for name in ints})
    constants = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, **constexprs(config, size)}
    signature.update({name: "constexpr" for name in constants})
    names = module.matmul_kernel.arg_names
    signature = {name: signature[name] for name in names}
    # Pointers are 16-byte aligned; ints divisible by 16 specialize as a launch would.
    divisible = [name for name in signature if signature[name] == "*fp16"
                 or (signature[name] == "i32" and size % 16 == 0)]
    attrs = {(names.index(name),): [["tt.divisibility", 16]] for name in divisible}
    source = ASTSource(module.matmul_kernel, signature, constants, attrs)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": config[3], "num_stages": config[4]})
    return compiled.asm["cubin"]


def parse_sass(text: str):
    """[(address, instruction text)] of a cuobjdump -sass listing."""
    return [(int(m.group(1), 16), m.group(2).strip())
            for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", text)]


def opcode(text: str) -> str:
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]


def regions(instructions):
    """(loop, after) of the first backward branch: the K loop and the epilogue."""
    for index, (address, text) in enumerate(instructions):
        target = re.search(r"\bBRA\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)", text)
        if target and int(target.group(1), 16) < address:
            start = next(i for i, (a, _) in enumerate(instructions)
                         if a == int(target.group(1), 16))
            after = [t for _, t in instructions[index + 1:] if opcode(t) not in ("NOP", "BRA")]
            return [t for _, t in instructions[start:index + 1]], after
    raise ValueError("no loop found")


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
        print(f"{side}: {registers}, loop {len(loop)} instructions, after the loop "
              f"{len(after)}")
        for name, part in (("  loop", loop), ("  after", after)):
            counts = collections.Counter(opcode(t) for t in part)
            print(name + ": " + " ".join(f"{k}:{v}" for k, v in counts.most_common()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("side", choices=("tessera", "triton", "compare"))
    parser.add_argument("out", help="folder for tessera.cubin and triton.cubin")
    parser.add_argument("--config", default="128,256,64,8,3",
                        help="BLOCK_M,BLOCK_N,BLOCK_K,num_warps,num_stages")
    parser.add_argument("--size", type=int, default=8192, help="M = N = K")
    parser.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    options = parser.parse_args()
    if options.side == "compare":
        return compare(options.out, options.cuobjdump)
    config = tuple(int(v) for v in options.config.split(","))
    build = compile_tessera if options.side == "tessera" else compile_triton
    os.makedirs(options.out, exist_ok=True)
    with open(os.path.join(options.out, options.side + ".cubin"), "wb") as file:
        file.write(build(config, options.size))


if __name__ == "__main__":
    main()
