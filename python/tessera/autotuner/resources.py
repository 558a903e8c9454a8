"""``tessera.autotuner.resources``: the model of what a thread block needs and whether it fits
on a GPU, which lives in device/resources.py (the report reads it too); this path is that
very module. Example: ``from tessera.autotuner import resources; resources.occupancy(...)``."""
import sys

from ..device import resources as _resources

sys.modules[__name__] = _resources
