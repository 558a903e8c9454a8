"""Test helper: runs the LLVM IR that codegen emits (``unoptimized_llvm_ir``) on the CPU, one
CTA at a time, every thread of it, so that codegen tests can check results without a GPU.

It reads the subset of textual LLVM IR the lowering emits (integer and float arithmetic,
compares, casts, select, GEP, scalar and vector loads and stores, phi and branches) plus the
NVVM intrinsics of thread ids, shuffles and barriers (and rsqrt.approx, computed exactly), and
fabs / rint / trunc / floor / ceil, integer and float min/max, and the inline PTX of fp8
conversions (cvt.rz) and of masked stores (`@p st`).
Threads are Python generators that pause at each shuffle (until every lane of the warp is
there: then values are exchanged) and each barrier (until every live thread of the CTA is
there). Global memory is the NumPy arrays passed as pointer arguments (an access outside
them raises, as does one outside the shared memory the kernel declares), so a wrong index
fails loudly. Example::

    result = codegen.generate(module, num_warps=4)
    run_kernel(result["unoptimized_llvm_ir"], grid=(2,), args=[x, out, n], num_warps=4,
               shared_bytes=result["shared_bytes"])
"""
from __future__ import annotations

import re
import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import ml_dtypes
import numpy as np

FLOATS = {"half": np.float16, "bfloat": ml_dtypes.bfloat16, "float": np.float32,
          "double": np.float64}
SIZES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "half": 2, "bfloat": 2, "float": 4,
         "double": 8, "ptr": 8}
NUMPY_OF = {"i1": np.uint8, "i8": np.uint8, "i16": np.uint16, "i32": np.uint32,
            "i64": np.uint64, "ptr": np.uint64, **FLOATS}
SHARED_BASE = 1 << 40  # shared-memory pointers are offsets; tell them from global addresses


class SimulationError(RuntimeError):
    pass


# ---- parsing ---------------------------------------------------------------------------------

_TYPE = re.compile(r"<\d+ x [a-z0-9]+>|ptr(?: addrspace\(\d+\))?|i\d+|half|bfloat|float|double"
                   r"|void")


def _width(ty: str) -> int:
    return int(ty[1:])


def _element(ty: str) -> Tuple[str, int]:
    """(element type, lanes) of a vector type; (ty, 0) otherwise."""
    match = re.fullmatch(r"<(\d+) x ([a-z0-9]+)>", ty)
    return (match.group(2), int(match.group(1))) if match else (ty, 0)


class _Reader:
    """Reads `type value` operands from one instruction's text."""

    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def skip(self, *words: str) -> None:
        while True:
            self.space()
            for word in words:
                if self.text.startswith(word + " ", self.pos):
                    self.pos += len(word) + 1
                    break
            else:
                return

    def space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " ,":
            self.pos += 1

    def type(self) -> str:
        self.space()
        match = _TYPE.match(self.text, self.pos)
        if not match:
            raise SimulationError(f"cannot read a type in: {self.text[self.pos:]!r}")
        self.pos = match.end()
        return match.group(0)

    def word(self) -> str:
        self.space()
        match = re.compile(r"[^ ,()\[\]]+").match(self.text, self.pos)
        if not match:
            raise SimulationError(f"cannot read a word in: {self.text[self.pos:]!r}")
        self.pos = match.end()
        return match.group(0)

    def value(self, ty: str) -> Callable:
        """A getter env -> value for the next operand of type `ty`."""
        self.space()
        if self.text.startswith("getelementptr", self.pos):  # constant expression
            self.pos += len("getelementptr")
            self.skip("inbounds", "nuw", "nusw")
            self.space()
            assert self.text[self.pos] == "("
            self.pos += 1
            element = self.type()
            base_ty = self.type()
            base = self.value(base_ty)
            index_ty = self.type()
            index = self.value(index_ty)
            self.space()
            self.pos += 1  # ")"
            size = SIZES[element]
            return lambda env: base(env) + _signed(index(env), _width(index_ty)) * size
        token = self.word()
        if token.startswith("%"):
            name = token
            return lambda env: env[name]
        if token.startswith("@"):
            return lambda env: env[token]
        constant = _constant(token, ty)
        return lambda env: constant


def _constant(token: str, ty: str) -> Any:
    if token in ("poison", "undef"):
        return _constant("zeroinitializer", ty)
    element, lanes = _element(ty)
    if lanes:
        if token != "zeroinitializer":
            raise SimulationError(f"unsupported vector constant {token}")
        return tuple(_constant("0", element) for _ in range(lanes))
    if token in ("zeroinitializer", "null"):
        token = "0"
    if element in FLOATS:
        dtype = FLOATS[element]
        if token.startswith("0xH"):
            return np.frombuffer(struct.pack("<H", int(token[3:], 16)), np.float16)[0]
        if token.startswith("0xR"):
            return np.frombuffer(struct.pack("<H", int(token[3:], 16)), ml_dtypes.bfloat16)[0]
        if token.startswith("0x"):
            return dtype(struct.unpack("<d", struct.pack("<Q", int(token, 16)))[0])
        return dtype(float(token))
    if token in ("true", "false"):
        return int(token == "true")
    return int(token) & ((1 << SIZES.get(element, 8) * 8) - 1 if element != "i1" else 1)


def _signed(value: int, width: int) -> int:
    return value - (1 << width) if value >> (width - 1) & 1 else value


class Instruction:
    __slots__ = ("op", "result", "args", "text")

    def __init__(self, op: str, result: Optional[str], args: tuple, text: str) -> None:
        self.op, self.result, self.args, self.text = op, result, args, text


def _parse_instruction(line: str) -> Instruction:
    result = None
    match = re.match(r"(%[\w.]+) = (.*)", line)
    if match:
        result, line = match.group(1), match.group(2)
    reader = _Reader(line)
    op = reader.word()
    reader.skip("nuw", "nsw", "exact", "disjoint", "inbounds", "nnan", "ninf", "nsz", "arcp",
                "contract", "afn", "reassoc", "fast", "tail", "samesign")
    if op in _BINARY or op in ("icmp", "fcmp"):
        predicate = reader.word() if op in ("icmp", "fcmp") else None
        ty = reader.type()
        return Instruction(op, result, (predicate, ty, reader.value(ty), reader.value(ty)), line)
    if op == "fneg":
        ty = reader.type()
        return Instruction(op, result, (ty, reader.value(ty)), line)
    if op in _CASTS:
        source = reader.type()
        value = reader.value(source)
        reader.skip("to")
        return Instruction(op, result, (source, value, reader.type()), line)
    if op == "select":
        cond_ty = reader.type()
        cond = reader.value(cond_ty)
        ty = reader.type()
        a = reader.value(ty)
        reader.type()
        return Instruction(op, result, (cond, a, reader.value(ty)), line)
    if op == "getelementptr":
        element = reader.type()
        base_ty = reader.type()
        base = reader.value(base_ty)
        index_ty = reader.type()
        return Instruction(op, result, (SIZES[element], base, reader.value(index_ty),
                                        _width(index_ty)), line)
    if op == "load":
        ty = reader.type()
        pointer_ty = reader.type()
        return Instruction(op, result, (ty, reader.value(pointer_ty)), line)
    if op == "store":
        ty = reader.type()
        value = reader.value(ty)
        pointer_ty = reader.type()
        return Instruction(op, result, (ty, value, reader.value(pointer_ty)), line)
    if op in ("extractelement", "insertelement"):
        ty = reader.type()
        vector = reader.value(ty)
        if op == "insertelement":
            element_ty = reader.type()
            element = reader.value(element_ty)
        index_ty = reader.type()
        index = reader.value(index_ty)
        args = (vector, index) if op == "extractelement" else (vector, element, index)
        return Instruction(op, result, args, line)
    store = re.match(r'call void asm sideeffect "@\$0 st(?:\.volatile)?(?:\.global|\.shared)?'
                     r'(?:\.v\d)?\.b\d+ \[\$1\], [^"]*", "[^"]*"\((.*)\)$', line)
    if op == "call" and store:  # a masked store: `@p st... [address], {words}` (lower_memory)
        operands = _Reader(store.group(1))
        predicate = operands.value(operands.type())
        pointer = operands.value(operands.type())
        words = []
        while operands.pos < len(operands.text):
            word_ty = operands.type()
            words.append((word_ty, operands.value(word_ty)))
            operands.space()
        return Instruction("predicated_store", None, (predicate, pointer, tuple(words)), line)
    asm = re.match(r'call (\S+) asm (?:sideeffect )?"(.*?)", "(.*?)"\((\S+) ([^)]+)\)$', line)
    if op == "call" and asm:  # one-operand inline PTX from the table _ASM
        ty, text, _, arg_ty, arg = asm.groups()
        if text not in _ASM:
            raise SimulationError(f"unsupported inline asm {text!r}")
        return Instruction("asm", result, (text, _Reader(arg).value(arg_ty)), line)
    if op == "call":
        ty = reader.type()
        callee = reader.word()
        name = callee.partition("(")[0]
        reader.pos = line.index(name) + len(name) + 1
        args = []
        while True:
            reader.space()
            if reader.text[reader.pos] == ")":
                break
            arg_ty = reader.type()
            reader.skip("noundef")
            args.append(reader.value(arg_ty))
        return Instruction("call", result, (ty, name, tuple(args)), line)
    if op == "phi":
        ty = reader.type()
        incoming = {}
        for value_text, block in re.findall(r"\[ ([^,]+), %([\w.]+) \]", line):
            incoming[block] = _Reader(value_text).value(ty)
        return Instruction(op, result, (incoming,), line)
    if op == "br":
        targets = re.findall(r"label %([\w.]+)", line)
        if len(targets) == 1:
            return Instruction("jump", None, (targets[0],), line)
        cond = _Reader(line.split(",")[0][len("br i1 "):]).value("i1")
        return Instruction("branch", None, (cond, targets[0], targets[1]), line)
    if op == "ret":
        return Instruction("ret", None, (), line)
    raise SimulationError(f"unsupported instruction: {line}")


def parse_kernel(llvm_ir: str) -> Tuple[List[str], Dict[str, List[Instruction]], str]:
    """(parameter types, blocks by label in order, entry label) of the one kernel."""
    match = re.search(r"define ptx_kernel void @[\w.]+\((.*)\)[^()\n]*\{\n(.*?)\n\}", llvm_ir,
                      re.S)
    if not match:
        raise SimulationError("no ptx_kernel in the module")
    params = [p.strip() for p in match.group(1).split(",") if p.strip()]
    param_types = [_Reader(p).type() for p in params]
    blocks: Dict[str, List[Instruction]] = {}
    label = ""
    for raw in match.group(2).split("\n"):
        # Up to a comment's ';' outside a string (inline asm text holds ';').
        line = re.match(r'(?:"[^"]*"|[^";])*', raw).group(0).rstrip()
        if not line.strip():
            continue
        if not line.startswith(" "):
            label = line.rstrip(":").strip()
            blocks[label] = []
            continue
        blocks.setdefault(label, []).append(_parse_instruction(line.strip()))
    return param_types, blocks, next(iter(blocks))


# ---- execution -------------------------------------------------------------------------------

def _float_op(fn):
    return lambda ty, a, b: FLOATS[ty](fn(np.float64(a), np.float64(b))) if ty == "double" \
        else FLOATS[ty](fn(np.float32(a), np.float32(b)))


_BINARY: Dict[str, Callable] = {
    "add": lambda w, a, b: a + b, "sub": lambda w, a, b: a - b, "mul": lambda w, a, b: a * b,
    "and": lambda w, a, b: a & b, "or": lambda w, a, b: a | b, "xor": lambda w, a, b: a ^ b,
    "shl": lambda w, a, b: a << b, "lshr": lambda w, a, b: a >> b,
    "ashr": lambda w, a, b: _signed(a, w) >> b,
    "udiv": lambda w, a, b: a // b, "urem": lambda w, a, b: a % b,
    "sdiv": lambda w, a, b: int(_signed(a, w) / _signed(b, w)),
    "srem": lambda w, a, b: int(np.fmod(_signed(a, w), _signed(b, w))),
}
_FLOAT_BINARY = {"fadd": np.add, "fsub": np.subtract, "fmul": np.multiply, "fdiv": np.divide,
                 "frem": np.fmod}
_BINARY.update({name: None for name in _FLOAT_BINARY})
_CASTS = ("bitcast", "zext", "sext", "trunc", "fpext", "fptrunc", "sitofp", "uitofp", "fptosi",
          "fptoui", "ptrtoint", "inttoptr", "addrspacecast")
_ICMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "ult": lambda a, b: a < b,
         "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b, "uge": lambda a, b: a >= b}
_FCMP = {"oeq": np.equal, "one": np.not_equal, "olt": np.less, "ole": np.less_equal,
         "ogt": np.greater, "oge": np.greater_equal}


def _float(ty: str, value: Any) -> Any:
    """A float result rounded once to its type (f16/bf16 computed in f32 first, exactly)."""
    return FLOATS[ty](value)


def _fcmp(predicate: str, a: Any, b: Any) -> int:
    a, b = np.float64(a), np.float64(b)
    unordered = bool(np.isnan(a) or np.isnan(b))
    if predicate in ("ord", "uno"):
        return int(unordered == (predicate == "uno"))
    if predicate.startswith("u"):
        return int(unordered or bool(_FCMP["o" + predicate[1:]](a, b)))
    return int(not unordered and bool(_FCMP[predicate](a, b)))


def _bits(value: Any, ty: str) -> bytes:
    if ty in FLOATS:
        return np.array(value, FLOATS[ty]).tobytes()
    return int(value & ((1 << SIZES[ty] * 8) - 1)).to_bytes(SIZES[ty], "little")


def _from_bits(data: bytes, ty: str) -> Any:
    if ty in FLOATS:
        return np.frombuffer(data, FLOATS[ty])[0]
    value = int.from_bytes(data, "little")
    return value & 1 if ty == "i1" else value


def _cast(op: str, source: str, value: Any, target: str) -> Any:
    if op in ("bitcast",):
        if source.startswith("ptr") or target.startswith("ptr"):
            return value
        (source_element, source_lanes), (element, lanes) = _element(source), _element(target)
        items = value if source_lanes else (value,)
        data = b"".join(_bits(v, source_element) for v in items)
        size = SIZES[element]
        parts = [_from_bits(data[k:k + size], element) for k in range(0, len(data), size)]
        return tuple(parts) if lanes else parts[0]
    if op in ("ptrtoint", "inttoptr", "addrspacecast"):
        return value
    if op == "zext":
        return value
    if op == "sext":
        return _signed(value, _width(source)) & ((1 << _width(target)) - 1)
    if op == "trunc":
        return value & ((1 << _width(target)) - 1)
    if op in ("fpext", "fptrunc"):
        return _float(target, np.float64(value)) if source == "double" or target == "double" \
            else _float(target, np.float32(value))
    if op in ("sitofp", "uitofp"):
        integer = _signed(value, _width(source)) if op == "sitofp" else value
        return _float(target, integer)
    if op in ("fptosi", "fptoui"):
        return int(np.trunc(np.float64(value))) & ((1 << _width(target)) - 1)
    raise SimulationError(f"unsupported cast {op}")


class Memory:
    """Global arrays at distinct virtual addresses, and the CTA's shared memory."""

    def __init__(self, arrays: Sequence[np.ndarray], shared_bytes: int) -> None:
        self.regions: List[Tuple[int, np.ndarray]] = []
        base = 1 << 32
        for array in arrays:
            self.regions.append((base, array))
            base += (array.nbytes + (1 << 20)) & ~0xFFFF
        self.shared = bytearray(shared_bytes)

    def address_of(self, index: int) -> int:
        return self.regions[index][0]

    def _locate(self, address: int, size: int) -> Tuple[Any, int]:
        if address >= SHARED_BASE:
            offset = address - SHARED_BASE
            if offset < 0 or offset + size > len(self.shared):
                raise SimulationError(f"shared access at byte {offset} (+{size}) is outside "
                                      f"the {len(self.shared)} bytes the kernel declares")
            return self.shared, offset
        for base, array in self.regions:
            if base <= address and address + size <= base + array.nbytes:
                return array.reshape(-1).view(np.uint8), address - base
        raise SimulationError(f"global access at {address:#x} (+{size}) is outside every array")

    def load(self, address: int, size: int) -> bytes:
        data, offset = self._locate(address, size)
        return bytes(data[offset:offset + size])

    def store(self, address: int, payload: bytes) -> None:
        data, offset = self._locate(address, len(payload))
        data[offset:offset + len(payload)] = np.frombuffer(payload, np.uint8) \
            if isinstance(data, np.ndarray) else payload


def _thread(blocks, entry, env, memory: Memory, special: Dict[str, int]):
    """One thread; yields ('shfl', kind, value, lane_arg) and ('bar',) at sync points."""
    label, previous = entry, None
    while True:
        instructions = blocks[label]
        phis = [(i.result, i.args[0][previous](env)) for i in instructions if i.op == "phi"]
        for name, value in phis:
            env[name] = value
        for inst in instructions:
            op, args = inst.op, inst.args
            if op == "phi":
                continue
            if op == "jump":
                previous, label = label, args[0]
                break
            if op == "branch":
                previous, label = label, args[1] if args[0](env) else args[2]
                break
            if op == "ret":
                return
            value = None
            if op in _FLOAT_BINARY:
                _, ty, a, b = args
                a, b = a(env), b(env)
                wide = np.float64 if ty == "double" else np.float32
                value = _float(ty, _FLOAT_BINARY[op](wide(a), wide(b)))
            elif op in _BINARY:
                _, ty, a, b = args
                width = _width(ty) if ty.startswith("i") else 64
                value = _BINARY[op](width, a(env), b(env)) & ((1 << width) - 1)
            elif op == "icmp":
                predicate, ty, a, b = args
                width = _width(ty) if ty.startswith("i") else 64
                x, y = a(env), b(env)
                if predicate[0] == "s":
                    x, y = _signed(x, width), _signed(y, width)
                    predicate = "u" + predicate[1:]
                value = int(_ICMP[predicate](x, y))
            elif op == "fcmp":
                predicate, _, a, b = args
                value = _fcmp(predicate, a(env), b(env))
            elif op == "fneg":
                value = -args[1](env)
            elif op in _CASTS:
                value = _cast(op, args[0], args[1](env), args[2])
            elif op == "select":
                value = args[1](env) if args[0](env) else args[2](env)
            elif op == "getelementptr":
                size, base, index, width = args
                value = base(env) + _signed(index(env), width) * size
            elif op == "load":
                ty, pointer = args
                element, lanes = _element(ty)
                size = SIZES[element]
                address = pointer(env)
                items = [_from_bits(memory.load(address + k * size, size), element)
                         for k in range(max(lanes, 1))]
                value = tuple(items) if lanes else items[0]
            elif op == "store":
                ty, stored, pointer = args
                element, lanes = _element(ty)
                items = stored(env) if lanes else (stored(env),)
                memory.store(pointer(env), b"".join(_bits(v, element) for v in items))
            elif op == "predicated_store":
                predicate, pointer, words = args
                if predicate(env):
                    memory.store(pointer(env), b"".join(_bits(w(env), ty) for ty, w in words))
            elif op == "extractelement":
                value = args[0](env)[args[1](env)]
            elif op == "insertelement":
                vector = list(args[0](env))
                vector[args[2](env)] = args[1](env)
                value = tuple(vector)
            elif op == "asm":
                value = _ASM[args[0]](args[1](env))
            elif op == "call":
                ty, name, call_args = args
                values = [a(env) for a in call_args]
                if name.startswith("@llvm.nvvm.shfl.sync."):
                    kind = name.split(".")[4]
                    value = yield ("shfl", kind, values[1], values[2])
                elif name.startswith("@llvm.nvvm.barrier"):
                    yield ("bar",)
                elif name in special:
                    value = special[name]
                else:
                    value = _intrinsic(name, ty, values)
            else:
                raise SimulationError(f"unsupported instruction: {inst.text}")
            if inst.result:
                env[inst.result] = value


_LIBDEVICE_F32 = {"@__nv_logf": np.log, "@__nv_cosf": np.cos, "@__nv_sinf": np.sin,
                  "@llvm.nvvm.sqrt.approx.f": np.sqrt, "@llvm.nvvm.sqrt.approx.ftz.f": np.sqrt}
def _toward_zero(value: Any, dtype) -> Any:
    """`value` narrowed to `dtype` toward zero (PTX's cvt.rz; overflow gives the largest
    finite value): the nearest-even result, stepped back when it rounded away."""
    with np.errstate(over="ignore"):
        nearest = np.array(value).astype(dtype)
    exact = np.float64(value)
    if np.isfinite(exact) and abs(np.float64(nearest)) > abs(exact):
        bits = nearest.view(np.uint16 if nearest.itemsize == 2 else np.uint32)
        nearest = (bits - bits.dtype.type(1)).view(dtype)
    return nearest[()]


# Inline PTX that codegen emits (lower_fp8.cpp): results as the bits of their register.
_ASM: Dict[str, Callable] = {
    "cvt.rz.f16.f32 $0, $1;": lambda x: int(np.array(_toward_zero(x, np.float16)).view(np.uint16)),
    "cvt.rz.bf16.f32 $0, $1;":
        lambda x: int(np.array(_toward_zero(x, ml_dtypes.bfloat16)).view(np.uint16)),
    "cvt.rz.f32.f64 $0, $1;": lambda x: _toward_zero(x, np.float32),
}


def _intrinsic(name: str, ty: str, values: List[Any]) -> Any:
    base = name.split(".")[1] if name.startswith("@llvm.") else name
    if base in ("smax", "smin", "umax", "umin"):
        width = _width(ty)
        a, b = values
        if base[0] == "s":
            a, b = _signed(a, width), _signed(b, width)
        return (max(a, b) if base.endswith("max") else min(a, b)) & ((1 << width) - 1)
    if base in ("maxnum", "minnum", "maximum", "minimum"):
        a, b = (np.float64(v) for v in values)
        if np.isnan(a) or np.isnan(b):
            if base in ("maximum", "minimum"):
                return FLOATS[ty](np.nan)
            return FLOATS[ty](b if np.isnan(a) else a)
        return FLOATS[ty](max(a, b) if base.startswith("max") else min(a, b))
    if name in _LIBDEVICE_F32:  # libdevice math (within 2 ulp): computed exactly, rounded
        return np.float32(_LIBDEVICE_F32[name](np.float64(values[0])))
    if name in ("@llvm.nvvm.mulhi.ui", "@llvm.nvvm.mulhi.ull"):  # high half of the product
        width = _width(ty)
        return (values[0] * values[1]) >> width
    if base == "abs":  # integer |x| (the minimum value stays itself); values[1]: is_int_min_poison
        width = _width(ty)
        return abs(_signed(values[0], width)) & ((1 << width) - 1)
    if base in ("fabs", "rint", "nearbyint", "trunc", "floor", "ceil"):  # exact in the type
        fn = {"fabs": np.abs, "rint": np.rint, "nearbyint": np.rint, "trunc": np.trunc,
              "floor": np.floor, "ceil": np.ceil}[base]
        return FLOATS[ty](fn(FLOATS[ty](values[0])))
    if name in ("@llvm.nvvm.rsqrt.approx.f", "@llvm.nvvm.rsqrt.approx.ftz.f"):
        return np.float32(1.0 / np.sqrt(np.float64(values[0])))  # within the approximation
    if name in ("@llvm.nvvm.div.full", "@llvm.nvvm.div.full.ftz"):  # div.full.f32: 2 ulp
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.float32(np.float64(values[0]) / np.float64(values[1]))
    raise SimulationError(f"unsupported intrinsic {name}")


def run_kernel(llvm_ir: str, grid: Sequence[int], args: Sequence[Any], num_warps: int,
               shared_bytes: int = 0) -> None:
    """Runs the kernel over `grid` (programs in row-major order, as the interpreter): arrays
    for pointer parameters (updated in place), Python numbers for scalars."""
    param_types, blocks, entry = parse_kernel(llvm_ir)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    memory = Memory(arrays, shared_bytes)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    for pid in np.ndindex(*grid):
        memory.shared[:] = bytes(len(memory.shared))
        _run_program(blocks, entry, param_types, args, memory, pid, grid, num_warps)


def _run_program(blocks, entry, param_types, args, memory, pid, grid, num_warps) -> None:
    threads = []
    for tid in range(num_warps * 32):
        env: Dict[str, Any] = {"@global_smem": SHARED_BASE}
        for index, (ty, arg) in enumerate(zip(param_types, args, strict=True)):
            if isinstance(arg, np.ndarray):
                env[f"%{index}"] = memory.address_of(
                    sum(isinstance(a, np.ndarray) for a in args[:index]))
            elif ty in FLOATS:
                env[f"%{index}"] = FLOATS[ty](arg)
            else:
                env[f"%{index}"] = int(arg) & ((1 << SIZES[ty] * 8) - 1)
        special = {"@llvm.nvvm.read.ptx.sreg.tid.x": tid}
        for axis, letter in enumerate("xyz"):
            special[f"@llvm.nvvm.read.ptx.sreg.ctaid.{letter}"] = pid[axis]
            special[f"@llvm.nvvm.read.ptx.sreg.nctaid.{letter}"] = grid[axis]
        threads.append(_thread(blocks, entry, env, memory, special))
    requests: List[Any] = [None] * len(threads)
    live = [True] * len(threads)
    replies: List[Any] = [None] * len(threads)
    while any(live):
        for tid, thread in enumerate(threads):
            if live[tid] and requests[tid] is None:
                try:
                    requests[tid] = thread.send(replies[tid])  # None starts a new thread
                except StopIteration:
                    live[tid] = False
                replies[tid] = None
        waiting = [tid for tid in range(len(threads)) if live[tid]]
        if not waiting:
            return
        if all(requests[t][0] == "bar" for t in waiting):
            for t in waiting:
                requests[t] = None
                replies[t] = None
            continue
        progressed = False
        for warp in range(num_warps):
            lanes = range(warp * 32, warp * 32 + 32)
            if not all(live[t] and requests[t] is not None and requests[t][0] == "shfl"
                       for t in lanes):
                continue
            kinds = {requests[t][1] for t in lanes}
            if len(kinds) != 1:
                raise SimulationError(f"warp {warp} runs different shuffles {kinds}")
            kind = kinds.pop()
            values = [requests[t][2] for t in lanes]
            for lane, t in enumerate(lanes):
                b = requests[t][3]
                source = {"idx": b & 31, "bfly": lane ^ b, "up": lane - b,
                          "down": lane + b}[kind]
                replies[t] = values[source] if 0 <= source < 32 else values[lane]
                requests[t] = None
            progressed = True
        if not progressed:
            states = {t: requests[t] for t in waiting[:4]}
            raise SimulationError(f"threads wait forever (divergent barrier or shuffle): {states}")
