"""Checks that the kernels moved from the tutorials into tessera.ops compile to the same PTX.

The tutorials once held the library's kernels; `tessera.ops` took them over unchanged. This
compiles every moved kernel for sm_90a (no GPU needed) from both places, the tutorial as it
was at REV (read with `git show`, only its definitions executed) and the library as it is
now, for each kernel's configs (every candidate the library can launch on sm_90a) and
dtypes, and compares the PTX byte for byte::

    PYTHONPATH=$PWD/python python3 scripts/check_ops_ptx.py [--rev REV] [--quick]

Exits 1 on the first kernel whose PTX differs, printing a diff of the two.
"""
import argparse
import difflib
import os
import subprocess
import sys
import tempfile
import types

import ml_dtypes
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The commit before the kernels moved: its tutorials are the "before".
DEFAULT_REV = "c647bae"
DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}
# tutorial -> the text that starts its first cell after the definitions
TUTORIALS = {
    "02-fused-softmax.py": "# %% [markdown]\n# ## Correctness",
    "03-matrix-multiplication.py": "# %% [markdown]\n# ## Correctness",
    "05-rms-norm.py": "# %% [markdown]\n# ## Correctness",
    "06-fused-attention.py": "# %% [markdown]\n# ## PyTorch integration",
}


def load_old(rev: str, name: str) -> types.ModuleType:
    """The definitions of tutorials/<name> at rev, as a module (written to a file, as the
    front end reads kernels' source from their files)."""
    source = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:tutorials/{name}"],
                            check=True, capture_output=True, text=True).stdout
    return module_from_source(source[:source.index(TUTORIALS[name])], "old_" + name[:2])


def module_from_source(source: str, module_name: str) -> types.ModuleType:
    """``source`` executed as module ``module_name``, from a file of its own (the front end
    reads a kernel's source from its file)."""
    path = os.path.join(tempfile.mkdtemp(prefix="tessera-ptx-check-"), module_name + ".py")
    with open(path, "w") as f:
        f.write(source)
    module = types.ModuleType(module_name)
    module.__file__ = path
    sys.modules[module_name] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def strides(x) -> tuple:
    return tuple(s // x.itemsize for s in x.strides)


def softmax_cases(m):
    for n_cols in (1, 100, 1000, 4096, 32768):
        for dtype in DTYPES.values():
            x = np.zeros((4, n_cols), dtype)
            yield (f"softmax_kernel cols={n_cols} {x.dtype}", m.softmax_kernel,
                   (x, x, n_cols, n_cols, 4, n_cols), m.softmax_config(n_cols))


def norm_cases(m):
    for H in (96, 128, 256, 512, 1000):
        for dtype in DTYPES.values():
            x = np.zeros((77, H), dtype)
            w = np.zeros(H, dtype)
            p = np.zeros((8, H), np.float32)
            tag = f"H={H} {x.dtype}"
            yield (f"rms_norm_fwd {tag}", m.rms_norm_fwd, (x, w, x, 77, H, 1e-6),
                   m.tile_config(H))
            yield (f"layer_norm_fwd {tag}", m.layer_norm_fwd, (x, w, w, x, 77, H, 1e-5),
                   m.tile_config(H))
            yield (f"rms_norm_bwd {tag}", m.rms_norm_bwd, (x, x, w, x, p, 77, H, 1e-6),
                   m.backward_config(H, 2))
            yield (f"layer_norm_bwd {tag}", m.layer_norm_bwd, (x, x, w, x, p, p, 77, H, 1e-5),
                   m.backward_config(H, 4))
            yield (f"sum_partials {tag}", m.sum_partials, (p, w, 8, H), m.PARTIALS_CONFIG)


def matmul_cases(m, quick):
    configs = m.CONFIGS[:2] if quick else m.CONFIGS
    for dtype in (np.float16, ml_dtypes.bfloat16):
        a = np.zeros((512, 512), dtype)
        for i, c in enumerate(configs):
            for bias, act in ((False, ""), (True, "leaky_relu")):
                meta = dict(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages,
                            HAS_BIAS=bias, ACTIVATION=act)
                yield (f"matmul_kernel config {i} {a.dtype} bias={bias} {act or 'plain'}",
                       m.matmul_kernel, (a, a, a, a, 512, 512, 512, *strides(a) * 3), meta)


def attention_cases(m, quick):
    for D in ((64, 128) if quick else m.HEAD_DIMS):
        for dname in ("fp16",) if quick else ("fp16", "bf16", "fp32"):
            x = np.zeros((1, 2, 1024, D), DTYPES[dname])
            lse = np.zeros((1, 2, 1024), np.float32)
            st = strides(x)[:3]
            yield (f"attention_bwd_preprocess_kernel D={D} {dname}",
                   m.attention_bwd_preprocess_kernel, (x, x, lse, 2, 1024, *st, *st),
                   dict(D=D, BLOCK_M=m.preprocess_block(D), num_warps=4))
            args = {"fwd": (x, x, x, x, lse, 0.125 * m.LOG2E, 2, 1024, *st * 4),
                    "dkdv": (x, x, x, x, x, x, lse, lse, 0.125, 0.125 * m.LOG2E, 2, 1024,
                             *st * 6),
                    "dq": (x, x, x, x, x, lse, lse, 0.125, 0.125 * m.LOG2E, 2, 1024, *st * 5)}
            kernels = {"fwd": "attention_fwd_kernel", "dkdv": "attention_bwd_dkdv_kernel",
                       "dq": "attention_bwd_dq_kernel"}
            for name, kernel in kernels.items():
                for block_m, block_n, warps, stages in m.candidates(name, x, "sm_90a"):
                    for causal in (False, True):
                        yield (f"{kernel} D={D} {dname} {block_m}x{block_n} w{warps} "
                               f"s{stages} causal={causal}", getattr(m, kernel), args[name],
                               dict(D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                                    RELOAD=m.reload_tiles(x), num_warps=warps,
                                    num_stages=stages))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default=DEFAULT_REV, help="the commit whose tutorials held "
                        "the kernels (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="fewer configs and dtypes")
    args = parser.parse_args()
    os.environ.setdefault("TESSERA_CACHE_DIR", tempfile.mkdtemp(prefix="tessera-ptx-cache-"))
    from tessera.ops import flash_attention, fused_softmax, gemm, norms
    pairs = [
        (softmax_cases, load_old(args.rev, "02-fused-softmax.py"), fused_softmax),
        (lambda m: matmul_cases(m, args.quick), load_old(args.rev, "03-matrix-multiplication.py"),
         gemm),
        (norm_cases, load_old(args.rev, "05-rms-norm.py"), norms),
        (lambda m: attention_cases(m, args.quick), load_old(args.rev, "06-fused-attention.py"),
         flash_attention),
    ]
    total = 0
    for cases, old, new in pairs:
        old_cases, new_cases = list(cases(old)), list(cases(new))
        if [c[0] for c in old_cases] != [c[0] for c in new_cases]:
            print(f"{new.__name__}: the configs differ from the tutorial's")
            return 1
        for (label, old_kernel, old_args, meta), (_, new_kernel, new_args, _) in zip(
                old_cases, new_cases):
            before = old_kernel.asm(*old_args, arch="sm_90a", **meta)["ptx"]
            after = new_kernel.asm(*new_args, arch="sm_90a", **meta)["ptx"]
            if before != after:
                print(f"PTX differs: {label}")
                diff = difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                            "tutorial", "tessera.ops")
                sys.stdout.writelines(list(diff)[:60])
                return 1
            total += 1
        print(f"{new.__name__}: {len(new_cases)} kernels, PTX identical for sm_90a", flush=True)
    print(f"all {total} moved kernels compile to byte-identical PTX")
    return 0


if __name__ == "__main__":
    sys.exit(main())
