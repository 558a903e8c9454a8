#!/usr/bin/env bash
# Packs the built core library (a stripped copy) into .carry/core.tar.gz for the GPU machine,
# where scripts/gpu.sh unpacks it into python/tessera/_lib and builds only the binding.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
make build BUILD_DIR="$BUILD_DIR" >/dev/null
staging=$(mktemp -d)
mkdir -p "$staging/python/tessera/_lib" .carry
strip --strip-unneeded -o "$staging/python/tessera/_lib/libtessera_core.so" "$BUILD_DIR/lib/libtessera_core.so"
tar czf .carry/core.tar.gz -C "$staging" python
rm -rf "$staging"
ls -la .carry/core.tar.gz
