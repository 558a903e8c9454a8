#!/usr/bin/env bash
# Installs what Tessera needs on a fresh Debian 12 machine (CI's and developers'): LLVM 22
# (static libraries + FileCheck), GoogleTest, CMake, Ninja, a C++ compiler, then the virtual
# environment $VENV (default .venv; it sees the system's Python packages) with the build and
# test dependencies (requirements-dev.txt) and PyTorch, so that the torch, DLPack and
# torch.compile tests run instead of skipping (`make test` runs what CI runs).
# `make install` then pip-installs Tessera into it. Idempotent: does nothing that is already done.
#
# TORCH: the PyTorch requirement installed when `import torch` fails (default torch==2.13.0,
# pinned: an unpinned torch would download gigabytes of a newer CUDA build; CI's machines hold
# this CPU wheel). TORCH= (empty) installs none. For the CPU wheel from PyTorch's own index:
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu make test
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
TORCH=${TORCH-torch==2.13.0}

need_apt=()
command -v llvm-config-22 >/dev/null || need_apt+=(llvm-22-dev)
[ -x /usr/lib/llvm-22/bin/FileCheck ] || need_apt+=(llvm-22-tools)
[ -f /usr/lib/x86_64-linux-gnu/libgtest.a ] || [ -f /usr/lib/libgtest.a ] || need_apt+=(libgtest-dev)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
[ -f /usr/include/zstd.h ] || need_apt+=(libzstd-dev)
[ -f /usr/include/zlib.h ] || need_apt+=(zlib1g-dev)
# Debian's own python3 makes virtual environments only with python3-venv.
if [ "$(command -v python3)" = /usr/bin/python3 ] && command -v dpkg >/dev/null &&
   ! dpkg -s python3-venv >/dev/null 2>&1; then
  need_apt+=(python3-venv)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

[ -x "$VENV/bin/python" ] || python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/python" - <<'PY' || "$VENV/bin/python" -m pip install -q -r requirements-dev.txt
import importlib
for name in ("numpy", "pybind11", "scikit_build_core", "pytest", "hypothesis", "lit",
             "ml_dtypes", "mpmath", "scipy", "matplotlib", "nbclient", "nbformat",
             "ipykernel"):
    importlib.import_module(name)
# The lint tools must be the pinned releases (a new one may check or format differently).
from importlib.metadata import PackageNotFoundError, version
for line in open("requirements-dev.txt"):
    if "==" in line:
        name, pin = line.split("#")[0].strip().split("==")
        try:
            assert version(name) == pin
        except (PackageNotFoundError, AssertionError):
            raise SystemExit(1)
PY

if [ -n "$TORCH" ] && ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q "$TORCH"
fi
