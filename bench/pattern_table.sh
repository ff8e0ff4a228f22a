#!/usr/bin/env bash
# pattern_table.sh — the pattern library against NCCL on this machine's GPUs:
# `kevo seed` (full protocol) for every problem that has seeds, or for the
# problems named, into a fresh run directory. Prints, per seed, its verdict,
# measured cell and per-size times beside the reference, and per problem the
# best seed at every size with its speedup and fraction of roofline: the
# table docs/results.md records.
#
#   bench/pattern_table.sh [BUILD_DIR] [PROBLEM...]     (BUILD_DIR default: build)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
kevo="$build/kevo"
run=$(mktemp -d /tmp/kevo-seed-run.XXXXXX)
world=${KEVO_GPU_TEST_WORLD:-2}
status=0
if [ $# -eq 0 ]; then
  "$kevo" seed --run "$run" --world "$world" --timeout 60 || status=$?
else
  for p in "$@"; do
    "$kevo" seed --run "$run" --world "$world" --timeout 60 --problem "$p" || status=$?
  done
fi
echo "== archive"
"$kevo" archive list --run "$run"
exit $status
