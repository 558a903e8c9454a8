"""Every elementwise op of ops.def through codegen, per element type: the lowered LLVM IR uses
the instruction the op's contract names, and the PTX assembles for sm_80 and sm_90a (where
ptxas is installed; otherwise that part is skipped visibly).
"""

import pytest
from codegen_ir import Kernel, blocked, tensor
from tessera._tessera import codegen
from tessera.compiler import ptxas

LAYOUT = blocked([1], [32], [4], [0])
SIZE = 128
LLVM_TYPES = {"f16": "half", "bf16": "bfloat", "f32": "float", "f64": "double",
              "i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64"}

FLOAT_BINARY = {"addf": "fadd", "subf": "fsub", "mulf": "fmul", "divf": "fdiv", "remf": "frem",
                "maxnumf": "@llvm.maxnum", "minnumf": "@llvm.minnum",
                "maximumf": "@llvm.maximum", "minimumf": "@llvm.minimum"}
FLOAT_PREDICATES = ["oeq", "one", "olt", "ole", "ogt", "oge", "ueq", "une", "ult", "ule", "ugt",
                    "uge", "ord", "uno"]
INT_BINARY = {"addi": "add", "subi": "sub", "muli": "mul", "divsi": "sdiv", "divui": "udiv",
              "remsi": "srem", "remui": "urem", "andi": "and", "ori": "or", "xori": "xor",
              "shli": "shl", "shrsi": "ashr", "shrui": "lshr", "maxsi": "@llvm.smax",
              "minsi": "@llvm.smin", "maxui": "@llvm.umax", "minui": "@llvm.umin"}
INT_PREDICATES = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
# (op, from, to, LLVM instruction)
CASTS = [("extsi", "i32", "i64", "sext"), ("extui", "i8", "i32", "zext"),
         ("extui", "i1", "i16", "zext"), ("trunci", "i64", "i16", "trunc"),
         ("extf", "f16", "f32", "fpext"), ("extf", "bf16", "f64", "fpext"),
         ("truncf", "f32", "f16", "fptrunc"), ("truncf", "f32", "bf16", "fptrunc"),
         ("truncf", "f64", "f32", "fptrunc"), ("sitofp", "i32", "f32", "sitofp"),
         ("uitofp", "i64", "f16", "uitofp"), ("fptosi", "f32", "i32", "fptosi"),
         ("fptoui", "f64", "i8", "fptoui"), ("bitcast", "f32", "i32", "bitcast"),
         ("bitcast", "i16", "bf16", "bitcast")]


def expected_instruction(instruction: str, element: str) -> str:
    """How the op shows in the lowered IR: `fadd half`, `@llvm.smax.i32`, ..."""
    if instruction.startswith("@"):
        return f"{instruction}.{element}"
    return f"{instruction} {LLVM_TYPES[element]}"


class ElementwiseKernel:
    """Loads a and b (SIZE elements each), then stores each tested result in its own row."""

    def __init__(self, name: str, element: str, result_elements: list[str]) -> None:
        pointers = [f"ptr<{element}>", f"ptr<{element}>"] + [f"ptr<{e}>" for e in result_elements]
        self.k = Kernel(name, pointers, [16] * len(pointers))
        self.element = element
        self.range = self.k.op("make_range", [], self.t("i32"), start=0, end=SIZE)
        self.a, self.b = (self.load(self.k.args[i], element) for i in (0, 1))
        self.outputs = 0

    def t(self, element: str) -> str:
        return tensor([SIZE], element, LAYOUT)

    def pointers(self, base: str, element: str) -> str:
        splat = self.k.op("splat", [base], self.t(f"ptr<{element}>"))
        return self.k.op("addptr", [splat, self.range], self.t(f"ptr<{element}>"))

    def load(self, base: str, element: str) -> str:
        return self.k.op("load", [self.pointers(base, element)], self.t(element))

    def store(self, value: str, element: str) -> None:
        self.k.op("store", [self.pointers(self.k.args[2 + self.outputs], element), value])
        self.outputs += 1


def generate_for_both_archs(kernel: Kernel) -> tuple[str, dict[str, str]]:
    """The lowered LLVM IR (the same for both archs) and the PTX per arch."""
    results = {arch: codegen.generate(kernel.module(), arch=arch) for arch in ("sm_80", "sm_90a")}
    return results["sm_90a"]["unoptimized_llvm_ir"], {a: r["ptx"] for a, r in results.items()}


def assemble_or_skip(ptx_by_arch: dict[str, str]) -> None:
    """Last step of a test: ptxas must accept every PTX; skipped visibly without ptxas."""
    if ptxas.find_ptxas() is None:
        pytest.skip("ptxas not installed: IR checked, PTX not assembled")
    for arch, ptx in ptx_by_arch.items():
        ptxas.assemble(ptx, arch)  # raises PtxasError with ptxas's log on failure


@pytest.mark.parametrize("element", ["f16", "bf16", "f32", "f64"])
def test_float_ops(element):
    ops: list[tuple[str, str]] = list(FLOAT_BINARY.items())
    outputs = [element] * (len(ops) + 1 + len(FLOAT_PREDICATES))
    e = ElementwiseKernel("float_ops", element, outputs)
    for op, _ in ops:
        e.store(e.k.op(op, [e.a, e.b], e.t(element)), element)
    e.store(e.k.op("negf", [e.a], e.t(element)), element)
    for predicate in FLOAT_PREDICATES:
        condition = e.k.op("cmpf", [e.a, e.b], e.t("i1"), predicate=predicate)
        e.store(e.k.op("select", [condition, e.a, e.b], e.t(element)), element)
    lowered, ptx = generate_for_both_archs(e.k)
    for op, instruction in ops:
        assert expected_instruction(instruction, element) in lowered, op
    assert f"fneg {LLVM_TYPES[element]}" in lowered
    for predicate in FLOAT_PREDICATES:
        assert f"fcmp {predicate} {LLVM_TYPES[element]}" in lowered, predicate
    assert "select i1 %" in lowered
    assemble_or_skip(ptx)


@pytest.mark.parametrize("element", ["i8", "i16", "i32", "i64"])
def test_integer_ops(element):
    ops = list(INT_BINARY.items())
    outputs = [element] * len(ops) + ["i1"] * len(INT_PREDICATES)
    e = ElementwiseKernel("int_ops", element, outputs)
    for op, _ in ops:
        e.store(e.k.op(op, [e.a, e.b], e.t(element)), element)
    for predicate in INT_PREDICATES:
        e.store(e.k.op("cmpi", [e.a, e.b], e.t("i1"), predicate=predicate), "i1")
    lowered, ptx = generate_for_both_archs(e.k)
    for op, instruction in ops:
        assert expected_instruction(instruction, element) in lowered, op
    for predicate in INT_PREDICATES:
        assert f"icmp {predicate} {LLVM_TYPES[element]}" in lowered, predicate
    # Booleans are bytes in memory: each i1 result is widened before its store.
    assert "zext i1" in lowered and "store i8" in lowered
    assemble_or_skip(ptx)


@pytest.mark.parametrize("op,source,target,instruction", CASTS,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASTS])
def test_casts(op, source, target, instruction):
    e = ElementwiseKernel("cast", source, [target])
    e.store(e.k.op(op, [e.a], e.t(target)), target)
    lowered, ptx = generate_for_both_archs(e.k)
    cast = f"{instruction} {LLVM_TYPES[source]} %"
    assert cast in lowered
    assert f" to {LLVM_TYPES[target]}" in lowered.split(cast)[1].splitlines()[0]
    assemble_or_skip(ptx)
