"""Test helper: writes tile IR text (with explicit layouts) for the codegen tests.

Kernels are built op by op; each op names its operands and result type, and the helper keeps
value numbering and operand types, so that a test reads like the kernel it builds::

    k = Kernel("copy", ["ptr<f32>", "ptr<f32>"], divisibility=[16, 16])
    r = k.op("make_range", [], tensor([128], "i32", BLOCKED_1D), start=0, end=128)
"""
from __future__ import annotations

from collections.abc import Sequence

from tessera._tessera import ir


def blocked(size_per_thread, threads_per_warp, warps_per_cta, order) -> str:
    def join(values):
        return "[" + ", ".join(str(v) for v in values) + "]"
    return (f"#blocked<{{sizePerThread = {join(size_per_thread)}, threadsPerWarp = "
            f"{join(threads_per_warp)}, warpsPerCTA = {join(warps_per_cta)}, "
            f"order = {join(order)}}}>")


def tensor(shape: Sequence[int], element: str, encoding: str | None = None) -> str:
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{element}" + (f", {encoding}" if encoding else "") + ">"


def _attribute(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


class Kernel:
    """One func in a module, as text."""

    def __init__(self, name: str, argument_types: list[str],
                 divisibility: list[int] | None = None, num_warps: int = 4) -> None:
        self.name = name
        self.num_warps = num_warps
        self.types = {}
        self.lines: list[str] = []
        self.args = [self._new(t) for t in argument_types]
        params = ", ".join(f"{a}: {t}" for a, t in zip(self.args, argument_types))
        attrs = f" {{divisibility = [{', '.join(map(str, divisibility))}]}}" if divisibility else ""
        self.header = f"func @{name}({params}){attrs} {{"

    def _new(self, type_text: str) -> str:
        value = f"%{len(self.types)}"
        self.types[value] = type_text
        return value

    def op(self, name: str, operands: Sequence[str] = (), result: str | None = None,
           **attrs) -> str | None:
        out = self._new(result) if result else None
        attr_text = ""
        if attrs:
            attr_text = " {" + ", ".join(f"{k} = {_attribute(v)}" for k, v in attrs.items()) + "}"
        lhs = f"{out} = " if out else ""
        ins = " " + ", ".join(operands) if operands else ""
        types = ", ".join(self.types[o] for o in operands)
        self.lines.append(f"    {lhs}{name}{ins}{attr_text} : ({types}) -> {result or '()'}")
        return out

    def text(self) -> str:
        body = "\n".join(self.lines)
        return (f"module {{num_warps = {self.num_warps}}} {{\n  {self.header}\n{body}\n"
                f"    return : () -> ()\n  }}\n}}\n")

    def module(self):
        return ir.parse_module(self.text())


def vector_add(element: str = "f32", block: int = 1024, layout: str | None = None,
               divisibility: Sequence[int] = (16, 16, 16, 16)) -> Kernel:
    """out[i] = x[i] + y[i] for i < n in blocks of `block`; without layouts when layout=None."""
    pointer = f"ptr<{element}>"
    k = Kernel("add", [pointer, pointer, pointer, "i32"], list(divisibility))
    t = lambda e: tensor([block], e, layout)
    pid = k.op("program_id", [], "i32", axis=0)
    start = k.op("muli", [pid, k.op("constant", [], "i32", value=block)], "i32")
    offs = k.op("addi", [k.op("splat", [start], t("i32")),
                         k.op("make_range", [], t("i32"), start=0, end=block)], t("i32"))
    mask = k.op("cmpi", [offs, k.op("splat", [k.args[3]], t("i32"))], t("i1"), predicate="slt")

    def at(base):
        return k.op("addptr", [k.op("splat", [base], t(pointer)), offs], t(pointer))

    add = "addf" if element.startswith(("f", "bf")) else "addi"
    total = k.op(add, [k.op("load", [at(k.args[0]), mask], t(element)),
                       k.op("load", [at(k.args[1]), mask], t(element))], t(element))
    k.op("store", [at(k.args[2]), total, mask])
    return k
