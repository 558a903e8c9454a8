#!/usr/bin/env bash
# Installs what Tessera needs on a fresh Debian 12 machine (CI's and developers'): LLVM 22
# (static libraries + FileCheck), GoogleTest, Ninja, and the Python test dependencies.
# Idempotent: does nothing that is already done.
set -euo pipefail

need_apt=()
command -v llvm-config-22 >/dev/null || need_apt+=(llvm-22-dev)
[ -x /usr/lib/llvm-22/bin/FileCheck ] || need_apt+=(llvm-22-tools)
[ -f /usr/lib/x86_64-linux-gnu/libgtest.a ] || [ -f /usr/lib/libgtest.a ] || need_apt+=(libgtest-dev)
command -v ninja >/dev/null || need_apt+=(ninja-build)
[ -f /usr/include/zstd.h ] || need_apt+=(libzstd-dev)
[ -f /usr/include/zlib.h ] || need_apt+=(zlib1g-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

python3 - <<'PY' || python3 -m pip install -q -r requirements-dev.txt
import importlib, sys
for name in ("numpy", "pybind11", "pytest", "hypothesis", "lit", "ml_dtypes", "mpmath", "scipy",
             "nbclient", "nbformat", "ipykernel"):
    importlib.import_module(name)
PY
