"""The GPU as the host sees it: the CUDA driver (driver.py: devices, modules, streams,
launches, over the binding's libcuda loader), Triton's ``driver.active`` (active_driver.py),
the TMA's tensor-map rules (tma.py) and the model of what a thread block needs and whether it
fits (resources.py: occupancy).

A floor below the language: ``tl.target_info`` asks it for the current device, the front end
and the runtime follow its TMA rules, the runtime loads and launches kernels through it. Its
public paths are also ``tessera.runtime.driver``, ``tessera.runtime.active_driver`` and
``tessera.autotuner.resources`` (the same modules).
"""
