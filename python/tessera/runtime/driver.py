"""``tessera.runtime.driver`` (Triton's ``triton.runtime.driver``): the CUDA driver, which
lives a floor below the runtime in device/driver.py, so that the language can ask it for the
current device. This path is that very module (``driver.active``, ``set_active`` included).
Example: ``from tessera.runtime import driver; driver.active.get_current_target()``."""
import sys

from ..device import driver as _driver

sys.modules[__name__] = _driver
