"""Prints a SHA-256 of the sm_90a PTX of the library's kernels (tessera.ops) and a descriptor
matmul, one line per kernel, to compare a change that must leave default PTX untouched::

    PYTHONPATH=$PWD/python python3 scripts/hash_ptx.py > before.txt   # (on the old tree)
    PYTHONPATH=$PWD/python python3 scripts/hash_ptx.py > after.txt && diff before.txt after.txt

The cases are scripts/check_ops_ptx.py's (its --quick set) plus tests' descriptor kernels.
"""
import hashlib
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TESSERA_CACHE_DIR", tempfile.mkdtemp(prefix="tessera-ptx-hash-"))

import check_ops_ptx as c  # noqa: E402


def main() -> int:
    from tessera.ops import flash_attention, fused_softmax, gemm, norms
    cases = [*c.softmax_cases(fused_softmax), *c.matmul_cases(gemm, True),
             *c.norm_cases(norms), *c.attention_cases(flash_attention, True)]
    try:
        from descriptor_matmul import descriptor_cases
        cases += list(descriptor_cases())
    except ImportError:
        pass
    for label, kernel, args, meta in cases:
        ptx = kernel.asm(*args, arch="sm_90a", **meta)["ptx"]
        print(hashlib.sha256(ptx.encode()).hexdigest()[:16], label, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
