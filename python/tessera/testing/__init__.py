"""Testing and benchmarking helpers: do_bench (CUDA-event timing), relative errors,
gpu_available, and perf_report/Benchmark tables with plots (as triton.testing)."""
from .bench import do_bench, gpu_available, relative_error
from .perf_report import Benchmark, Mark, Table, perf_report

__all__ = ["Benchmark", "Mark", "Table", "do_bench", "gpu_available", "perf_report",
           "relative_error"]
