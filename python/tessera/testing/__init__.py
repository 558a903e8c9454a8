"""Testing and benchmarking helpers (do_bench, relative errors)."""
from .bench import do_bench, relative_error

__all__ = ["do_bench", "relative_error"]
