#!/usr/bin/env bash
# The compiler core of another commit, carried beside the package for a same-run A/B on the GPU
# machine (scripts/gpu_ab.sh): a compiler change is measured against the code before it in one
# device call, each variant in its own processes, alternating, against the same anchors.
#
#   scripts/pack_core.sh              # the package of HEAD (.carry/tessera-*.tar.gz)
#   scripts/pack_baseline.sh main     # + the core of `main` (.carry/baseline/)
#   device tool: scripts/gpu_ab.sh python3 benchmarks/attention.py --quick    carry [".carry"]
#
# Only libtessera_core.so differs between the two variants (the binding and the Python package
# are HEAD's), so REF must differ from HEAD in the core's sources alone, with the binding's
# interface unchanged: the script refuses when cpp/bindings/ or cpp/runtime/ differ. It builds
# REF in the same build folder (a checkout of REF, an incremental build, the checkout back and a
# rebuild: seconds when REF is near HEAD); the tree must be clean.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:?usage: scripts/pack_baseline.sh REF}
BUILD_DIR=${BUILD_DIR:-build}
[ -z "$(git status --porcelain --untracked-files=no)" ] || {
  echo "pack_baseline.sh: commit or stash first (it checks out $ref)" >&2; exit 2; }
if ! git diff --quiet "$ref" HEAD -- cpp/bindings cpp/runtime; then
  echo "pack_baseline.sh: $ref and HEAD differ in cpp/bindings or cpp/runtime: HEAD's binding" \
       "would load a core of another interface" >&2
  exit 2
fi
head=$(git symbolic-ref -q --short HEAD || git rev-parse HEAD)
sha=$(git rev-parse --short "$ref")
trap 'git checkout -q "$head" && make build BUILD_DIR="$BUILD_DIR" >/dev/null' EXIT
git checkout -q "$ref"
make build BUILD_DIR="$BUILD_DIR" >/dev/null
rm -rf .carry/baseline && mkdir -p .carry/baseline
strip --strip-unneeded -o .carry/baseline/libtessera_core.so "$BUILD_DIR/lib/libtessera_core.so"
gzip -f .carry/baseline/libtessera_core.so
echo "$sha $ref" > .carry/baseline/REF
echo "baseline core of $ref ($sha): .carry/baseline/libtessera_core.so.gz"
