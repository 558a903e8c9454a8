"""CUDA extras (Triton's ``triton.language.extra.cuda``): ``libdevice``; device queries
(utils.py: num_warps, num_threads, globaltimer, smid); grid dependency control (gdc.py)."""
from . import libdevice
from .gdc import gdc_launch_dependents, gdc_wait
from .utils import globaltimer, num_threads, num_warps, smid

__all__ = ["libdevice", "gdc_launch_dependents", "gdc_wait", "globaltimer", "num_threads",
           "num_warps", "smid"]
