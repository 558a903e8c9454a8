"""Tessera on several GPUs under torchrun (NCCL), each test one `torchrun --nproc_per_node=N`
of worker.py whose JSON it checks: with timing noise, ranks tuning alone can pick different
configs and ranks tuning together never do; DDP and FSDP2 steps on tessera.ops (eager and
torch.compile) match the one-GPU reference within the bfloat16 bounds; N ranks x 4 processes
compiling into one cache leave no damaged entry and all compute correctly. Not timing-based
(benchmarks/distributed.py measures the tuning time). Skipped below 2 GPUs."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [pytest.mark.skipif(GPUS < 2, reason="needs 2 or more GPUs"),
              pytest.mark.xdist_group("multi_gpu")]  # one torchrun at a time owns the GPUs
WORKER = Path(__file__).with_name("worker.py")
RANKS = min(GPUS, 4)


def torchrun(mode, tmp_path, *extra, env=None, cache=None, timeout=480):
    """Runs worker.py ``mode`` on RANKS GPUs; its JSON. The environment passes through as
    it is (the machine's NCCL settings included), plus ``env``; ``cache``: the cache
    directory (default: a new one)."""
    out = tmp_path / f"{mode}.json"
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={RANKS}",
               "--standalone", str(WORKER), mode,
               "--out", str(out), "--cache", str(cache or tmp_path / "cache"), *extra]
    environment = {**os.environ, "TESSERA_AUTOTUNE_PROGRESS": "0", **(env or {})}
    done = subprocess.run(command, env=environment, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    return json.loads(out.read_text())


def test_noisy_timings_tuned_together_agree(tmp_path):
    result = torchrun("tune", tmp_path, env={"TESSERA_AUTOTUNE_NOISE": "3.0:1"})
    assert result["together"]["keys_differing"] == [], result["together"]
    assert result["alone"]["keys_differing"], "noise should make ranks tuning alone differ"


def test_ddp_and_fsdp2_match_one_gpu(tmp_path):
    # The machine's cache (scripts/gpu.sh sets TESSERA_CACHE_DIR) spares a second run the
    # compiles of every op's configs; the tunings then come from group rank 0's records.
    result = torchrun("train", tmp_path, "--compile", "aot_eager",
                      env={"TESSERA_AUTOTUNE_NOISE": "3.0:2"},
                      cache=os.environ.get("TESSERA_CACHE_DIR"))
    assert set(result["variants"]) == {"ddp_eager", "ddp_aot_eager", "fsdp2_eager",
                                       "fsdp2_aot_eager"}
    for name, variant in result["variants"].items():
        assert variant["loss_error"] <= result["bounds"]["loss"], (name, variant)
        assert variant["grad_error"] <= result["bounds"]["grad"], (name, variant)
    assert result["tuned_kernels"] > 0 and result["tunings_differing"] == [], result


def test_ranks_times_four_processes_share_one_cache(tmp_path):
    result = torchrun("cache", tmp_path)
    assert len(result["processes"]) == 4 * RANKS
    assert result["all_ok"], result["processes"]
    assert result["damaged"] == [] and result["entries"] > 0
    # Each kernel is compiled once for all processes (the lock file per key): 2 shared adds,
    # rms_norm's forward, one scale kernel per process.
    assert result["compiles"] == 3 + 4 * RANKS, result
