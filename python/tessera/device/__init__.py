"""The GPU as the host sees it: the CUDA driver (driver.py: devices, modules, streams,
launches, over the binding's libcuda loader) and Triton's ``driver.active`` (active_driver.py).

A floor below the language: ``tl.target_info`` asks it for the current device, the runtime
loads and launches kernels through it. Its public paths are Triton's,
``tessera.runtime.driver`` and ``tessera.runtime.active_driver`` (the same modules).
"""
