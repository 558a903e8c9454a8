# Tests run against the Tessera that Python imports: the installed package (pip install; what
# `make test` and CI test) or, with PYTHONPATH=python, the in-tree build of `make build`. Only
# when neither is importable does the checkout's python/ go on the path. The header says which.
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if importlib.util.find_spec("tessera") is None:
    sys.path.insert(0, os.path.join(ROOT, "python"))


def pytest_report_header(config):
    import tessera
    return f"tessera {tessera.__version__} from {os.path.dirname(tessera.__file__)}"


def pytest_configure(config):
    # pytest-xdist's marker, also when it is not installed: `--dist loadgroup` runs each group
    # on one worker (tests/gpu/test_large_tensors.py holds 4 GiB tensors).
    config.addinivalue_line("markers", "xdist_group(name): run on one pytest-xdist worker")
