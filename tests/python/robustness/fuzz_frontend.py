"""A fuzzer of the front end: random kernels, most of them malformed, compiled to tile IR
(and some all the way to PTX); every outcome must be a compiled kernel or a CompilationError
that names the kernel and a source line. Anything else is a Tessera bug:

- an exception that is not a CompilationError, or a CompilationError caused by an error type
  that signals a bug in Tessera (KeyError, AssertionError, ZeroDivisionError, ...) or by the
  C++ verifier rejecting IR the front end built;
- an abort (the process dies: run through ``main`` in a child process, see the test) or a hang.

Kernels are drawn from a small grammar of Triton-style statements (loads, stores, arithmetic,
reductions, shape ops, dots, control flow, calls with wrong arguments), then some are mutated
(a token dropped, a name swapped, a constant changed to a bad one).

    python3 tests/python/robustness/fuzz_frontend.py --examples 20000 --seed 1
"""
from __future__ import annotations

import argparse
import linecache
import random
import sys
import time
import traceback
import warnings
from typing import List, Optional, Tuple

import tessera.language as tl
from tessera.compiler import CompileOptions, build_tile_ir, compile_kernel
from tessera.errors import CompilationError

USER_ERRORS = (TypeError, ValueError, NameError, IndexError, AttributeError, SyntaxError,
               NotImplementedError, OverflowError)
SHAPES = [1, 2, 4, 16, 32, 64, 128, 3, 0, -4]
DTYPES = ["tl.float16", "tl.bfloat16", "tl.float32", "tl.int32", "tl.int8", "tl.int64",
          "tl.uint32", "tl.int1", "tl.float64", "tl.float8e5"]
SIGNATURE_TYPES = ["*fp32", "*fp16", "*i32", "*i64", "*bf16", "i32", "i64", "fp32"]


class Generator:
    """Random kernel text over parameters p0 (pointer), p1 (pointer), n (int), BLOCK."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.names = ["offs", "x", "y"]
        # Half the kernels are drawn from well-typed forms only, so that code generation is
        # reached often, not only the front end's first type check.
        self.careful = rng.random() < 0.5

    CAREFUL_FORMS = ["{a} + {b}", "{a} * {b}", "{a} - {b}", "tl.where({a} < {b}, {a}, {b})",
                     "tl.maximum({a}, {b})", "tl.exp({a}.to(tl.float32))", "{a}.to(tl.float32)",
                     "tl.sum({a}, axis=0) + {b}", "tl.max({a}, 0) + {b}", "tl.cumsum({a}, 0)",
                     "tl.load(p0 + offs, mask=offs < {b})", "tl.abs({a})",
                     "tl.reshape({a}, (BLOCK // 2, 2)).sum(1)" , "{a}.to(tl.int32) % 3",
                     "tl.associative_scan({a}, 0, combine)", "({a} > 0).to(tl.int32)",
                     "tl.sqrt(tl.abs({a}.to(tl.float32)))"]

    def pick(self, items):
        return self.rng.choice(items)

    def shape(self) -> int:
        return self.pick(SHAPES) if self.rng.random() < 0.2 else self.pick([16, 32, 64])

    def value(self) -> str:
        if self.careful:
            return self.pick(self.names + ["1", "2.5"])
        r = self.rng.random()
        if r < 0.65:
            return self.pick(self.names)
        if r < 0.8:
            return self.pick(["1", "2.5", "-3", "0", "n", "BLOCK", "True", "None", "'s'",
                              "float('nan')", "2**40", "(1, 2)"])
        return self.expression(depth=1)

    def expression(self, depth: int = 0) -> str:
        if self.careful:
            return self.pick(self.CAREFUL_FORMS).format(a=self.pick(self.names),
                                                        b=self.pick(self.names))
        a, b = self.value() if depth < 2 else "x", self.value() if depth < 2 else "y"
        forms = [
            f"{a} + {b}", f"{a} * {b}", f"{a} - {b}", f"{a} / {b}", f"{a} // {b}",
            f"{a} % {b}", f"{a} << {b}", f"{a} & {b}", f"{a} < {b}", f"-{a}", f"~{a}",
            f"tl.where({a} < {b}, {a}, {b})", f"tl.maximum({a}, {b})",
            f"tl.sum({a}, axis={self.pick(['0', '1', '-1', '2', 'None'])})",
            f"tl.max({a}, {self.pick(['0', '1'])})", f"tl.exp({a})", f"tl.sqrt({a})",
            f"{a}.to({self.pick(DTYPES)})", f"{a}[:, None]", f"{a}[None, :]", f"{a}[0]",
            f"tl.reshape({a}, ({self.shape()}, {self.shape()}))",
            f"tl.trans({a})", f"tl.dot({a}, {b})", f"tl.cumsum({a}, 0)",
            f"tl.arange(0, {self.shape()})", f"tl.arange({self.shape()}, 0)",
            f"tl.zeros(({self.shape()}, {self.shape()}), {self.pick(DTYPES)})",
            f"tl.full(({self.shape()},), {b}, {self.pick(DTYPES)})",
            f"tl.load(p0 + {a}, mask={b})", f"tl.load({a})",
            f"tl.broadcast_to({a}, ({self.shape()}, {self.shape()}))",
            f"tl.expand_dims({a}, {self.pick(['0', '1', '3', '-1'])})",
            f"tl.permute({a}, (1, 0))", f"tl.program_id({self.pick(['0', '1', '3'])})",
            f"tl.atomic_add(p1 + {a}, {b})", f"tl.abs({a})", f"tl.fma({a}, {b}, {a})",
            f"tl.cdiv({a}, {b})", f"tl.umulhi({a}, {b})", f"tl.argmax({a}, 0)",
            f"tl.associative_scan({a}, 0, combine)", f"combine({a}, {b})",
            f"tl.static_assert({a} == {b})", f"tl.nonexistent({a})", f"{a}.shape",
            f"{a}.dtype", f"undefined_name + {a}", f"({a}, {b})", f"[{a}]", f"len({a})",
        ]
        return self.pick(forms)

    def statement(self, indent: str, depth: int) -> List[str]:
        r = self.rng.random()
        name = self.pick(self.names + ["z", "w", "offs"])
        if r < 0.45:
            lines = [f"{indent}{name} = {self.expression()}"]
            if name not in self.names:
                self.names.append(name)
            return lines
        if r < 0.6:
            return [f"{indent}tl.store(p1 + {self.value()}, {self.value()}, mask={self.value()})"]
        if r < 0.7 and depth < 2:
            body = self.block(indent + "    ", depth + 1)
            other = self.block(indent + "    ", depth + 1)
            return ([f"{indent}if {self.value()} < {self.value()}:"] + body +
                    [f"{indent}else:"] + other)
        if r < 0.8 and depth < 2:
            bound = self.pick(["n", "4", "BLOCK", "x", "0", "-1"])
            return ([f"{indent}for i in {self.pick(['range', 'tl.range', 'tl.static_range'])}"
                     f"(0, {bound}):"] + self.block(indent + "    ", depth + 1))
        if r < 0.85 and depth < 2:
            return ([f"{indent}while {self.value()} < {self.value()}:"] +
                    self.block(indent + "    ", depth + 1))
        if r < 0.9:
            return [indent + self.pick(['return', 'break', 'continue', 'pass', 'assert x',
                                        'del x', 'print(x)', 'x += 1', 'x, y = y, x',
                                        'x: tl.constexpr = 4'])]
        return [f"{indent}tl.device_print('v', {self.value()})"]

    def block(self, indent: str, depth: int) -> List[str]:
        return [line for _ in range(self.rng.randint(1, 3))
                for line in self.statement(indent, depth)]

    def kernel(self) -> str:
        lines = ["def kernel(p0, p1, n, BLOCK: tl.constexpr):",
                 "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
                 "    x = tl.load(p0 + offs, mask=offs < n, other=0)",
                 "    y = x * 2"]
        lines += self.block("    ", 0)
        lines.append(f"    tl.store(p1 + offs, {self.value()}, mask=offs < n)")
        text = "\n".join(lines) + "\n"
        if not self.careful and self.rng.random() < 0.3:
            text = self.mutate(text)
        return text

    def mutate(self, text: str) -> str:
        tokens = text.split(" ")
        index = self.rng.randrange(len(tokens))
        choice = self.rng.random()
        if choice < 0.4:
            del tokens[index]
        elif choice < 0.7:
            tokens[index] = self.pick(["x", "BLOCK", "tl.float32", "0", "(", ")", ":", "=",
                                       "tl", "1e400", "-2**63", "lambda: 1"])
        else:
            tokens.insert(index, self.pick(["not", "-", "*", "tl.", "None", ","]))
        return " ".join(tokens)


COMBINE = "@tessera.jit\ndef combine(a, b):\n    return a + b\n"


def build(text: str, index: int, rng: random.Random):
    """Compiles one kernel text: the kernel function object, or None when the text is not
    Python (then there is nothing to compile)."""
    import tessera
    filename = f"<fuzz {index}>"
    source = COMBINE + text
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"tl": tl, "tessera": tessera}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "perhaps you missed a comma?" and the like
            exec(compile(source, filename, "exec"), namespace)
    except SyntaxError:
        return None
    return namespace["kernel"]


def run_one(text: str, index: int, rng: random.Random, codegen: bool) -> Tuple[str, str]:
    """("ok" | "user error" | "INTERNAL", detail)."""
    fn = build(text, index, rng)
    if fn is None:
        return "syntax", ""
    signature = {"p0": rng.choice(SIGNATURE_TYPES), "p1": rng.choice(SIGNATURE_TYPES),
                 "n": rng.choice(["i32", "i64"])}
    constexprs = {"BLOCK": rng.choice([16, 32, 64, 1])}
    try:
        if codegen:
            compile_kernel(fn, signature, constexprs, set(), set(),
                           CompileOptions(num_warps=4, arch=rng.choice(["sm_80", "sm_90a"])))
        else:
            build_tile_ir(fn, signature, constexprs)
        return "ok", ""
    except CompilationError as error:
        cause = error.__cause__
        if cause is None or isinstance(cause, USER_ERRORS + (CompilationError,)) or \
                type(cause).__module__.startswith("tessera"):
            if error.lineno <= 0 or error.kernel_name != "kernel":
                return "INTERNAL", f"error without a location: {error}"
            return "user error", ""
        return "INTERNAL", "".join(traceback.format_exception(cause))
    except RecursionError:
        return "user error", ""
    except Exception:  # noqa: BLE001 - anything else escaping the compiler is the bug we seek
        return "INTERNAL", traceback.format_exc()


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--codegen-every", type=int, default=25,
                        help="compile every Nth kernel down to PTX (slower)")
    options = parser.parse_args(argv)
    counts: dict = {}
    internal = 0
    start = time.time()
    for index in range(options.examples):
        rng = random.Random(options.seed * 1_000_003 + index)
        text = Generator(rng).kernel()
        outcome, detail = run_one(text, index, rng, index % options.codegen_every == 0)
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome == "INTERNAL":
            internal += 1
            print(f"--- example {index} (seed {options.seed}):\n{text}\n{detail}", flush=True)
    print(f"{options.examples} examples in {time.time() - start:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
    return 1 if internal else 0


if __name__ == "__main__":
    sys.exit(main())
