"""kernel_parameters and kernel_source_key: what the JIT reads of a kernel for binding
arguments and for its cache key."""
import inspect
import sys

import pytest

import tessera.language as tl
from tessera.errors import UnsupportedLanguageConstruct
from tessera.frontend import build_module, kernel_parameters, kernel_source_key


class StubJIT:
    __tessera_jit__ = True

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__


def jit(fn):
    return StubJIT(fn)


SCALE = tl.constexpr(3)


@jit
def leaf(x):
    return x * SCALE


@jit
def middle(x):
    return leaf(x) + 1


@jit
def unrelated(x):
    return x - 1


@jit
def self_referencing(x, DEPTH: tl.constexpr):
    if DEPTH > 0:
        return self_referencing(x, DEPTH - 1)
    return x


def kernel(x_ptr, n, BLOCK: tl.constexpr, MODE: "tl.constexpr" = "fast", eps=1e-5):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, middle(x) + self_referencing(x, 2))


def test_kernel_parameters():
    params = kernel_parameters(kernel)
    assert [p.name for p in params] == ["x_ptr", "n", "BLOCK", "MODE", "eps"]
    assert [p.is_constexpr for p in params] == [False, False, True, True, False]
    assert [p.index for p in params] == [0, 1, 2, 3, 4]
    assert not params[2].has_default and params[2].default is inspect.Parameter.empty
    assert params[3].default == "fast" and params[4].default == 1e-5
    assert [p.name for p in kernel_parameters(jit(kernel))] == [p.name for p in params]


def test_source_key_covers_transitive_callees_and_constexpr_globals():
    key = kernel_source_key(kernel)
    for fn in (kernel, middle.fn, leaf.fn, self_referencing.fn):
        assert inspect.getsource(fn).strip().splitlines()[-1].strip() in key
    assert "def unrelated" not in key
    assert "SCALE = 3" in key
    assert key.count("def self_referencing") == 1  # recursion does not loop
    assert kernel_source_key(jit(kernel)) == key


def test_source_key_changes_with_a_constexpr_global(monkeypatch):
    before = kernel_source_key(kernel)
    monkeypatch.setattr(sys.modules[__name__], "SCALE", tl.constexpr(4))
    after = kernel_source_key(kernel)
    assert before != after and "SCALE = 4" in after


def test_source_key_follows_closures():
    @jit
    def local_helper(x):
        return x + 2

    def closure_kernel(x_ptr):
        tl.store(x_ptr, local_helper(tl.load(x_ptr)))

    key = kernel_source_key(closure_kernel)
    assert "return x + 2" in key
    module = build_module(closure_kernel, {"x_ptr": "*i32"}, {})
    module.verify()
    assert "addi" in str(module)


@jit
def endless(x):
    return endless(x)


def test_recursion_needs_a_constexpr_base_case():
    module = build_module(kernel, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 16})
    module.verify()  # self_referencing(x, 2) unrolls to x through two nested calls

    def endless_kernel(x_ptr):
        tl.store(x_ptr, endless(tl.load(x_ptr)))

    with pytest.raises(UnsupportedLanguageConstruct, match="nested more than 64 deep"):
        build_module(endless_kernel, {"x_ptr": "*fp32"}, {})
