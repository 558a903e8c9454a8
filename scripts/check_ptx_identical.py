"""Writes or compares a manifest of the PTX of every tutorial kernel and every tessera.ops
kernel, to show that a change to the compiler's structure (renames, table-driven dispatch)
left its output byte-identical.

Each kernel compiles (no GPU needed) for sm_90a and sm_80 over a representative set of
configs, dtypes and flags; the manifest maps "arch kernel config" to the SHA-256 of its PTX::

    PYTHONPATH=$PWD/python python3 scripts/check_ptx_identical.py --write /tmp/ptx-before.json
    ... change the compiler, make build ...
    PYTHONPATH=$PWD/python python3 scripts/check_ptx_identical.py --compare /tmp/ptx-before.json

--compare exits 1 when a kernel's PTX changed, a kernel is missing or a new one appeared,
listing them. --quick compiles fewer configs (a smoke check, not a proof).
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile
import types
from typing import Callable, Iterator

import ml_dtypes
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from check_ops_ptx import module_from_source, strides  # noqa: E402  (shared with that check)
from tessera.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

ARCHS = ("sm_90a", "sm_80")
# tutorial -> the text that starts its first cell after the kernels and their host wrappers:
# everything before it is executed (definitions only), nothing after it (checks, benchmarks).
TUTORIALS = {
    "01-vector-add.py": "# %% [markdown]\n# ## Correctness",
    "02-fused-softmax.py": "# %% [markdown]\n# ## Correctness",
    "03-matrix-multiplication.py": "# %% [markdown]\n# ## Correctness",
    "04-low-memory-dropout.py": "# %% [markdown]\n# ## What `tl.rand` computes",
    "05-rms-norm.py": "# %% [markdown]\n# ## Correctness",
    "06-fused-attention.py": "# %% [markdown]\n# ## Correctness",
    "07-attention-backward.py": "# %% [markdown]\n# ## Correctness",
    "08-masked-attention.py": "# %% [markdown]\n# ## Three masks and a bias",
}
# One case: (label, kernel, positional args, meta-parameters and launch options).
Case = tuple
Cases = Callable[[types.ModuleType, str, bool], Iterator[Case]]


def load_tutorial(name: str) -> types.ModuleType:
    """The definitions of tutorials/<name> as a module."""
    with open(os.path.join(ROOT, "tutorials", name)) as f:
        source = f.read()
    return module_from_source(source[:source.index(TUTORIALS[name])], "tutorial_" + name[:2])


FLOATS = (np.float32, np.float16, ml_dtypes.bfloat16)


def vector_add_cases(m, arch, quick):
    for dtype in FLOATS:
        x = np.zeros(1000, dtype)
        for block in (256, 1024):
            yield f"add_kernel {x.dtype} BLOCK={block}", m.add_kernel, (x, x, x, 1000), \
                dict(BLOCK=block)


def softmax_cases(m, arch, quick):
    for n_cols in (100, 1000) if quick else (1, 100, 1000, 4096, 32768):
        for dtype in FLOATS:
            x = np.zeros((4, n_cols), dtype)
            yield (f"softmax_kernel cols={n_cols} {x.dtype}", m.softmax_kernel,
                   (x, x, n_cols, n_cols, 4, n_cols), m.softmax_config(n_cols))


def matmul_cases(m, arch, quick):
    configs = m.CONFIGS[:2] if quick else m.CONFIGS
    for dtype in (np.float16, ml_dtypes.bfloat16):
        a = np.zeros((512, 512), dtype)
        for i, c in enumerate(configs):
            for bias, act in ((False, ""), (True, "leaky_relu")):
                meta = dict(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages,
                            HAS_BIAS=bias, ACTIVATION=act)
                yield (f"matmul_kernel config {i} {a.dtype} bias={bias} {act or 'plain'}",
                       m.matmul_kernel, (a, a, a, a, 512, 512, 512, *strides(a) * 3), meta)


def dropout_cases(m, arch, quick):
    x = np.zeros(1000, np.float32)
    keep = np.zeros(1000, np.int8)
    for block in (256, 1024):
        yield (f"masked_dropout_kernel BLOCK={block}", m.masked_dropout_kernel,
               (x, keep, x, 1000, 0.5), dict(BLOCK=block))
        yield (f"seeded_dropout_kernel BLOCK={block}", m.seeded_dropout_kernel,
               (x, x, 1000, 0.5, 123), dict(BLOCK=block))


def norm_cases(m, arch, quick):
    for H in (128, 1000) if quick else (96, 128, 256, 512, 1000):
        for dtype in FLOATS:
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


def attention_inputs(quick):
    """(D, dtype name, q-like array) of the attention cases."""
    for D in (64, 128) if quick else (16, 64, 128, 256):
        for dname in ("float16",) if quick else ("float16", "bfloat16", "float32"):
            dtype = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}.get(dname,
                                                                                np.float32)
            yield D, dname, np.zeros((1, 2, 1024, D), dtype)


def tiles(found, quick):
    """The candidates compiled: the default and one other (all with --quick off at most 3)."""
    return found[:1] if quick else found[:3]


def flash_forward_cases(m, arch, quick, candidates):
    lse = np.zeros((1, 2, 1024), np.float32)
    for D, dname, x in attention_inputs(quick):
        st = strides(x)[:3]
        for block_m, block_n, warps, stages in tiles(candidates(x), quick):
            for causal in (False, True):
                yield (f"attention_fwd_kernel D={D} {dname} {block_m}x{block_n} w{warps} "
                       f"s{stages} causal={causal}", m.attention_fwd_kernel,
                       (x, x, x, x, lse, 0.125 * 1.4426950408889634, 2, 1024, *st * 4),
                       dict(D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                            RELOAD=D * x.itemsize >= 1024, num_warps=warps,
                            num_stages=stages))
                if arch == "sm_90a" and x.itemsize == 2:  # the TMA variants (flash_attention)
                    # q, k, v as (B, H, S, D) host descriptors of blocks (1, 1, BLOCK, D).
                    descs = [TensorDescriptor.from_tensor(x, [1, 1, block, D])
                             for block in (block_m, block_n, block_n)]
                    for specialize in (False, True):
                        yield (f"attention_fwd_kernel TMA specialize={specialize} D={D} "
                               f"{dname} {block_m}x{block_n} w{warps} s{stages} "
                               f"causal={causal}", m.attention_fwd_kernel,
                               (*descs, x, lse, 0.125 * 1.4426950408889634, 2, 1024, *st * 4),
                               dict(D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                                    RELOAD=D * x.itemsize >= 1024, TMA=True,
                                    SPECIALIZE=specialize, num_warps=warps,
                                    num_stages=stages))


def flash_backward_cases(m, arch, quick, candidates):
    from tessera.ops.flash_attention import LOG2E, preprocess_block, reload_tiles
    lse = np.zeros((1, 2, 1024), np.float32)
    for D, dname, x in attention_inputs(quick):
        st = strides(x)[:3]
        yield (f"attention_bwd_preprocess_kernel D={D} {dname}",
               m.attention_bwd_preprocess_kernel, (x, x, lse, 2, 1024, *st, *st),
               dict(D=D, BLOCK_M=preprocess_block(D), num_warps=4))
        args = {"dkdv": (x, x, x, x, x, x, lse, lse, 0.125, 0.125 * LOG2E, 2, 1024, *st * 6),
                "dq": (x, x, x, x, x, lse, lse, 0.125, 0.125 * LOG2E, 2, 1024, *st * 5)}
        kernels = {"dkdv": "attention_bwd_dkdv_kernel", "dq": "attention_bwd_dq_kernel"}
        for name, kernel in kernels.items():
            for block_m, block_n, warps, stages in tiles(candidates(name, x, arch), quick):
                for causal in (False, True):
                    yield (f"{kernel} D={D} {dname} {block_m}x{block_n} w{warps} "
                           f"s{stages} causal={causal}", getattr(m, kernel), args[name],
                           dict(D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                                RELOAD=reload_tiles(x), num_warps=warps,
                                num_stages=stages))


def tutorial_forward_cases(m, arch, quick):
    """06's own forward kernel and tables (its candidates() picks wgmma only on a GPU, so the
    sm_90a wgmma tiles are chosen here as on an sm_90a GPU)."""
    def candidates(x):
        D = x.shape[-1]
        if arch == "sm_90a" and not m.is_fp32(x) and D in m.WGMMA_CONFIGS:
            return m.WGMMA_CONFIGS[D]
        return (m.FP32_CONFIGS if m.is_fp32(x) else m.CONFIGS)[D]
    yield from flash_forward_cases(m, arch, quick, candidates)


def ops_attention_cases(m, arch, quick):
    from tessera.ops.flash_attention import backward, candidates, forward
    yield from flash_forward_cases(forward, arch, quick,
                                   lambda x: candidates("fwd", x, arch))
    yield from flash_backward_cases(backward, arch, quick, candidates)


def tutorial_backward_cases(m, arch, quick):
    from tessera.ops.flash_attention import candidates
    yield from flash_backward_cases(m, arch, quick, candidates)


def masked_tutorial_cases(m, arch, quick):
    mask = np.zeros((1, 1, 300, 300), np.uint8)
    table = np.zeros((1, 3, 3), np.int32)
    yield ("live_tiles_kernel", m.live_tiles_kernel,
           (mask, table, 1, 300, 300, 3, 3, 0, 0, 300, 1), dict(SUPER=128, CHUNK=32))
    for D in (32, 64):
        q = np.zeros((1, 2, 300, D), np.float16)
        bias = np.zeros((1, 2, 300, 300), np.float16)
        counts = np.zeros((1, 3, 2), np.int32)
        yield (f"masked_fwd_kernel D={D}", m.masked_fwd_kernel,
               (q, q, q, bias, mask, q, table, counts, 0.1, 2, 300, 300, 3, 3, 0, 0,
                *strides(q)[:3], *strides(bias), 0, 0, 300, 1),
               dict(D=D, BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=2))


def masked_ops_cases(m, arch, quick):
    from tessera.ops.masked_attention import backward, blocks, forward
    from tessera.ops.flash_attention import LOG2E, reload_tiles
    mask = np.zeros((1, 1, 1024, 1024), np.uint8)
    table = np.zeros((1, 8, 8), np.int32)
    for has_mask in (False, True):
        for causal in (False, True):
            yield (f"mask_blocks_kernel mask={has_mask} causal={causal}",
                   blocks.mask_blocks_kernel,
                   (mask, table, 1, 1024, 1024, 8, 8, 0, 0, 1024, 1),
                   dict(HAS_MASK=has_mask, CAUSAL=causal, SUPER=128, CHUNK=32, num_warps=4))
    lse = np.zeros((1, 2, 1024), np.float32)
    counts = np.zeros((1, 8, 2), np.int32)
    for D, dname, x in attention_inputs(quick):
        bias = np.zeros((1, 2, 1024, 1024), x.dtype)
        dbias = np.zeros((1, 2, 1024, 1024), np.float32)
        st, bs, ms = strides(x)[:3], strides(bias), (0, 0, 1024, 1)
        for has_mask, has_bias in ((True, True), (False, False)) if not quick else ((True, True),):
            flags = dict(D=D, SUPER=128, CAUSAL=False, HAS_MASK=has_mask, HAS_BIAS=has_bias,
                         RELOAD=reload_tiles(x))
            fwd_args = (x, x, x, bias, mask, x, lse, table, counts, 0.125 * LOG2E, 2, 1, 1024,
                        1024, 8, 8, 0, 0, *st * 4, *bs, *ms)
            dkdv_args = (x, x, x, x, x, x, lse, lse, bias, mask, dbias, table, counts, 0.125,
                         0.125 * LOG2E, 2, 1, 1024, 1024, 8, 8, 0, 0, *st * 6, *bs, *ms,
                         *strides(dbias))
            dq_args = (x, x, x, x, x, lse, lse, bias, mask, table, counts, 0.125,
                       0.125 * LOG2E, 2, 1, 1024, 1024, 8, 8, 0, 0, *st * 5, *bs, *ms)
            launches = (("fwd", forward.attention_masked_fwd_kernel, fwd_args, {}),
                        ("dkdv", backward.attention_masked_bwd_dkdv_kernel, dkdv_args,
                         dict(DBIAS=1 if has_bias else 0)),
                        ("dq", backward.attention_masked_bwd_dq_kernel, dq_args, {}))
            for name, kernel, args, extra in launches:
                for block_m, block_n, warps, stages in tiles(
                        blocks.masked_candidates(name, x, arch), quick):
                    yield (f"{kernel.__name__} D={D} {dname} mask={has_mask} bias={has_bias} "
                           f"{block_m}x{block_n} w{warps} s{stages}", kernel, args,
                           dict(flags, **extra, BLOCK_M=block_m, BLOCK_N=block_n,
                                num_warps=warps, num_stages=stages))


def descriptor_matmul_cases(m, arch, quick):
    """scripts/descriptor_matmul.py's host- and device-descriptor matmuls (the kernels the
    TMA path rewrites on sm_90a, by default)."""
    yield from m.descriptor_cases()


def sources(quick: bool) -> Iterator[tuple]:
    """(group name, module, cases) for every tutorial, every tessera.ops module and the
    descriptor matmuls."""
    import importlib
    tutorial_cases = {"01-vector-add.py": vector_add_cases, "02-fused-softmax.py": softmax_cases,
                      "03-matrix-multiplication.py": matmul_cases,
                      "04-low-memory-dropout.py": dropout_cases, "05-rms-norm.py": norm_cases,
                      "06-fused-attention.py": tutorial_forward_cases,
                      "07-attention-backward.py": tutorial_backward_cases,
                      "08-masked-attention.py": masked_tutorial_cases}
    for name, cases in tutorial_cases.items():
        yield f"tutorials/{name}", load_tutorial(name), cases
    for name, cases in (("fused_softmax", softmax_cases), ("gemm", matmul_cases),
                        ("norms", norm_cases), ("flash_attention", ops_attention_cases),
                        ("masked_attention", masked_ops_cases)):
        yield f"tessera.ops.{name}", importlib.import_module(f"tessera.ops.{name}"), cases
    yield ("scripts/descriptor_matmul.py", importlib.import_module("descriptor_matmul"),
           descriptor_matmul_cases)


def manifest(quick: bool, only: str | None) -> dict:
    """{"arch group: label": sha256 of the PTX} over every case."""
    from tessera.errors import OutOfResources
    result = {}
    for group, module, cases in sources(quick):
        if only and only not in group:
            continue
        count = 0
        for arch in ARCHS:
            for label, kernel, args, meta in cases(module, arch, quick):
                key = f"{arch} {group}: {label}"
                if key in result:
                    raise SystemExit(f"two cases share the label {key!r}")
                try:
                    ptx = kernel.asm(*args, arch=arch, **meta)["ptx"]
                except OutOfResources as error:  # a tile too large for this arch: that too
                    ptx = f"OutOfResources: {error}"  # must stay as it was
                result[key] = hashlib.sha256(ptx.encode()).hexdigest()
                count += 1
        print(f"{group}: {count} kernels compiled", flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", metavar="FILE", help="write the manifest to FILE")
    action.add_argument("--compare", metavar="FILE", help="compare with the manifest in FILE")
    parser.add_argument("--quick", action="store_true", help="fewer configs and dtypes")
    parser.add_argument("--only", help="only the groups whose name contains this text")
    args = parser.parse_args()
    os.environ.setdefault("TESSERA_CACHE_DIR", tempfile.mkdtemp(prefix="tessera-ptx-cache-"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    now = manifest(args.quick, args.only)
    if args.write:
        with open(args.write, "w") as f:
            json.dump(now, f, indent=1, sort_keys=True)
        print(f"wrote {len(now)} PTX hashes to {args.write}")
        return 0
    with open(args.compare) as f:
        before = json.load(f)
    if args.only or args.quick:
        before = {k: v for k, v in before.items() if k in now}
    changed = sorted(k for k in now if k in before and before[k] != now[k])
    missing = sorted(set(before) - set(now))
    added = sorted(set(now) - set(before))
    for title, keys in (("PTX differs", changed), ("no longer compiled", missing),
                        ("not in the manifest", added)):
        for key in keys:
            print(f"{title}: {key}")
    if changed or missing or added:
        return 1
    print(f"all {len(now)} kernels compile to byte-identical PTX")
    return 0


if __name__ == "__main__":
    sys.exit(main())
