"""The benchmarks/*.py scripts as modules for their CPU tests (the scripts are not a package)."""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))


def load(script: str):
    """benchmarks/<script>.py as the module <script>_benchmark (registered in sys.modules:
    dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(
        f"{script}_benchmark", os.path.join(ROOT, "benchmarks", f"{script}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
