"""Every op of cpp/ir/ops.def is handled in every layer: a verifier rule, a lowering (codegen),
an interpreter handler and a lit case. Each layer's list comes from the layer itself: the
verifier's and codegen's rule tables through the binding, the interpreter's handler table, and
the op's text in the lit tests' IR. An op without a rule of its own in a layer is declared in
ops.def (NO_RULE, with the reason); a missing rule fails here naming the op and the layer,
e.g. "op xori: no interpreter handler".
"""
from __future__ import annotations

import pathlib
import re
from typing import Dict, Iterable, List, Set, Tuple

from tessera._tessera import codegen, ir
from tessera.interpreter import evaluator  # noqa: F401  (imports every handler module)
from tessera.interpreter.handlers import HANDLERS

LIT = pathlib.Path(__file__).resolve().parents[2] / "lit"
LAYERS = {"verifier": "no verifier rule", "lowering": "no lowering",
          "interpreter": "no interpreter handler", "lit": "no lit case"}


def lit_ops(names: Iterable[str]) -> Set[str]:
    """The ops whose text appears in the IR of a lit test (`%x = name ...` or `name ...` at the
    start of a statement; comments and CHECK lines do not count)."""
    names = set(names)
    found: Set[str] = set()
    statement = re.compile(r"^\s*(?:%[\w.#]+(?:\s*,\s*%[\w.#]+)*\s*=\s*)?([a-z_][a-z0-9_]*)\b")
    for path in LIT.rglob("*.ir"):
        for line in path.read_text().splitlines():
            code = line.split("//", 1)[0]
            match = statement.match(code)
            if match and match.group(1) in names:
                found.add(match.group(1))
    return found


def missing_rules(ops: List[str], layers: Dict[str, Iterable[str]],
                  declared: List[Tuple[str, List[str], str]]) -> List[str]:
    """One message per op and layer that has no rule for it and no NO_RULE declaration in
    ops.def, and per declaration that is stale (the layer has a rule after all)."""
    without = {(op, layer) for op, declared_layers, _ in declared for layer in declared_layers}
    messages = []
    for op in ops:
        for layer, handled in layers.items():
            has_rule = op in handled
            if not has_rule and (op, layer) not in without:
                messages.append(f"op {op}: {LAYERS[layer]}")
            if has_rule and (op, layer) in without:
                messages.append(f"op {op}: ops.def declares no {layer} rule (NO_RULE), but the "
                                f"{layer} has one")
    return messages


def real_layers() -> Dict[str, Iterable[str]]:
    ops = ir.op_names()
    return {"verifier": ir.verifier_rules(), "lowering": codegen.lowering_rules(),
            "interpreter": HANDLERS, "lit": lit_ops(ops)}


def test_every_op_has_a_verifier_rule_lowering_interpreter_handler_and_lit_case():
    problems = missing_rules(ir.op_names(), real_layers(), ir.ops_without_rule())
    assert not problems, "\n".join(problems)


def test_an_op_missing_from_a_layer_is_named():
    """What adding an op without its rules looks like: each layer's gap names the op."""
    ops = ir.op_names()
    assert "xori" in ops
    for layer, text in LAYERS.items():
        layers = {name: set(handled) - ({"xori"} if name == layer else set())
                  for name, handled in real_layers().items()}
        assert missing_rules(ops, layers, ir.ops_without_rule()) == [f"op xori: {text}"]
    new_op = missing_rules(ops + ["rotli"], real_layers(), ir.ops_without_rule())
    assert new_op == [f"op rotli: {text}" for text in LAYERS.values()]


def test_a_stale_no_rule_declaration_is_named():
    layers = {name: set(handled) for name, handled in real_layers().items()}
    layers["lowering"].add("yield")
    assert missing_rules(ir.op_names(), layers, ir.ops_without_rule()) == [
        "op yield: ops.def declares no lowering rule (NO_RULE), but the lowering has one"]


def test_no_rule_declarations_name_real_ops_and_give_a_reason():
    ops = set(ir.op_names())
    declared = ir.ops_without_rule()
    assert declared
    for op, layers, reason in declared:
        assert op in ops and layers and set(layers) <= {"verifier", "lowering", "interpreter"}
        assert len(reason) > 20, (op, reason)


def test_rule_tables_name_their_entry_points():
    """The tables point at functions, not at a catch-all: a few entries pinned."""
    verifier, lowering = ir.verifier_rules(), codegen.lowering_rules()
    assert verifier["exp"] == "verifyMathOp" and verifier["atomic_rmw"] == "verifyAtomicOp"
    assert verifier["xori"] == "verifyElementwiseSameType"
    assert verifier["dot"] == "verifyTensorCoreOp" and verifier["reduce"] == "verifyReductionOp"
    assert lowering["exp"] == "lowerMathOp" and lowering["xori"] == "lowerElementwiseOp"
    assert lowering["load"] == "lowerMemoryOp" and lowering["scan"] == "lowerScanOp"
    assert "yield" not in verifier and "yield" not in lowering and "yield" not in HANDLERS
