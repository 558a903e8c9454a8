"""Running compiled kernels: the CUDA driver (driver.py) and the on-disk kernel cache (cache.py).

``driver`` loads libcuda at run time, so importing it needs no GPU; ``cache`` needs no binding.
"""
