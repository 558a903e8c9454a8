"""CUDA extras (Triton's ``triton.language.extra.cuda``): ``libdevice``; device queries
(utils.py: num_warps, num_threads, globaltimer, smid); grid dependency control (gdc.py);
float8e4b15 conversions (custom_float8.py)."""
from . import libdevice
from .custom_float8 import convert_custom_float8_sm70, convert_custom_float8_sm80
from .gdc import gdc_launch_dependents, gdc_wait
from .utils import globaltimer, num_threads, num_warps, smid

__all__ = ["libdevice", "gdc_launch_dependents", "gdc_wait", "globaltimer", "num_threads",
           "num_warps", "smid", "convert_custom_float8_sm70", "convert_custom_float8_sm80"]
