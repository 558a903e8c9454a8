"""The AST visitor that turns a @jit function's body into tile IR (statements and expressions).

Values in scope are ``tl.tensor`` (runtime values: an ir.Value with a dtype and a shape) or
plain Python objects (compile-time values: constexpr parameters, dtypes, tuples, functions).
Operators on Python values run in Python (constexpr folding); operators touching a tensor go
to language/semantic.py. Calls of other @jit functions are inlined by running a nested
generator over the callee. Structured control flow (if/for/while) is in control_flow.py,
early returns (a flag yielded by the if, later statements guarded) in early_return.py.
Every visit sets the builder's location to the node's file:line:col, and every error is a
CompilationError naming the kernel and pointing at the node.
"""
from __future__ import annotations

import ast
import builtins
import enum
import inspect
import operator
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List

from .. import errors
from .._triton_names import is_triton_name
from ..language import compat_types
from ..language import core as tl
from ..language import matrix as tl_matrix
from ..language import tensor_methods
from ..language.semantic import Semantic, is_number, normalize_number
from ..language.reduction import NEEDS_GENERATOR
from ..language.aggregate import is_aggregate
from .control_flow import ControlFlowMixin
from .early_return import ReturnMixin
from .elementwise import ElementwiseMixin
from .source import ParsedFunction, is_jit, is_missing, kernel_parameters, lookup_global
from .source import parse_function

_PY_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
              ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
              ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
# Operators on runtime values: the tensor dunder each compiles to (language/tensor_methods.py).
_OPERATOR_DUNDERS = {ast.Add: "__add__", ast.Sub: "__sub__", ast.Mult: "__mul__",
                     ast.Div: "__truediv__", ast.FloorDiv: "__floordiv__", ast.Mod: "__mod__",
                     ast.BitAnd: "__and__", ast.BitOr: "__or__", ast.BitXor: "__xor__",
                     ast.LShift: "__lshift__", ast.RShift: "__rshift__"}
_PY_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
             ast.Invert: operator.invert}
_PY_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
               ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
               ast.Is: operator.is_, ast.IsNot: operator.is_not,
               ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_COMPARE_DUNDERS = {ast.Eq: "__eq__", ast.NotEq: "__ne__", ast.Lt: "__lt__", ast.LtE: "__le__",
                    ast.Gt: "__gt__", ast.GtE: "__ge__"}

# Triton's small language classes a kernel may construct (language/compat_types.py).
_LANGUAGE_CLASSES = (compat_types.tuple, compat_types.slice, compat_types.condition,
                     compat_types.constexpr_type)


def remake(template: Any, items: List[Any]) -> Any:
    """A tuple or list of the same class as ``template`` (namedtuples included) holding
    ``items``."""
    if hasattr(template, "_make"):
        return template._make(items)
    return type(template)(items)


# Inlining depth limit: recursion is fine while a constexpr argument drives it to a base case.
MAX_INLINE_DEPTH = 64

# Python builtins a kernel may name; min/max work on runtime values too (as tl.minimum/maximum).
BUILTIN_NAMESPACE: Dict[str, Any] = {f.__name__: f for f in (
    range, len, min, max, int, float, bool, isinstance, getattr, print, tuple, list)}
# Python functions that run at compile time on compile-time values only.
_COMPILE_TIME_FUNCTIONS = (len, int, float, bool, isinstance, getattr, tuple, list)


@dataclass
class CompileContext:
    """What a kernel and every @jit function inlined into it share."""
    kernel_name: str
    builder: Any
    semantic: Semantic
    parsed: Dict[int, ParsedFunction] = field(default_factory=dict)
    call_stack: List[Callable] = field(default_factory=list)

    def parse(self, fn: Callable) -> ParsedFunction:
        if id(fn) not in self.parsed:
            self.parsed[id(fn)] = parse_function(fn)
        return self.parsed[id(fn)]


class CodeGenerator(ControlFlowMixin, ReturnMixin, ElementwiseMixin, ast.NodeVisitor):
    """Compiles one function body (the kernel's, or an inlined callee's) at the builder's
    insertion point. ``scope`` maps local names to tensors or Python values."""

    def __init__(self, ctx: CompileContext, parsed: ParsedFunction, scope: Dict[str, Any],
                 is_kernel: bool) -> None:
        self.ctx = ctx
        self.semantic = ctx.semantic
        self.builder = ctx.builder
        self.parsed = parsed
        self.fn = parsed.fn
        self.scope = scope
        self.is_kernel = is_kernel
        self.loc = ""
        self.dynamic_depth = 0  # > 0 while inside an IR if/for/while region
        self.loop_depth = 0  # > 0 while inside a runtime for/while body
        # Early returns (early_return.py): returned on every path so far, or on the paths
        # where the runtime i1 return_flag is true; return_value is the value they return.
        self.returned = False
        self.return_flag: Any = None
        self.return_value: Any = None
        # Names defined on some paths only (inside a runtime loop or one branch of a runtime
        # if): name -> where, for a helpful error when they are read afterwards.
        self.partial_defs: Dict[str, str] = {}
        # tl.map_elementwise's scalar function (elementwise.py): its lanes and returns.
        self.elementwise = False
        self.ew_active: Any = None
        self.ew_base: Any = None
        self.ew_done: Any = None
        self.ew_result: Any = None
        self.ew_shape: List[int] = []  # the shape the function is mapped over

    # ---- locations and errors ------------------------------------------------------------

    def location_of(self, node: ast.AST) -> str:
        line, col = self.parsed.position(node)
        return f"{self.parsed.filename}:{line}:{col}"

    def error(self, node: ast.AST, message: str,
              cls: type = errors.CompilationError) -> errors.CompilationError:
        line, col = self.parsed.position(node)
        return cls(self.ctx.kernel_name, self.parsed.filename, line, col, message,
                   self.parsed.source_line(line))

    def unsupported(self, node: ast.AST, message: str) -> errors.CompilationError:
        return self.error(node, message, errors.UnsupportedLanguageConstruct)

    def visit(self, node: ast.AST) -> Any:
        if not hasattr(node, "lineno"):
            return super().visit(node)
        previous = self.loc
        self.loc = self.location_of(node)
        self.builder.set_location(self.loc)
        try:
            return super().visit(node)
        except errors.CompilationError:
            raise
        except errors.StaticAssertionError as error:
            # As Triton: the assertion failure is the error itself, with no chained cause.
            raise self.error(node, str(error), errors.CompileTimeAssertionFailure) from None
        except errors.UnsupportedError as error:
            raise self.unsupported(node, str(error)) from error
        except Exception as error:  # a type or shape error from the language's rules
            expected = (TypeError, ValueError, NameError, IndexError, RuntimeError)
            message = str(error) or type(error).__name__
            if not isinstance(error, expected):
                message = f"{type(error).__name__}: {message}"
            raise self.error(node, message) from error
        finally:
            self.loc = previous
            self.builder.set_location(previous)

    def generic_visit(self, node: ast.AST) -> Any:
        raise self.unsupported(node, f"unsupported syntax: {type(node).__name__}")

    # ---- statements ----------------------------------------------------------------------

    def generate_body(self) -> Any:
        """Compiles the body; returns the function's value (None for a kernel)."""
        self.visit_compound(self.parsed.tree.body)
        if self.elementwise:  # returns merged per element (elementwise.py)
            if self.ew_result is not None and not self.returned:
                raise self.error(self.parsed.tree, "Inconsistent return types: some elements "
                                 "return a value and others fall off the end of the function")
            self.return_value = self.ew_result
            return self.return_value
        self.return_value = self.function_result(self.parsed.tree)
        return self.return_value

    def visit_compound(self, statements: List[ast.stmt]) -> None:
        for index, statement in enumerate(statements):
            if self.returned:
                break
            if self.return_flag is not None:  # returned on some paths: guard the rest
                self.guard_rest(statements[index:])
                break
            self.visit(statement)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        if isinstance(node.value, ast.Call):  # its result is dropped: see must_use_result
            node.value._is_unused = True  # type: ignore[attr-defined]
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1:
            raise self.unsupported(node, "chained assignment (a = b = ...) is not supported")
        self.assign(node.targets[0], self.visit(node.value))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.unsupported(node, "augmented assignment is supported on names only")
        value = self.binary(node.op, self.lookup(node.target.id), self.visit(node.value))
        self.assign(node.target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            raise self.unsupported(node, "a declaration without a value is not supported")
        annotation = self.visit(node.annotation)
        if annotation is tl.constexpr or (isinstance(node.annotation, ast.Constant)
                                          and str(annotation).endswith("constexpr")):
            value = self.visit(node.value)
            if isinstance(value, tl.tensor):
                raise TypeError(f"'{ast.unparse(node.target)}' is annotated tl.constexpr but "
                                f"its value {value} is only known at run time")
            if not isinstance(node.target, ast.Name):
                raise self.unsupported(node, "a tl.constexpr annotation needs a plain name")
            self.scope[node.target.id] = value
            self.partial_defs.pop(node.target.id, None)
            return
        self.assign(node.target, self.visit(node.value))

    def assign(self, target: ast.AST, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.scope[target.id] = self.sanitize(value)
            self.partial_defs.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                raise TypeError(f"cannot unpack {value!r} into {len(target.elts)} names")
            for element, item in zip(target.elts, value, strict=True):
                self.assign(element, item)
        else:
            raise self.unsupported(target, f"assignment to {ast.unparse(target)} is not "
                                            "supported: tensors are immutable values")

    def sanitize(self, value: Any) -> Any:
        """As Triton: a plain assignment of a Python number makes a runtime scalar (its type
        then promotes like any tensor's); annotate `x: tl.constexpr = ...` to keep it."""
        value = normalize_number(value)
        if not is_number(value):
            return value
        if self.elementwise and self.ew_shape:  # per element: one value per element
            return self.semantic.splat(self.semantic.to_tensor(value), self.ew_shape)
        return self.semantic.to_tensor(value)

    def decay(self, value: Any) -> Any:
        """Return values of @jit functions: numbers become runtime scalars, as Triton."""
        if isinstance(value, (tuple, list)):
            return remake(value, [self.decay(v) for v in value])
        return self.sanitize(value)

    def visit_Return(self, node: ast.Return) -> None:
        self.check_return_allowed(node)
        value = None if node.value is None else self.visit(node.value)
        if self.is_kernel and value is not None:
            raise self.unsupported(node, "a kernel cannot return a value; store it instead")
        if self.elementwise:
            return self.elementwise_return(self.decay(value))
        self.return_value = self.decay(value)
        self.returned = True

    def visit_Break(self, node: ast.Break) -> None:
        raise self.unsupported(node, "break is not supported; use a while condition or masking")

    def visit_Continue(self, node: ast.Continue) -> None:
        raise self.unsupported(node, "continue is not supported; use an if around the rest of "
                                     "the loop body")

    def visit_Assert(self, node: ast.Assert) -> None:
        """As Triton: `assert cond, msg` is tl.device_assert, active in debug mode only. On a
        compile-time condition (in debug mode) it is checked now and fails the compilation."""
        test = self.visit(node.test)
        message = "" if node.msg is None else self.visit(node.msg)
        if isinstance(test, tl.tensor):
            tl.device_assert(test, message, _semantic=self.semantic)
        elif not self.semantic.debug:
            return
        elif not test:
            raise errors.StaticAssertionError(f"assert failed: {message}" if message
                                              else "assert failed")

    # ---- names and attributes ------------------------------------------------------------

    def visit_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id)

    def lookup(self, name: str) -> Any:
        if name in self.scope:
            return self.scope[name]
        if name in self.partial_defs:
            raise NameError(f"'{name}' is not defined on every path here: it is assigned only "
                            f"{self.partial_defs[name]}; assign it before that block")
        value = lookup_global(self.fn, name)
        if not is_missing(value):
            return self.check_global(name, value, name in self.fn.__code__.co_freevars)
        if name in BUILTIN_NAMESPACE:
            return BUILTIN_NAMESPACE[name]
        if hasattr(builtins, name):  # other Python builtins: calling one is an error
            return getattr(builtins, name)
        raise NameError(f"name '{name}' is not defined")

    @staticmethod
    def check_global(name: str, value: Any, captured: bool = False) -> Any:
        """Only compile-time-stable globals (and variables of an enclosing function,
        ``captured``) may be read: constexpr-wrapped values, modules, functions, classes and
        dtypes (a plain global int could change after compilation)."""
        if isinstance(value, tl.constexpr):
            return normalize_number(value.value)
        if (value is None or callable(value) or is_jit(value)
                or isinstance(value, (types.ModuleType, tl.dtype, enum.Enum))):
            return value
        if captured:  # Triton's words ("X is not defined"), then why and what to do
            raise NameError(f"{name} is not defined in the kernel: it is a variable of the "
                            "enclosing function, which a @jit function reads only as a "
                            f"compile-time constant ({name} = tl.constexpr(...)); or pass it "
                            "as an argument")
        raise NameError(f"cannot read the global variable '{name}' from a @jit function: wrap "
                        f"it as a compile-time constant ({name} = tl.constexpr(...)) or pass it "
                        "as an argument")

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        value = self.visit(node.value)
        if isinstance(value, tl.tensor):
            if node.attr in tensor_methods.TENSOR_ATTRIBUTES:
                return getattr(value, node.attr)
            if tl.is_builtin(getattr(tl.tensor, node.attr, None)):
                return getattr(value, node.attr)  # methods: x.sum(1), x.max(0), ...
            if node.attr == "T":  # as Triton: the transpose of a 2-D tile, permute(x, (1, 0))
                return tl_matrix.build_trans(self.semantic, value, (1, 0))
            if node.attr in tensor_methods.NOT_ON_CLASS:  # x.__lt__(y), ...: as the operator
                return tensor_methods.BoundOperator(value, node.attr)
            if is_triton_name("triton.language.tensor", node.attr):
                raise errors.TritonAPINotSupported(f"tensor.{node.attr} (a method of "
                                                   "triton.language.tensor)")
            raise AttributeError(f"tensor has no attribute '{node.attr}'")
        try:
            result = getattr(value, node.attr)
        except errors.TritonAPINotSupported:
            raise
        except AttributeError:
            if isinstance(value, tl.dtype) and is_triton_name("triton.language.dtype",
                                                               node.attr):
                raise errors.TritonAPINotSupported(
                    f"dtype.{node.attr} (of triton.language.dtype)") from None
            raise
        return normalize_number(result.value if isinstance(result, tl.constexpr) else result)

    # ---- expressions ---------------------------------------------------------------------

    def visit_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def visit_Tuple(self, node: ast.Tuple) -> tuple:
        return compat_types.tuple(self.elements(node.elts))  # Triton's tl.tuple

    def visit_List(self, node: ast.List) -> list:
        return self.elements(node.elts)

    def elements(self, nodes: List[ast.expr]) -> list:
        out: list = []
        for item in nodes:
            if isinstance(item, ast.Starred):
                value = self.visit(item.value)
                if not isinstance(value, (tuple, list)):
                    raise TypeError(f"cannot unpack {value!r} with *")
                out.extend(value)
            else:
                out.append(self.visit(item))
        return out

    def visit_Slice(self, node: ast.Slice) -> slice:
        parts = [None if p is None else self.visit(p) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        value = self.visit(node.value)
        index = self.visit(node.slice)
        if isinstance(value, tl.tensor):
            return self.semantic.subscript(value, index)
        if isinstance(index, tl.tensor):
            raise TypeError("cannot index a compile-time value with a runtime value")
        if isinstance(index, compat_types.slice):
            index = index.as_python()
        if isinstance(value, tuple) and isinstance(index, slice):
            return compat_types.tuple(value[index])  # as Triton: a slice of a tuple is a tuple
        return normalize_number(value[index])

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        return self.binary(node.op, self.visit(node.left), self.visit(node.right))

    def binary(self, op: ast.operator, lhs: Any, rhs: Any) -> Any:
        if not isinstance(lhs, tl.tensor) and not isinstance(rhs, tl.tensor):
            if type(op) not in _PY_BINARY:
                raise errors.UnsupportedError(f"operator {type(op).__name__} is not supported")
            return _PY_BINARY[type(op)](lhs, rhs)
        if type(op) not in _OPERATOR_DUNDERS:  # `**`: Triton's tensor has no __pow__ either
            raise errors.UnsupportedError(f"operator {type(op).__name__} is not supported on "
                                          "runtime values")
        return tensor_methods.binary_operator(self.semantic, _OPERATOR_DUNDERS[type(op)], lhs,
                                              rhs)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = self.visit(node.operand)
        if not isinstance(value, tl.tensor):
            return _PY_UNARY[type(node.op)](value)
        if isinstance(node.op, ast.UAdd):
            return value
        dunder = {ast.USub: "__neg__", ast.Not: "__not__", ast.Invert: "__invert__"}
        return tensor_methods.apply_operator(self.semantic, dunder[type(node.op)], value)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        """``and``/``or``: Python short-circuit on compile-time values; once a runtime value
        is involved, every remaining operand is evaluated and combined with andi/ori."""
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for operand in node.values[1:]:
            if not isinstance(result, tl.tensor):
                if bool(result) != is_and:  # `False and ...` / `True or ...`
                    return result
                result = self.visit(operand)
                continue
            result = self.semantic.logical("andi" if is_and else "ori", result,
                                           normalize_number(self.visit(operand)))
        return result

    def visit_Compare(self, node: ast.Compare) -> Any:
        left = self.visit(node.left)
        if len(node.ops) == 1:
            return self.compare(node.ops[0], left, self.visit(node.comparators[0]))
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.visit(right_node)
            if isinstance(left, tl.tensor) or isinstance(right, tl.tensor):
                raise errors.UnsupportedError("chained comparisons of runtime values are not "
                                              "supported; combine two comparisons with &")
            result = _PY_COMPARE[type(op)](left, right)
            if not result:
                return result
            left = right
        return result

    def compare(self, op: ast.cmpop, left: Any, right: Any) -> Any:
        runtime = isinstance(left, tl.tensor) or isinstance(right, tl.tensor)
        if not runtime or type(op) not in _COMPARE_DUNDERS:
            return _PY_COMPARE[type(op)](left, right)
        return tensor_methods.binary_operator(self.semantic, _COMPARE_DUNDERS[type(op)], left,
                                              right)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> str:
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                item = self.visit(value.value)
                if isinstance(item, tl.tensor):
                    # The value exists only on the GPU; formatting would print its type.
                    raise TypeError("an f-string can only format compile-time values, but this "
                                    f"one formats a tensor ({item}); "
                                    "print tensors with tl.device_print or tl.static_print")
                if value.conversion != -1:
                    item = {ord("r"): repr, ord("s"): str, ord("a"): ascii}[value.conversion](item)
                spec = self.visit(value.format_spec) if value.format_spec else ""
                parts.append(format(item, spec))
            else:
                parts.append(str(self.visit(value)))
        return "".join(parts)

    # ---- calls ---------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> Any:
        function = self.visit(node.func)
        args = self.elements(node.args)
        kwargs: Dict[str, Any] = {}
        for keyword in node.keywords:
            value = self.visit(keyword.value)
            if keyword.arg is None:
                if not isinstance(value, dict):
                    raise TypeError(f"cannot unpack {value!r} with **")
                kwargs.update(value)
            else:
                kwargs[keyword.arg] = value
        return self.call(node, function, args, kwargs)

    def call(self, node: ast.Call, function: Any, args: list, kwargs: Dict[str, Any]) -> Any:
        must_use = getattr(function, "_must_use_result", False)  # tessera.must_use_result
        if must_use and getattr(node, "_is_unused", False):
            message = f"The result of {ast.unparse(node.func)} is not being used."
            raise TypeError(message + (f" {must_use}" if isinstance(must_use, str) else ""))
        args = [normalize_number(a) for a in args]
        kwargs = {k: normalize_number(v) for k, v in kwargs.items()}
        runtime = any(isinstance(a, tl.tensor) for a in [*args, *kwargs.values()])
        if is_jit(function):
            return self.call_jit(node, function, args, kwargs)
        if getattr(function, "__tessera_bound_jit__", False):  # obj.method() of an aggregate
            return self.call_jit(node, function.function, [function.instance, *args], kwargs)
        if is_aggregate(function):  # a tl.core._aggregate class: its constructor
            return function(*args, _semantic=self.semantic, **kwargs)
        if function is getattr(sys.modules.get("tessera.jit"), "cdiv", None):
            function = tl.cdiv  # tessera.cdiv, the host helper: same meaning in a kernel
        if (function is getattr(sys.modules.get("tessera.jit"), "next_power_of_2", None)
                or getattr(function, "__tessera_constexpr_function__", False)):
            if runtime:  # as Triton's constexpr_function: compile-time values only
                name = getattr(function, "__name__", "this function")
                raise TypeError(f"{name}() runs at compile time: it takes constexpr values, "
                                "not runtime tensors")
            return normalize_number(function(*args, **kwargs))
        if function is tl.constexpr:
            return normalize_number(tl.constexpr(*args, **kwargs).value)
        if function in _LANGUAGE_CLASSES or (  # tl.tuple([...]), tl.slice, tl.condition, ...
                isinstance(function, type) and issubclass(function, tuple)
                and hasattr(function, "_fields")):  # a namedtuple class, as Triton allows
            return function(*args, **kwargs)
        if tl.is_builtin(function):
            if self.elementwise:  # memory effects under element conditions: masked
                self.elementwise_call_check(function, kwargs)
            if getattr(function, NEEDS_GENERATOR, False):  # inlines a @jit combine_fn
                kwargs["_generator"] = self
            return normalize_number(function(*args, _semantic=self.semantic, **kwargs))
        if function in (min, max):
            if not runtime:
                return function(*args, **kwargs)
            combine = self.semantic.minimum if function is min else self.semantic.maximum
            result = args[0]
            for item in args[1:]:
                result = combine(result, item)
            return result
        if function is tl.pointer_type and not runtime:  # a dtype made in the kernel
            return tl.pointer_type(*[tl._unwrap(a) for a in args],
                                   **{k: tl._unwrap(v) for k, v in kwargs.items()})
        if inspect.ismethod(function) and isinstance(function.__self__, (tl.dtype, tl.block_type)) \
                and not runtime:
            return function(*args, **kwargs)  # type queries: x.dtype.is_floating(), ...
        if function is print:  # as Triton: print(prefix, *values) is tl.device_print
            if args and not isinstance(args[0], str):
                args = ["", *args]
            return tl.device_print(*args, _semantic=self.semantic, **kwargs)
        if function in _COMPILE_TIME_FUNCTIONS or function is range or (
                isinstance(function, type) and issubclass(function, (tl.static_range, tl.range))):
            if runtime and function not in (isinstance, getattr, range, tl.range):
                raise TypeError(f"{function.__name__}() of a runtime value is not supported")
            return function(*args, **kwargs)
        name = getattr(function, "__name__", repr(function))
        raise errors.UnsupportedError(
            f"cannot call '{name}' from a kernel: only @jit functions, tessera.language builtins "
            "and min/max/len/int/float on compile-time values can be called")

    def call_jit(self, node: ast.Call, jit_function: Any, args: list,
                 kwargs: Dict[str, Any]) -> Any:
        """Inlines a @jit function: binds its parameters to the values given (compile-time or
        runtime, whatever the annotations say, as Triton) and compiles its body at the current
        insertion point."""
        fn = jit_function.fn
        name = getattr(jit_function, "__name__", fn.__name__)
        if len(self.ctx.call_stack) >= MAX_INLINE_DEPTH:
            raise errors.UnsupportedError(f"@jit calls nested more than {MAX_INLINE_DEPTH} deep "
                                          f"at '{name}': recursion without a constexpr base "
                                          "case?")
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{name}(): {error}") from None
        bound.apply_defaults()
        scope: Dict[str, Any] = {}
        for param in kernel_parameters(fn):
            value = bound.arguments[param.name]
            if isinstance(value, tl.constexpr):
                value = normalize_number(value.value)
            # As Triton: a helper's `tl.constexpr` annotations are not checked; what it is
            # given decides (a runtime tensor stays one, e.g. offsets passed down).
            scope[param.name] = value
        callee = CodeGenerator(self.ctx, self.ctx.parse(fn), scope, is_kernel=False)
        callee.loc = self.loc
        if self.elementwise:  # a helper of a map_elementwise function: per element too
            callee.elementwise, callee.ew_base = True, self.ew_lanes()
            callee.ew_shape = self.ew_shape
        return self.inline_callee(fn, callee, f"{name}(), inlined")

    def inline_callee(self, fn: Callable, callee: "CodeGenerator", what: str) -> Any:
        """Generates ``callee`` (the body of @jit function ``fn``, built into this kernel) and
        returns its value; a compile error in it gets a note naming ``what`` and this call."""
        self.ctx.call_stack.append(fn)
        try:
            callee.generate_body()
        except errors.CompilationError as error:
            error.with_note(f"  in {what} at {self.loc}")
            raise
        finally:
            self.ctx.call_stack.pop()
            self.builder.set_location(self.loc)
        return callee.return_value


def make_context(kernel_name: str, builder: Any) -> CompileContext:
    return CompileContext(kernel_name, builder, Semantic(builder))

