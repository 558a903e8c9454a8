"""One small launch of tessera.ops.matmul's kernel, for compute-sanitizer: a config of the
library (default: 128x128x64, 4 warps, 3 stages, wgmma on sm_90a) on a ragged 200 x 136 x 640
fp16 product (10 steps of K: the ring wraps around three times), checked against float64.

    TESSERA_WGMMA_PIPELINE=1 compute-sanitizer --tool racecheck python3 scripts/racecheck_matmul.py
    TESSERA_WGMMA_PIPELINE=1 compute-sanitizer --tool synccheck python3 scripts/racecheck_matmul.py

The knobs (TESSERA_WGMMA_PIPELINE, TESSERA_WGMMA_OVERLAP, ...) come from the environment;
--config picks another of gemm.CONFIGS by index. Exits 1 when the result is wrong.
"""
import argparse
import sys

import torch
from tessera.config import knobs
from tessera.ops import gemm
from tessera.testing import relative_error


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=int, default=6, help="index into gemm.CONFIGS")
    parser.add_argument("--shape", type=int, nargs=3, default=[200, 136, 640],
                        metavar=("M", "N", "K"))
    args = parser.parse_args()
    config = gemm.CONFIGS[args.config]
    M, N, K = args.shape
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((M, K), device="cuda", generator=gen).half()
    b = torch.randn((K, N), device="cuda", generator=gen).half()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    meta = config.kwargs
    grid = (-(-M // meta["BLOCK_M"]) * -(-N // meta["BLOCK_N"]),)
    gemm.matmul_kernel[grid](a, b, c, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                             HAS_BIAS=False, ACTIVATION="", num_warps=config.num_warps,
                             num_stages=config.num_stages, **meta)
    torch.cuda.synchronize()
    error = relative_error(c.double().cpu().numpy(), (a.double() @ b.double()).cpu().numpy())
    print(f"matmul_kernel {meta} w{config.num_warps} s{config.num_stages} {M}x{N}x{K} "
          f"wgmma_pipeline={knobs.wgmma_pipeline}: relative error {error:.1e}")
    return 0 if error < 5e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
