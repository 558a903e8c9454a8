#!/usr/bin/env bash
# GPU machine entry point (one call of the device tool does it all): pip-install Tessera from the
# artifact carried from the LLVM machine, then run the GPU tests, the tutorials and the
# benchmarks against the installed package (no PYTHONPATH). Results go to $OUT (or ./gpu-results).
#
# The artifact: on the LLVM machine run `scripts/pack_core.sh`, which writes
# .carry/tessera-<version>.tar.gz (the sdist plus the prebuilt core, ~19 MB); pass carry=[".carry"]
# to the device tool. Here `pip install --no-index --no-build-isolation` of it builds only the
# binding and tessera-opt for this machine's Python (no LLVM, no registry) and installs them.
#
# Everything at once takes longer than one 10-minute device call (the tests take about 3 minutes,
# tutorial 06 autotunes and benchmarks 16 cases): split it with TUTORIALS=" " / BENCHMARKS=" "
# (or lists of files), GPU_TESTS (test paths, default tests/gpu) and PYTEST_ARGS, e.g.
# BENCHMARKS=" " TUTORIALS=" " for the tests alone. Device tool calls, after pack_core.sh here:
#   command: BENCHMARKS=" " TUTORIALS=" " scripts/gpu.sh      carry: [".carry"]
#   command: GPU_TESTS=" " BENCHMARKS=" " scripts/gpu.sh      carry: [".carry"]   (tutorials)
#   command: GPU_TESTS=" " TUTORIALS=" " scripts/gpu.sh       carry: [".carry"]   (benchmarks)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-results}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
unset PYTHONPATH
export PYTHONUNBUFFERED=1 TESSERA_CACHE_DIR=${TESSERA_CACHE_DIR:-/tmp/tessera-cache}

artifact=$(ls -t .carry/tessera-*.tar.gz 2>/dev/null | head -1)
[ -n "$artifact" ] || { echo "no .carry/tessera-*.tar.gz: run scripts/pack_core.sh, carry .carry"; exit 2; }
"$PYTHON" -m pip uninstall -y -q tessera >/dev/null 2>&1  # a warm machine may hold an older one
"$PYTHON" -m pip install --no-index --no-build-isolation "$artifact" >"$OUT/install.log" 2>&1 ||
  { tail -40 "$OUT/install.log"; exit 3; }
(cd / && "$PYTHON" -c "import tessera; print('tessera', tessera.__version__, 'at', tessera.__file__)") || exit 3
# Notebook test dependencies carried as wheels (pack_core.sh), where the machine lacks them.
if [ -d .carry/wheels ]; then
  "$PYTHON" -m pip install -q --no-index --find-links .carry/wheels nbclient nbformat ipykernel \
      >>"$OUT/install.log" 2>&1 || echo "notebook wheels did not install (tests/gpu/test_notebook.py skips)"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

status=0
step() { echo; echo "=== $*"; "$@" || status=1; }
# From the checkout's root python/ is not on the path: the tests import the installed package.
gpu_tests=${GPU_TESTS:-tests/gpu}
# Eight workers share the card (the suite takes minutes, not the 20 of a serial run); tests that
# need most of its memory carry one xdist_group mark and so run one after another on one worker.
[ -z "${gpu_tests// }" ] || step "$PYTHON" -m pytest -q -rs $gpu_tests \
    ${PYTEST_ARGS:--n 8 --dist loadgroup --durations=25}
for t in ${TUTORIALS:-tutorials/[0-9]*.py}; do step "$PYTHON" "$t"; done
for b in ${BENCHMARKS:-benchmarks/*.py}; do
  extra=()  # attention.py's full sweeps outlast one device call: --quick here (its docstring)
  case $b in *attention.py) extra=(--quick --plot "$OUT/attention.png");; esac
  step "$PYTHON" "$b" --json "$OUT/$(basename "$b" .py).json" "${extra[@]}"
done
exit $status
