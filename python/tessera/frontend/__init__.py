"""The front end: a @tessera.jit Python function -> a tile-IR module (first stage of the compiler).

    build_module(fn, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 128}) -> ir.Module

The module holds one ``func`` with one block argument per runtime parameter; constexpr
parameters are folded into the body; @jit callees are inlined. ``kernel_source_key`` and
``kernel_parameters`` serve the JIT's cache and argument binding.
"""
from __future__ import annotations

from typing import AbstractSet, Any, Callable, Dict, Optional

from .. import errors
from .._tessera import ir
from ..config import knobs
from ..language import core as tl
from ..language.semantic import normalize_number
# The code generator (and the language's semantics it pulls in) is imported by build_module
# only: a launch whose kernel is in the disk cache reads sources (source.py) but never builds
# IR, and a warm start should not pay for importing the whole front end.
from .source import KernelParameter, ParsedFunction, is_jit, kernel_parameters
from .source import parse_function
from .source_key import kernel_source_key
from .tuple_parameters import assemble as assemble_tuple
from .tuple_parameters import group as group_tuples


__all__ = ["build_module", "kernel_source_key", "kernel_parameters", "KernelParameter", "is_jit"]


def build_module(fn: Callable, signature: Dict[str, str], constexprs: Dict[str, Any],
                 divisibility_16: AbstractSet[str] = frozenset(),
                 equal_to_1: AbstractSet[str] = frozenset(),
                 kernel_name: Optional[str] = None, debug: Optional[bool] = None,
                 tma: bool = False, interpreter: bool = False,
                 large_tensors: AbstractSet[str] = frozenset(), tma_store: bool = False,
                 tma_reduce: bool = False) -> Any:
    """Compiles ``fn`` (a Python function or a JITFunction) to a verified tile-IR module.

    ``signature`` maps each runtime parameter to a type string ("*fp16", "i32", ...);
    ``constexprs`` gives the values of compile-time parameters; ``divisibility_16`` names the
    parameters known to be multiples of 16 (pointers: 16-byte aligned), recorded in the func's
    ``divisibility`` attribute; ``equal_to_1`` names int parameters equal to 1, whose uses
    become the constant 1 while they stay in the signature. ``debug``: tl.device_assert and
    ``assert`` build code (None: as knobs.debug; a launch passes its options' debug).
    ``tma``: TensorDescriptor parameters the TMA copies (2-D blocks, or up to 5-D with
    leading dims of 1: device/tma.py) also take a tensor map, and such
    tl.make_tensor_descriptor values encode one in global scratch (func attribute
    ``global_scratch``), which their loads carry for the pipeliner's TMA copies (TESSERA_TMA
    on sm_90a; off, nothing changes).
    ``interpreter``: the module is for the interpreter, whose limits are Triton's interpreter's
    (``tl.dot`` of any extents) rather than the GPU's. ``large_tensors`` names the pointer
    parameters whose tensors address 2**31 elements or more (specialization.spans_2_31),
    recorded in the func's ``large_tensors`` attribute (their indices) for the widen_offsets
    pass; absent when there is none.
    Raises tessera.CompilationError naming the kernel and the offending file:line:col.
    """
    from .ast_to_ir import CodeGenerator, make_context
    from .descriptor_parameters import DescriptorParameter

    fn = fn.fn if is_jit(fn) else fn
    name = kernel_name or fn.__name__
    parsed = parse_function(fn)
    builder = ir.Builder()
    ctx = make_context(name, builder)
    ctx.semantic.debug = bool(knobs.debug if debug is None else debug)
    ctx.semantic.min_dot_size = (1, 1, 1) if interpreter else None
    ctx.semantic.interpreter = interpreter  # builtins with no CPU meaning (gdc_wait) skip
    ctx.semantic.tma = tma  # device descriptors encode tensor maps (device_tensor_map.py)
    ctx.semantic.tma_store = tma and tma_store  # host-descriptor stores by TMA (tma_store)
    ctx.semantic.tma_reduce = tma and tma_reduce  # descriptor reductions by TMA (tma_reduce)
    ctx.semantic.global_scratch_bytes = 0  # per program, for those maps
    ctx.parsed[id(fn)] = parsed
    module = ir.Module()
    line, col = parsed.position(parsed.tree)
    builder.set_location(f"{parsed.filename}:{line}:{col}")
    tuples = group_tuples(signature, constexprs)
    arguments, constants = _bind_parameters(parsed, name, signature, constexprs, tuples)
    for param in _const_parameters(fn):  # `x: tl.const`: a pointer stores cannot use
        ty = arguments.get(param)
        if isinstance(ty, tl.pointer_type):
            arguments[param] = tl.pointer_type(ty.element_ty, ty.address_space, const=True)
    block_arguments = []  # (name, dtype, divisibility); a descriptor parameter gives several
    for param, ty in arguments.items():
        if isinstance(ty, DescriptorParameter):
            block_arguments += ty.block_arguments(param, tma)
        else:
            block_arguments.append((param, ty, 16 if param in divisibility_16 else 1))
    divisibility = [d for _, _, d in block_arguments]
    builder.set_insertion_point_to_end(module.body)
    func_attrs = {"sym_name": name, "divisibility": divisibility}
    tensormaps = [i for i, (n, _, _) in enumerate(block_arguments) if n.endswith(".tensormap")]
    if tensormaps:  # 128-byte __grid_constant__ parameters (codegen/lower_tma.h)
        func_attrs["tensormaps"] = tensormaps
    large = [i for i, (n, _, _) in enumerate(block_arguments) if n in large_tensors]
    if large:  # offsets from these pointers are computed in int64 (transforms/widen_offsets)
        func_attrs["large_tensors"] = large
    func = builder.create("func", [], [], func_attrs, 1)
    entry = func.body(0)
    scope: Dict[str, Any] = {}
    handles = {p: entry.add_argument(ty.to_ir()) for p, ty, _ in block_arguments}
    builder.set_insertion_point_to_end(entry)
    for param, ty in arguments.items():
        if isinstance(ty, DescriptorParameter):
            parts = [handles[n] for n, _, _ in ty.block_arguments(param, tma)]
            scope[param] = ty.value(parts, ctx.semantic)
        elif param in equal_to_1:
            if not ty.is_int():
                raise _parameter_error(parsed, name, param, f"equal_to_1 parameter '{param}' "
                                       f"must be an integer, not {ty}")
            # A constant of the declared type: result types do not depend on specialization.
            scope[param] = ctx.semantic.scalar_constant(1, ty)
        else:
            scope[param] = tl.tensor(handles[param], ty)
    scope.update(constants)
    for param, (runtime, constant, classes) in tuples.items():  # tuple parameters
        leaves = {element: scope.pop(element) for element in runtime + constant}
        scope[param] = assemble_tuple(param, leaves, classes)
    CodeGenerator(ctx, parsed, scope, is_kernel=True).generate_body()
    if ctx.semantic.global_scratch_bytes:  # the launcher allocates it (codegen: a parameter)
        func.set_attr("global_scratch", ctx.semantic.global_scratch_bytes)
    builder.set_location(f"{parsed.filename}:{line}:{col}")
    builder.create("return", [], [])
    _verify(module, name, parsed)
    return module


def _bind_parameters(parsed: ParsedFunction, name: str, signature: Dict[str, str],
                     constexprs: Dict[str, Any], tuples: Dict[str, Any]):
    """Splits the parameters into runtime arguments (name -> dtype, in order) and
    compile-time values (name -> Python value). A tuple parameter's elements (``tuples``:
    tuple_parameters.group) are entries of their own, named by path."""
    from .descriptor_parameters import DescriptorParameter
    params = kernel_parameters(parsed.fn)
    known = {p.name for p in params}
    for given in list(signature) + list(constexprs):
        if given.split(".", 1)[0] not in known:
            raise _parameter_error(parsed, name, None, f"'{given}' is not a parameter of {name}")
    arguments: Dict[str, Any] = {}  # a dtype, or a DescriptorParameter
    constants: Dict[str, Any] = {}
    for p in params:
        if p.name in tuples:
            runtime, constant, _ = tuples[p.name]
            for element in runtime:
                try:
                    arguments[element] = (DescriptorParameter.parse(signature[element])
                                          or tl.str_to_ty(signature[element]))
                except ValueError as error:
                    raise _parameter_error(parsed, name, p.name, str(error)) from None
            for element in constant:
                constants[element] = normalize_number(constexprs[element])
        elif p.name in constexprs:
            if p.name in signature:
                raise _parameter_error(parsed, name, p.name, f"'{p.name}' is given both a type "
                                       "and a constexpr value")
            value = constexprs[p.name]
            constants[p.name] = normalize_number(value.value if isinstance(value, tl.constexpr)
                                                 else value)
        elif p.name in signature:
            if p.is_constexpr:
                raise _parameter_error(parsed, name, p.name, f"'{p.name}' is annotated "
                                       "tl.constexpr: give its value in constexprs")
            try:
                arguments[p.name] = (DescriptorParameter.parse(signature[p.name])
                                     or tl.str_to_ty(signature[p.name]))
            except ValueError as error:
                raise _parameter_error(parsed, name, p.name, str(error)) from None
        elif p.has_default:
            constants[p.name] = normalize_number(p.default)
        else:
            what = "constexpr value" if p.is_constexpr else "type in the signature"
            raise _parameter_error(parsed, name, p.name, f"parameter '{p.name}' has no {what}")
    return arguments, constants


def _const_parameters(fn: Callable) -> list:
    """Parameters annotated ``tl.const`` (Triton's read-only pointers)."""
    import inspect
    from ..language.compat_types import const
    out = []
    for param in inspect.signature(fn).parameters.values():
        annotation = param.annotation
        if annotation is const or (isinstance(annotation, str)
                                   and annotation.split(".")[-1] == "const"):
            out.append(param.name)
    return out


def _parameter_error(parsed: ParsedFunction, name: str, param: Optional[str],
                     message: str) -> errors.CompilationError:
    node: Any = parsed.tree
    for arg in parsed.tree.args.args:
        if arg.arg == param:
            node = arg
    line, col = parsed.position(node)
    return errors.CompilationError(name, parsed.filename, line, col, message,
                                   parsed.source_line(line))


def _verify(module: Any, name: str, parsed: ParsedFunction) -> None:
    """Runs the C++ verifier; its errors start with the op's file:line:col."""
    try:
        module.verify()
    except ir.CompileError as error:
        converted = errors.CompilationError.from_core_error(name, error)
        if not converted.lineno:  # no location on the op: point at the kernel's def
            converted = _parameter_error(parsed, name, None, converted.message)
        raise converted from error
