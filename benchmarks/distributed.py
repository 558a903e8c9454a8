"""Tessera on several GPUs (torchrun, NCCL): tuning time, agreement, training, cache; one JSON.

Each figure is one `torchrun --nproc_per_node=N tests/gpu/multi/worker.py <mode>` (the worker
of the multi-GPU tests); the environment passes through unchanged (the machine's NCCL settings,
NVLink multicast off, included):

* tuning_time: tuning a 16-config matmul (4096^3, float16) on 1 GPU and on N GPUs, wall time
  of the first launch, cold (empty cache: compile + time), with the configs already compiled
  on disk (load + time), and the same with Triton's timing budget (do_bench warmup 25 ms, rep
  100 ms, Triton's autotuner default; Tessera's is 10, 40); the ratios N/1 (the target:
  <= 0.6 for N = 2, <= 0.35 for 4; docs/distributed.md);
* agreement: 8 keys of a 16-config kernel tuned per rank and together, with timing noise
  (TESSERA_AUTOTUNE_NOISE=3.0:1) and without: the keys whose configs differ between ranks;
* training: DDP and FSDP2 steps of examples/distributed_training.py's model, eager and under
  torch.compile (inductor when Triton is importable, else aot_eager), against the one-GPU
  reference: the largest relative loss and gradient errors, and the bounds;
* shared_cache: N ranks x 4 processes compiling the same and their own kernels into one
  cache: correct results, compiles (one per kernel), damaged entries.

    python benchmarks/distributed.py --json distributed.json [--gpus 2] [--only time,train]

Below 2 GPUs it writes {"skipped": ...} and exits 0.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "gpu" / "multi" / "worker.py"
PARTS = ("time", "agreement", "train", "cache")


def torchrun(ranks: int, mode: str, *extra: str, env=None) -> dict:
    with tempfile.TemporaryDirectory(prefix="tessera-dist-bench-") as directory:
        out = Path(directory) / "out.json"
        command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}",
                   "--standalone", str(WORKER), mode, "--out", str(out),
                   "--cache", str(Path(directory) / "cache"), *extra]
        environment = {**os.environ, "TESSERA_AUTOTUNE_PROGRESS": "0", **(env or {})}
        start = time.perf_counter()
        done = subprocess.run(command, env=environment, capture_output=True, text=True)
        if done.returncode != 0:
            return {"error": f"exit {done.returncode}", "stderr": done.stderr[-6000:]}
        result = json.loads(out.read_text())
        result["torchrun_s"] = round(time.perf_counter() - start, 2)
        return result


def tuning_time(gpus: int) -> dict:
    one, many = torchrun(1, "time"), torchrun(gpus, "time")
    figures = {"1_gpu": one, f"{gpus}_gpus": many}
    if "error" not in one and "error" not in many:
        for phase in ("cold", "configs_compiled", "triton_budget"):
            figures[f"ratio_{phase}"] = round(many[phase]["wall_s"] / one[phase]["wall_s"], 3)
        figures["target_ratio"] = 0.6 if gpus == 2 else 0.35
    return figures


def agreement(gpus: int) -> dict:
    return {"noise_on": torchrun(gpus, "tune", env={"TESSERA_AUTOTUNE_NOISE": "3.0:1"}),
            "noise_off": torchrun(gpus, "tune", env={"TESSERA_AUTOTUNE_NOISE": "0"})}


def training(gpus: int) -> dict:
    backend = "inductor" if importlib.util.find_spec("triton") else "aot_eager"
    return torchrun(gpus, "train", "--compile", backend, "--steps", "3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True, help="write the figures to this file")
    parser.add_argument("--gpus", type=int, default=0, help="ranks (default: every GPU, <= 4)")
    parser.add_argument("--only", default=",".join(PARTS), help=f"some of {', '.join(PARTS)}")
    args = parser.parse_args()
    import torch
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    gpus = args.gpus or min(available, 4)
    figures: dict = {"gpus": gpus, "device": torch.cuda.get_device_name(0) if available else None}
    if gpus < 2 or available < gpus:
        figures["skipped"] = f"needs 2 or more GPUs ({available} found)"
    else:
        run = {"time": ("tuning_time", tuning_time), "agreement": ("agreement", agreement),
               "train": ("training", training),
               "cache": ("shared_cache", lambda n: torchrun(n, "cache"))}
        for part in args.only.split(","):
            name, function = run[part.strip()]
            print(f"=== {name} on {gpus} GPUs", flush=True)
            figures[name] = function(gpus)
            print(json.dumps(figures[name], indent=1)[:3000], flush=True)
    Path(args.json).write_text(json.dumps(figures, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
