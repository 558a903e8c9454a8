"""Testing and benchmarking helpers: do_bench (CUDA-event timing), relative errors,
gpu_available, and perf_report/Benchmark tables with plots (as triton.testing)."""
from .bench import (
    GPUUnavailableError,
    do_bench,
    do_bench_interleaved,
    gpu_available,
    relative_error,
)
from .perf_report import Benchmark, Mark, Table, perf_report

__all__ = ["Benchmark", "GPUUnavailableError", "Mark", "Table", "do_bench",
           "do_bench_interleaved", "gpu_available", "perf_report", "relative_error"]

# triton.testing's checking and CUDA-graph timing (compat.py)
from .compat import assert_close, do_bench_cudagraph  # noqa: E402

__all__ += ["assert_close", "do_bench_cudagraph"]

# triton.testing's device helpers (gpu_info.py)
from .gpu_info import (  # noqa: E402
    cuda_memcheck,
    get_dram_gbps,
    get_max_simd_tflops,
    get_max_tensorcore_tflops,
    nvsmi,
    set_gpu_clock,
)

__all__ += ["cuda_memcheck", "get_dram_gbps", "get_max_simd_tflops", "get_max_tensorcore_tflops",
            "nvsmi", "set_gpu_clock"]

# Triton's driver.active.get_benchmarker() is this do_bench: the driver, a floor below, is told.
from ..device import active_driver as _active_driver  # noqa: E402

_active_driver.set_benchmarker(do_bench)


def __getattr__(name: str):
    from .._triton_names import missing_name_error
    raise missing_name_error("triton.testing", name, __name__)
