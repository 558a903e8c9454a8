#!/usr/bin/env bash
# Makes the artifact for machines without LLVM (the GPU machines): .carry/tessera-<version>.tar.gz,
# Tessera's sdist with the prebuilt core (LLVM linked statically, stripped) in prebuilt/.
# `pip install --no-build-isolation --no-index .carry/tessera-<version>.tar.gz` there compiles only
# the pybind11 binding and tessera-opt for that machine's Python (CMake finds prebuilt/ and skips
# the core; no LLVM needed) and installs the package (docs/install.md).
# Carry it with the device tool's carry=[".carry"]; scripts/gpu.sh installs it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
PYTHON=${PYTHON:-python3}
make build BUILD_DIR="$BUILD_DIR" >/dev/null
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
# The PEP 517 hook itself (no `build` frontend needed); it logs to stdout, the name comes last.
sdist=$("$PYTHON" -c "from scikit_build_core.build import build_sdist; print(build_sdist('$staging'))" | tail -1)
tar xzf "$staging/$sdist" -C "$staging"
root="$staging/${sdist%.tar.gz}"
mkdir -p "$root/prebuilt" .carry
strip --strip-unneeded -o "$root/prebuilt/libtessera_core.so" "$BUILD_DIR/lib/libtessera_core.so"
rm -f .carry/tessera-*.tar.gz
tar czf ".carry/$sdist" -C "$staging" "${sdist%.tar.gz}"
ls -la ".carry/$sdist"
# The GPU machine has no package registry: the notebook tests there (tests/gpu/test_notebook.py)
# need nbclient, nbformat and ipykernel, so their wheels for its Python (3.12, x86-64 Linux) go
# along in .carry/wheels (~17 MB; downloaded once, kept between packs). NOTEBOOK_WHEELS=0 skips.
if [ "${NOTEBOOK_WHEELS:-1}" != 0 ] && [ ! -f .carry/wheels/.complete ]; then
  mkdir -p .carry/wheels
  if "$PYTHON" -m pip download -q --python-version 3.12 --only-binary=:all: \
      --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
      -d .carry/wheels nbclient nbformat ipykernel >/dev/null 2>&1; then
    touch .carry/wheels/.complete
  else
    echo "notebook wheels could not be downloaded: tests/gpu/test_notebook.py will skip there"
  fi
fi
