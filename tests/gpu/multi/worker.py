"""The torchrun worker of the multi-GPU tests (test_distributed_gpu.py) and of
benchmarks/distributed.py. One mode per run; group rank 0 writes one JSON to --out.

    torchrun --nproc_per_node=2 tests/gpu/multi/worker.py tune  --out tune.json
    torchrun --nproc_per_node=2 tests/gpu/multi/worker.py train --out train.json [--compile B]
    torchrun --nproc_per_node=2 tests/gpu/multi/worker.py cache --out cache.json
    torchrun --nproc_per_node=2 tests/gpu/multi/worker.py time  --out time.json

tune:  16-config kernels tuned per rank and together, with TESSERA_AUTOTUNE_NOISE set by the
       caller: which config each rank chose for each key.
train: a two-block transformer on tessera.ops (examples/distributed_training.py): the one-GPU
       reference (every rank computes it, on the global batch), then DDP and FSDP2 steps,
       eager and under torch.compile: the largest relative errors of losses and gradients.
cache: each rank starts 4 processes that compile and run shared and own kernels into one
       cache directory: their results, compile counts, and the cache's damaged entries.
time:  the wall time of tuning a 16-config matmul (cold cache, then compiled configs on disk,
       then with Triton's timing budget).
"""
import argparse
import copy
import functools
import gc
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

import tessera
import tessera.language as tl
import tessera.testing
from tessera.config import knobs

ROOT = Path(__file__).resolve().parents[3]
LOSS_BOUND, GRAD_BOUND = 1e-2, 2e-2   # bfloat16: the ops' bounds (tests/gpu/test_attention.py)


@tessera.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@tessera.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, FACTOR: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * FACTOR, mask=mask)


ADD_CONFIGS = [tessera.Config({"BLOCK": b}, num_warps=w) for b in (256, 512, 1024, 2048)
               for w in (1, 2, 4, 8)]
MATMUL_CONFIGS = [tessera.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_SIZE_M": 8},
                                 num_warps=4 if m * n <= 128 * 128 else 8, num_stages=s)
                  for m, n in ((64, 128), (128, 128), (128, 256), (256, 128))
                  for k in (32, 64) for s in (3, 4)]                       # 16 configs


def gather(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def tuned_choices():
    """{kernel + tuning key: config} of every autotuned kernel in this process."""
    from tessera.autotuner import Autotuner
    from tessera.autotuner.distributed import key_text
    return {key_text(o.__name__, key): str(config) for o in gc.get_objects()
            if _is_autotuner(o, Autotuner) for key, config in o.cache.items()}


def _is_autotuner(o, cls) -> bool:
    """isinstance that survives the dead weak proxies gc.get_objects() can return (torch
    keeps some): asking one for its class raises ReferenceError."""
    try:
        return isinstance(o, cls)
    except ReferenceError:
        return False


# --------------------------------------------------------------------------- tune

def run_tune(args) -> dict:
    sizes = [100_000 + 77_777 * i for i in range(8)]
    result = {}
    for phase in ("alone", "together"):
        knobs.cache_dir = os.path.join(args.cache, phase)    # no record from the other phase
        kernel = tessera.autotune(configs=ADD_CONFIGS, key=["n"],
                                  distributed=phase == "together")(add_kernel)
        chosen = {}
        for n in sizes:
            x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
            out = torch.empty_like(x)
            kernel[lambda meta: (tessera.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
            assert torch.equal(out, x + y), (phase, n)
            chosen[str(n)] = ADD_CONFIGS.index(kernel.best_config)
        per_rank = gather(chosen)
        result[phase] = {"chosen": per_rank,
                         "keys_differing": [n for n in chosen
                                            if len({r[n] for r in per_rank}) > 1]}
    return result


# --------------------------------------------------------------------------- train

def _relative(got, ref) -> float:
    ref = ref.double()
    return ((got.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def _example():
    """examples/distributed_training.py, the model the example trains."""
    sys.path.insert(0, str(ROOT / "examples"))
    import distributed_training
    return distributed_training


def _steps(model, parameters, x, target, steps, grad_of, distributed):
    """Losses (averaged over the ranks when ``distributed``) and gradients of SGD steps."""
    optimizer = torch.optim.SGD(parameters, lr=0.05)
    losses, grads = [], []
    for _ in range(steps):
        loss = _example().loss_of(model, x, target)
        optimizer.zero_grad()
        loss.backward()
        grads.append([grad_of(p).float().cpu() for p in parameters])
        optimizer.step()
        total = loss.detach().clone()
        if distributed:
            dist.all_reduce(total)
            total /= dist.get_world_size()
        losses.append(total.item())
    return losses, grads


def _plain(p):
    return p.grad


def _full(p):
    return p.grad.full_tensor()   # FSDP2: the shards gathered (a collective: every rank)


def run_train(args) -> dict:
    from torch.distributed.fsdp import fully_shard
    TinyTransformer, batch = _example().TinyTransformer, _example().batch
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    initial = TinyTransformer().cuda()
    x, target = batch(2 * world, 128, 128, "cuda")
    mine = slice(2 * rank, 2 * (rank + 1))
    # The one-GPU reference: the global batch on one GPU (each rank computes it, so that the
    # kernels' tunings stay in step on every rank).
    reference = copy.deepcopy(initial)
    ref_losses, ref_grads = _steps(reference, list(reference.parameters()), x, target,
                                   args.steps, _plain, distributed=False)
    backends = [None] + ([args.compile] if args.compile != "none" else [])
    report = {}
    for wrap in ("ddp", "fsdp2"):
        for backend in backends:
            model = copy.deepcopy(initial)
            if wrap == "ddp":
                runner = torch.nn.parallel.DistributedDataParallel(
                    model, device_ids=[torch.cuda.current_device()])
                grad_of = _plain
            else:
                for block in model.blocks:
                    fully_shard(block)
                runner = fully_shard(model)
                grad_of = _full
            if backend is not None:
                runner = torch.compile(runner, backend=backend)
            losses, grads = _steps(runner, list(model.parameters()), x[mine], target[mine],
                                   args.steps, grad_of, distributed=True)
            name = f"{wrap}_{backend or 'eager'}"
            report[name] = {
                "losses": losses, "reference_losses": ref_losses,
                "loss_error": max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses)),
                # The first step's gradients come from the same parameters on both sides:
                # they differ only by the reduction (the bound applies). Later steps start
                # from parameters that already differ by that much, so their errors are
                # reported, not bounded.
                "grad_error": max(_relative(g, r) for g, r in zip(grads[0], ref_grads[0])),
                "grad_error_per_step": [max(_relative(g, r) for g, r in zip(step, ref))
                                        for step, ref in zip(grads, ref_grads)]}
    choices = gather(tuned_choices())
    return {"variants": report, "bounds": {"loss": LOSS_BOUND, "grad": GRAD_BOUND},
            "tuned_kernels": len(choices[0]),
            "tunings_differing": [k for k in choices[0]
                                  if len({str(c.get(k)) for c in choices}) > 1]}


# --------------------------------------------------------------------------- cache

def _cache_process(rank: int, index: int, device: int, cache: str, queue) -> None:
    from tessera.runtime import launcher
    knobs.cache_dir = cache
    compiles = [0]
    real = launcher.compile_and_store

    def counted(*args, **kwargs):
        compiles[0] += 1
        return real(*args, **kwargs)

    launcher.compile_and_store = counted
    torch.cuda.set_device(device)
    ok = True
    n = 100_003
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    for block in (256, 1024):                                   # the same kernels everywhere
        add_kernel[(tessera.cdiv(n, block),)](x, y, out, n, BLOCK=block)
        ok &= torch.equal(out, x + y)
    factor = float(2 + 4 * rank + index)                        # one kernel of its own
    scale_kernel[(tessera.cdiv(n, 512),)](x, out, n, BLOCK=512, FACTOR=factor)
    ok &= torch.equal(out, x * factor)
    from tessera.ops import rms_norm                            # a library kernel too
    h = torch.randn(64, 333, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(333, device="cuda", dtype=torch.bfloat16)
    ref = torch.nn.functional.rms_norm(h.float(), (333,), w.float(), 1e-6)
    ok &= _relative(rms_norm(h, w, 1e-6).float(), ref) < 1e-2
    torch.cuda.synchronize()
    queue.put({"rank": rank, "process": index, "ok": bool(ok), "compiles": compiles[0]})


def run_cache(args) -> dict:
    rank = dist.get_rank()
    context = multiprocessing.get_context("spawn")       # children start their own CUDA
    queue = context.Queue()
    processes = [context.Process(target=_cache_process,
                                 args=(rank, i, torch.cuda.current_device(), args.cache, queue))
                 for i in range(args.processes)]
    for process in processes:
        process.start()
    outcomes = [queue.get(timeout=300) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    outcomes = [o for part in gather(outcomes) for o in part]
    dist.barrier()
    from tessera.cache import KINDS, entries
    listed = list(entries(args.cache, KINDS))
    return {"processes": outcomes, "all_ok": all(o["ok"] for o in outcomes),
            "compiles": sum(o["compiles"] for o in outcomes),
            "entries": len(listed), "damaged": [str(e.path) for e in listed if not e.valid]}


# --------------------------------------------------------------------------- time

def run_time(args) -> dict:
    size = 4096
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    from tessera.ops import gemm
    result = {"world": dist.get_world_size(), "configs": len(MATMUL_CONFIGS)}
    # cold: an empty cache; configs_compiled: the kernels on disk (no tuning record), so the
    # figure is loading + timing; triton_budget: the same with Triton's do_bench budget
    # (warmup 25 ms, rep 100 ms) instead of Tessera's (10, 40).
    triton_budget = functools.partial(tessera.testing.do_bench, warmup=25, rep=100)
    for phase, bench in (("cold", None), ("configs_compiled", None),
                         ("triton_budget", triton_budget)):
        kernel = tessera.autotune(configs=MATMUL_CONFIGS, key=["M", "N", "K"], do_bench=bench,
                                  cache_results=False)(gemm.matmul_kernel)
        grid = lambda meta: (tessera.cdiv(size, meta["BLOCK_M"]) *  # noqa: E731
                             tessera.cdiv(size, meta["BLOCK_N"]),)
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        kernel[grid](a, b, c, c, size, size, size, a.stride(0), a.stride(1), b.stride(0),
                     b.stride(1), c.stride(0), c.stride(1), HAS_BIAS=False, ACTIVATION="")
        torch.cuda.synchronize()
        dist.barrier()
        result[phase] = {"wall_s": time.perf_counter() - start,
                         "compile_s": kernel.compile_time, "timing_s": kernel.benchmark_time,
                         "best": str(kernel.best_config)}
    error = _relative(c.float(), a.float() @ b.float())
    result["matmul_error"] = error
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("tune", "train", "cache", "time"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--cache", default=None, help="cache directory (default: a new one)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--compile", default="aot_eager",
                        help="torch.compile backend for the train mode, or 'none'")
    parser.add_argument("--processes", type=int, default=4)
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    if args.cache is None:                   # one directory for all ranks, from rank 0
        args.cache = gather(tempfile.mkdtemp(prefix="tessera-dist-"))[0]
    knobs.cache_dir = args.cache
    knobs.autotune_progress = False
    run = {"tune": run_tune, "train": run_train, "cache": run_cache, "time": run_time}
    result = run[args.mode](args)
    if dist.get_rank() == 0:
        result["noise"] = knobs.autotune_noise
        Path(args.out).write_text(json.dumps(result, indent=1))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
