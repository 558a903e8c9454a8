#!/usr/bin/env bash
# GPU machine: a same-run A/B of two compiler cores (scripts/pack_baseline.sh says how to carry
# them). Installs the carried package (variant B, the checkout's HEAD), copies it with the
# baseline core swapped in (variant A, .carry/baseline/), then runs the command given for each
# variant in turn, AB_ROUNDS times (default 2), B first in odd rounds and A first in even ones:
# each run in a fresh process with its own kernel cache (/tmp/ab-cache-A, -B), every output
# line prefixed "A| " or "B| ". Ratios the command prints against its own anchors (cuDNN,
# cuBLAS, Triton) compare across variants; raw times drift with the card's clocks.
#
#   scripts/gpu_ab.sh python3 benchmarks/attention.py --quick --sweep fa3
#   scripts/gpu_ab.sh python3 scripts/ptxas_notes.py --only masked   # runs without a GPU too
# (checked on the CPU machine with PYTHON=<a fresh venv>: A = a7e06e4 reported ptxas's C7517 in
# the masked dK/dV kernels, B = the wgmma order mark after it none.)
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: scripts/gpu_ab.sh COMMAND..." >&2; exit 2; }
[ -f .carry/baseline/libtessera_core.so.gz ] || {
  echo "no .carry/baseline/libtessera_core.so.gz: run scripts/pack_baseline.sh REF here" >&2
  exit 2; }
PYTHON=${PYTHON:-python3}
BENCHMARKS=" " TUTORIALS=" " GPU_TESTS=" " scripts/gpu.sh | tail -1 || exit 3
pkg=$(cd / && "$PYTHON" -c "import os, tessera; print(os.path.dirname(tessera.__file__))")
core=$(find "$pkg" -name 'libtessera_core.so*' | head -1)
[ -n "$core" ] || { echo "gpu_ab.sh: no libtessera_core.so in $pkg" >&2; exit 3; }
base=/tmp/ab-baseline
rm -rf "$base" && mkdir -p "$base" && cp -r "$pkg" "$base/"
gunzip -c .carry/baseline/libtessera_core.so.gz > "$base/tessera/${core#"$pkg"/}"
# The binding finds the core next to it (its RUNPATH): the copy loads the swapped one, which
# the build ids below confirm (equal ids: the copy did not load, or the cores are the same).
build_id() { "$PYTHON" -c "from tessera.runtime import launcher; print(launcher.compiler_build_id())"; }
a_id=$(cd / && PYTHONPATH="$base" build_id) b_id=$(cd / && unset PYTHONPATH && build_id)
[ "$a_id" != "$b_id" ] || { echo "gpu_ab.sh: both variants report compiler $a_id" >&2; exit 3; }
echo "A = $(cat .carry/baseline/REF) (compiler $a_id), B = the carried package ($b_id)"
run() {  # run VARIANT COMMAND...
  local variant=$1; shift
  if [ "$variant" = A ]; then
    PYTHONPATH="$base" TESSERA_CACHE_DIR=/tmp/ab-cache-A "$@" 2>&1 | sed "s/^/A| /"
  else
    env -u PYTHONPATH TESSERA_CACHE_DIR=/tmp/ab-cache-B "$@" 2>&1 | sed "s/^/B| /"
  fi
}
for ((round = 1; round <= ${AB_ROUNDS:-2}; round++)); do
  if ((round % 2)); then order="B A"; else order="A B"; fi
  for variant in $order; do echo "--- round $round, $variant"; run "$variant" "$@"; done
done
