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


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _restore_the_allocator():
    """tessera.set_allocator is process-wide, as Triton's: public Triton code (the compat
    kernels) sets one and leaves it set. Each test starts from the allocator the one before it
    found, so a test's result never depends on which tests ran before it."""
    from tessera.runtime import allocation
    saved = allocation.get_allocator()
    yield
    allocation.set_allocator(saved)
