#!/usr/bin/env bash
# GPU machine entry point (one call of the device tool does it all): rebuild the thin Python
# binding against the prebuilt core carried from the LLVM machine, then run the GPU tests,
# the tutorial and the benchmarks. Results go to $OUT (or ./gpu-results) when set.
#
# Carried: .carry/core.tar.gz holding python/tessera/_lib/libtessera_core.so (scripts/pack_core.sh).
# Everything at once takes longer than one 10-minute device call (the tests take about 3 minutes,
# tutorial 06 autotunes and benchmarks 16 cases): split it with TUTORIALS=" " / BENCHMARKS=" "
# (or lists of files), GPU_TESTS (test paths, default tests/gpu) and PYTEST_ARGS, e.g.
# BENCHMARKS=" " TUTORIALS=" " for the tests alone.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python TESSERA_CACHE_DIR=${TESSERA_CACHE_DIR:-/tmp/tessera-cache}

if [ -f .carry/core.tar.gz ]; then tar xzf .carry/core.tar.gz; fi
[ -f python/tessera/_lib/libtessera_core.so ] || { echo "no prebuilt core: run scripts/pack_core.sh"; exit 2; }
cmake -S . -B build-gpu -DTESSERA_BUILD_CORE=OFF -DTESSERA_PREBUILT_CORE=$PWD/python/tessera/_lib \
      -DTESSERA_BUILD_TESTS=OFF >/dev/null && cmake --build build-gpu -j 16 >/dev/null || exit 3
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

status=0
step() { echo; echo "=== $*"; "$@" || status=1; }
step python3 -m pytest -q -rs ${GPU_TESTS:-tests/gpu} ${PYTEST_ARGS:-}
for t in ${TUTORIALS:-tutorials/[0-9]*.py}; do step python3 "$t"; done
for b in ${BENCHMARKS:-benchmarks/*.py}; do
  extra=()  # attention.py's full sweeps outlast one device call: --quick here (its docstring)
  case $b in *attention.py) extra=(--quick --plot "$OUT/attention.png");; esac
  step python3 "$b" --json "$OUT/$(basename "$b" .py).json" "${extra[@]}"
done
exit $status
