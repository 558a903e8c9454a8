"""Lists what ptxas says it did behind the PTX's back in every tutorial and tessera.ops kernel
(the set of scripts/check_ptx_identical.py, sm_90a): its `(C75xx)` notes, among them

- C7514 / C7518: wgmma instructions serialized (each waits for the one before);
- C7517: a wgmma.wait_group injected before an instruction that uses registers a wgmma
  defined: it waits for every group in flight there;
- C7519: a wgmma.fence (warpgroup.arrive) injected before a wgmma reading registers.

Each is a scheduling decision the compiler did not make (docs/perf/attention_tma.md has two
that cost the attention backward). No GPU needed; ptxas must be found.

    PYTHONPATH=$PWD/python python3 scripts/ptxas_notes.py [--full] [--only masked]
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import check_ptx_identical as kernels  # noqa: E402  (the same kernel set)
from tessera.compiler import ptxas  # noqa: E402
from tessera.errors import OutOfResources  # noqa: E402

NOTE = re.compile(r"\((C75\d\d)\)\s*(.*)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="every config, not --quick's")
    parser.add_argument("--only", help="groups whose name contains this")
    args = parser.parse_args()
    if ptxas.find_ptxas() is None:
        raise SystemExit("ptxas not found: install a CUDA toolkit or set TESSERA_PTXAS")
    counts: dict = {}
    for group, module, cases in kernels.sources(not args.full):
        if args.only and args.only not in group:
            continue
        for label, kernel, kernel_args, meta in cases(module, "sm_90a", not args.full):
            try:
                ptx = kernel.asm(*kernel_args, arch="sm_90a", **meta)["ptx"]
            except OutOfResources:
                continue
            for line in ptxas.assemble(ptx, "sm_90a").log.splitlines():
                match = NOTE.search(line)
                if match:
                    counts[match.group(1)] = counts.get(match.group(1), 0) + 1
                    print(f"{group}: {label}: {match.group(1)} {match.group(2)[:120]}")
    print("notes:", ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())) or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
