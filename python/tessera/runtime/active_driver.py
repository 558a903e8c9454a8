"""``tessera.runtime.active_driver``: Triton's ``driver.active`` object (CudaDriver, GPUTarget),
which lives in device/active_driver.py beside the driver; this path is that very module.
Example: ``from tessera.runtime.active_driver import GPUTarget``."""
import sys

from ..device import active_driver as _active_driver

sys.modules[__name__] = _active_driver
