"""Module text with encoding aliases: ir.Module.str() prints each layout once as `#blocked = ...`
before the module and names it in types; aliases=False prints encodings inline. Both parse."""
from __future__ import annotations

from codegen_ir import blocked, tensor
from tessera._tessera import ir

WIDE = blocked([8], [32], [4], [0])
NARROW = blocked([4], [32], [4], [0])


def _module() -> ir.Module:
    text = f"""
func @k() {{
  %0 = make_range {{end = 128, start = 0}} : () -> {tensor([128], "i32", NARROW)}
  %1 = convert_layout %0 : ({tensor([128], "i32", NARROW)}) -> {tensor([128], "i32", WIDE)}
  return : () -> ()
}}
"""
    return ir.parse_module(text)


def test_aliases_are_defined_once_and_used_in_types() -> None:
    text = _module().str()
    assert text.startswith(f"#blocked = {NARROW}\n#blocked1 = {WIDE}\nmodule {{\n")
    assert "(tensor<128xi32, #blocked>) -> tensor<128xi32, #blocked1>" in text
    assert text.count("sizePerThread") == 2


def test_inline_text_on_request_and_both_forms_parse_alike() -> None:
    module = _module()
    inline = module.str(aliases=False)
    assert inline.startswith("module {")
    assert f"-> {tensor([128], 'i32', WIDE)}" in inline
    assert ir.parse_module(inline).str() == module.str()
    assert ir.parse_module(module.str()).str(aliases=False) == inline
