"""source_extent.getsourcelines gives exactly inspect.getsourcelines's answer (the source key
and the front end read kernels through it), on every function of the package and the
tutorials (and the front end's tests), and on layouts chosen to hit inspect's BlockFinder rules."""
import glob
import inspect
import linecache
import os
import textwrap
import types

import pytest

from tessera.frontend import source_extent

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def _functions(path):
    """Every function (nested ones too) of the file at ``path``, made from its code objects."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        code = compile(text, path, "exec", dont_inherit=True)
    except SyntaxError:
        return []
    found, stack = [], [code]
    while stack:
        current = stack.pop()
        for const in current.co_consts:
            if isinstance(const, types.CodeType):
                stack.append(const)
                # functions only (a class body's code has no CO_OPTIMIZED)
                if const.co_flags & inspect.CO_OPTIMIZED and not const.co_name.startswith("<"):
                    cells = tuple(types.CellType() for _ in const.co_freevars)
                    found.append(types.FunctionType(const, {}, None, None, cells))
    return found


def _check(path):
    linecache.checkcache(path)
    lines = linecache.getlines(path)
    functions = _functions(path)
    checked = 0
    for fn in functions:
        try:
            expected = inspect.getsourcelines(fn)
        except (OSError, SyntaxError):  # inspect cannot say either
            continue
        assert source_extent.getsourcelines(fn, lines) == expected, \
            f"{path}:{fn.__code__.co_firstlineno} {fn.__name__}"
        checked += 1
    return checked


def test_every_function_of_the_package_and_tutorials():
    paths = sorted(glob.glob(os.path.join(ROOT, "python", "tessera", "**", "*.py"),
                             recursive=True)
                   + glob.glob(os.path.join(ROOT, "tutorials", "*.py"))
                   + glob.glob(os.path.join(ROOT, "tests", "python", "frontend", "*.py")))
    assert sum(_check(path) for path in paths) > 1000


LAYOUTS = {
    "trailing comments": '''
        import functools

        @functools.lru_cache(
            maxsize=None)
        def f(x):
            y = x + 1
            # inside
          # less indented than the body
                # more indented: inspect keeps it

            return y
            # trailing, body indent

        # top level
        def g(a,
              b):
            """doc"""
            if a:
                return b
                    # deeper
        # after
        x = 1
        ''',
    "one-line bodies and nesting": '''
        def one(x): return x
        def two(x):
            def inner(y): return y
            def inner2(y):
                return (y +
                        1)
            return inner(x) + inner2(x)
        class C:
            def m(self):
                return 1
            # method comment

            @staticmethod
            def s():
                pass
        async def co():
            await co()
        ''',
    "no final newline": "def f(x):\n    return x\n    # end",
    # column-0 lines inside a def: its text alone does not parse, the whole file is read
    "column-0 lines inside": 'def f(\n    x,\n):\n    """doc\nat column 0\n"""\n'
                             '    return (x +\n1)\n    # end\n\n\ndef g():\n    pass\n',
    "decorator with arguments": "@deco(\n    1,\n)\ndef f():\n    pass\ndef deco(n):\n"
                                "    return lambda f: f\n",
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layouts(tmp_path, name):
    path = tmp_path / "layout.py"
    path.write_text(textwrap.dedent(LAYOUTS[name]).lstrip("\n"))
    assert _check(str(path)) >= 2 or name == "no final newline"


def test_function_whose_text_is_not_in_the_file_falls_back_to_inspect(tmp_path):
    path = tmp_path / "changed.py"
    path.write_text("def f(x):\n    return x\n")
    fn = _functions(str(path))[0]
    assert source_extent.getsourcelines(fn, ["x = 1\n"]) == inspect.getsourcelines(fn)
