"""Matmul throughput: Tessera's mma.sync + cp.async kernel (tutorials/03) vs torch.matmul (cuBLAS).

Method (shared/BENCHMARKS.md): square fp16 and bf16 products at 4096³ and 8192³, fresh random
inputs, the output poisoned before the checked run; both kernels timed in the same process
with CUDA events (median, L2 flushed before each run, compile and tuning outside the timing);
TFLOP/s = 2·n³ / time. Prints a table and, with --json OUT, writes every number.

    python benchmarks/matmul.py --json matmul.json [--sizes 4096 8192] [--dtypes float16]
"""
from __future__ import annotations

import argparse
import json

import tessera
import tessera.language as tl
import torch
from tessera.testing import do_bench, relative_error

CONFIGS = [
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=4),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=4),
    tessera.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=4),
]


@tessera.autotune(configs=CONFIGS, key=["M", "N", "K"])
@tessera.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty),
             mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    grid = lambda meta: (tessera.cdiv(M, meta["BLOCK_M"]) * tessera.cdiv(N, meta["BLOCK_N"]),)
    matmul_kernel[grid](a, b, out, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        out.stride(0), out.stride(1))
    return out


def measure(n: int, dtype_name: str) -> dict:
    dtype = getattr(torch, dtype_name)
    a = torch.randn((n, n), device="cuda", dtype=dtype)
    b = torch.randn((n, n), device="cuda", dtype=dtype)
    out = torch.full((n, n), float("nan"), device="cuda", dtype=dtype)
    matmul(a, b, out)  # compiles and tunes
    torch.cuda.synchronize()
    ref = (a.double() @ b.double()).cpu().numpy()
    error = relative_error(out.float().cpu().numpy(), ref)
    t_tessera = do_bench(lambda: matmul(a, b, out), return_mode="median")
    t_torch = do_bench(lambda: torch.matmul(a, b, out=out), return_mode="median")
    flops = 2 * n ** 3
    return {"n": n, "dtype": dtype_name, "tessera_ms": t_tessera, "torch_ms": t_torch,
            "tessera_tflops": flops / t_tessera / 1e9, "torch_tflops": flops / t_torch / 1e9,
            "ratio": t_torch / t_tessera, "relative_error": error,
            "config": str(getattr(matmul_kernel, "best_config", ""))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    args = parser.parse_args()
    rows = [measure(n, dtype) for dtype in args.dtypes for n in args.sizes]
    device = torch.cuda.get_device_name()
    print(f"matmul on {device} (TFLOP/s, median; ratio = tessera / cuBLAS)")
    print(f"{'dtype':<9} {'n':>6} {'tessera':>8} {'cuBLAS':>8} {'ratio':>7} {'rel err':>8}")
    for r in rows:
        print(f"{r['dtype']:<9} {r['n']:>6} {r['tessera_tflops']:>8.1f} {r['torch_tflops']:>8.1f} "
              f"{r['ratio']:>7.1%} {r['relative_error']:>8.1e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "matmul", "device": device, "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
