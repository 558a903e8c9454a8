# Tests run against the Tessera that Python imports: the installed package (pip install; what
# `make test` and CI test) or, with PYTHONPATH=python, the in-tree build of `make build`. Only
# when neither is importable does the checkout's python/ go on the path. The header says which.
import gc
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if importlib.util.find_spec("tessera") is None:
    sys.path.insert(0, os.path.join(ROOT, "python"))


def pytest_report_header(config):
    import tessera
    return f"tessera {tessera.__version__} from {os.path.dirname(tessera.__file__)}"


# Eight pytest-xdist workers share one card: each returns what its test cached to the driver
# (PyTorch's caching allocator keeps freed blocks otherwise, and a later test's child process
# then finds the card full) and records the test's peak (reserved GiB) in the report, which
# the summary lists for tests over 4 GiB: candidates for the "large_memory" xdist group.
@pytest.fixture(autouse=True)
def _release_gpu_memory(request):
    yield
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return
    peak = torch.cuda.max_memory_reserved() / 2 ** 30
    request.node.user_properties.append(("peak_reserved_gib", round(peak, 2)))
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def pytest_terminal_summary(terminalreporter):
    heavy = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if name == "peak_reserved_gib" and value > 4:
                    heavy.append((value, report.nodeid))
    if heavy:
        terminalreporter.write_sep("=", "GPU memory: tests that reserved over 4 GiB")
        for value, nodeid in sorted(set(heavy), reverse=True)[:30]:
            terminalreporter.write_line(f"{value:7.2f} GiB  {nodeid}")


def pytest_configure(config):
    # pytest-xdist's marker, also when it is not installed: `--dist loadgroup` runs each group
    # on one worker (tests/gpu/test_large_tensors.py holds 4 GiB tensors).
    config.addinivalue_line("markers", "xdist_group(name): run on one pytest-xdist worker")
