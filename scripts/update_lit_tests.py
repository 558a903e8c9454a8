#!/usr/bin/env python3
"""Regenerates the CHECK lines of lit tests from tessera-opt's current output.

For every RUN line of the form ``%tessera-opt <args> %s | FileCheck %s [--check-prefix=P]``
the script runs tessera-opt, drops the test's old P lines, and writes above each
``func @name`` of the input a block that matches that function's output line by line:

    // CHECK-LABEL: func @scale(
    // CHECK-SAME: [[V0:%[0-9]+]]: f32) {
    // CHECK-NEXT: [[V1:%[0-9]+]] = mulf [[V0]], [[V0]] : (f32, f32) -> f32

Value numbers become FileCheck variables, so a test does not break when an earlier function
changes. Review the result with ``git diff`` before committing: the script records what the
passes do now, not what they should do. RUN lines with ``not`` (error tests) are skipped.

Usage: scripts/update_lit_tests.py [--tessera-opt build/bin/tessera-opt] [--dry-run] TEST.ir...
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHECK_SUFFIXES = ("", "-NEXT", "-SAME", "-LABEL", "-NOT", "-DAG", "-EMPTY", "-COUNT")
VALUE = re.compile(r"%([0-9]+)\b")
FUNC_LINE = re.compile(r"^(\s*)func @([^\s(]+)\(")


def run_lines(text: str) -> list[str]:
    """The RUN commands of a test, with `\\` continuations joined."""
    commands, pending = [], ""
    for line in text.splitlines():
        match = re.search(r"//\s*RUN:\s?(.*)$", line)
        if not match:
            continue
        pending += match.group(1).rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        commands.append(pending.strip())
        pending = ""
    return commands


def parse_run(command: str) -> tuple[list[str], list[str]] | None:
    """(tessera-opt arguments, check prefixes) of a `%tessera-opt ... | FileCheck %s` line."""
    if "|" not in command:
        return None
    producer, _, consumer = command.partition("|")
    producer_words, consumer_words = shlex.split(producer), shlex.split(consumer)
    if not producer_words or producer_words[0] != "%tessera-opt":
        return None
    if not consumer_words or consumer_words[0] != "FileCheck" or "|" in consumer:
        return None
    prefixes = ["CHECK"]
    for word in consumer_words[1:]:
        if word.startswith(("--check-prefix=", "--check-prefixes=")):
            prefixes = word.split("=", 1)[1].split(",")
    return producer_words[1:], prefixes


def escape(text: str) -> str:
    """Keeps FileCheck from reading `{{` or `[[` in the output as a regex or a variable."""
    return text.replace("{{", "{{[{][{]}}").replace("[[", "{{\\[\\[}}")


def to_pattern(line: str, defined: set[str]) -> str:
    """An output line as a FileCheck pattern: the first %N is defined, later ones reused."""

    def replace(value: re.Match[str]) -> str:
        number = value.group(1)
        if number in defined:
            return f"[[V{number}]]"
        defined.add(number)
        return f"[[V{number}:%[0-9]+]]"

    # re.sub goes left to right, so each value's first occurrence (its definition) comes first.
    return VALUE.sub(replace, escape(line.strip()))


def function_blocks(output: str, prefix: str) -> dict[str, list[str]]:
    """CHECK lines per function of tessera-opt's output."""
    blocks: dict[str, list[str]] = {}
    lines = output.splitlines()
    index = 0
    while index < len(lines):
        match = FUNC_LINE.match(lines[index])
        if not match:
            index += 1
            continue
        indent, name = len(match.group(1)), match.group(2)
        defined: set[str] = set()

        header = lines[index].strip()
        head, _, rest = header.partition("(")
        block = [
            f"// {prefix}-LABEL: {head}(",
            f"// {prefix}-SAME: {to_pattern(rest, defined)}",
        ]
        index += 1
        while index < len(lines):
            line = lines[index]
            block.append(f"// {prefix}-NEXT: {to_pattern(line, defined)}")
            index += 1
            if line.strip() == "}" and len(line) - len(line.lstrip()) == indent:
                break
        blocks[name] = block
    return blocks


def strip_checks(lines: list[str], prefixes: list[str]) -> list[str]:
    names = "|".join(re.escape(p) for p in prefixes)
    suffixes = "|".join(re.escape(s) for s in CHECK_SUFFIXES if s)
    pattern = re.compile(rf"^\s*//\s*({names})({suffixes})?(\{{.*\}})?:")
    return [line for line in lines if not pattern.match(line)]


def update(path: Path, tessera_opt: str, dry_run: bool) -> bool:
    original = path.read_text()
    runs = [parsed for parsed in map(parse_run, run_lines(original)) if parsed]
    if not runs:
        print(
            f"{path}: no '%tessera-opt ... | FileCheck' RUN line, skipped",
            file=sys.stderr,
        )
        return True
    lines = original.splitlines()
    blocks_per_function: dict[str, list[str]] = {}
    for arguments, prefixes in runs:
        if "--split-input-file" in arguments:
            print(
                f"{path}: --split-input-file is not supported, skipped", file=sys.stderr
            )
            return True
        command = [tessera_opt] + [str(path) if a == "%s" else a for a in arguments]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            print(f"{path}: tessera-opt failed:\n{result.stderr}", file=sys.stderr)
            return False
        lines = strip_checks(lines, prefixes)
        for prefix in prefixes[:1]:
            for name, block in function_blocks(result.stdout, prefix).items():
                blocks_per_function.setdefault(name, []).extend(block)
    updated = []
    for line in lines:
        match = FUNC_LINE.match(line)
        if match and match.group(2) in blocks_per_function:
            indent = match.group(1)
            updated.extend(
                indent + check for check in blocks_per_function.pop(match.group(2))
            )
        updated.append(line)
    for (
        name,
        block,
    ) in blocks_per_function.items():  # functions that only the output has
        updated.extend(block)
    text = "\n".join(updated) + "\n"
    if dry_run:
        sys.stdout.writelines(
            difflib.unified_diff(
                original.splitlines(True), text.splitlines(True), str(path), str(path)
            )
        )
    elif text != original:
        path.write_text(text)
        print(f"updated {path}")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tests", nargs="+", type=Path)
    parser.add_argument(
        "--tessera-opt", default=str(REPO / "build" / "bin" / "tessera-opt")
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the diff, write nothing"
    )
    args = parser.parse_args()
    ok = True
    for test in args.tests:
        ok &= update(test, args.tessera_opt, args.dry_run)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
