#!/usr/bin/env bash
# Packs the built core library (stripped) into .carry/core.tar.gz for the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
make build >/dev/null
mkdir -p .carry
strip --strip-unneeded python/tessera/_lib/libtessera_core.so
tar czf .carry/core.tar.gz python/tessera/_lib/libtessera_core.so
ls -la .carry/core.tar.gz
