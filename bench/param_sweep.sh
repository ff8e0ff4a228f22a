#!/usr/bin/env bash
# param_sweep.sh — one seed of the pattern library with one of its tunable
# parameters set to each value given, every variant timed against NCCL with
# `kevo eval` (full protocol, the reference timed beside it in the same job):
# how a parameter moves the times, size by size, before the search tunes it.
#
#   bench/param_sweep.sh BUILD_DIR PATTERN_FILE PARAM VALUE...
#   e.g. bench/param_sweep.sh build-gpu patterns/alltoall/pull_sm.cu LOCAL_SHARE 0 6 12 25
#
# The problem is the seed's directory name; W is $KEVO_GPU_TEST_WORLD (default 2).
set -uo pipefail
[ $# -ge 4 ] || { echo "usage: param_sweep.sh BUILD_DIR PATTERN_FILE PARAM VALUE..." >&2; exit 2; }
build=$1 seed=$2 param=$3
shift 3
problem=$(basename "$(dirname "$seed")")
grep -q "^#define $param " "$seed" || { echo "param_sweep: $seed has no #define $param" >&2; exit 2; }
dir=$(mktemp -d /tmp/kevo-sweep.XXXXXX)
trap 'rm -rf "$dir"' EXIT
status=0
for v in "$@"; do
  variant="$dir/$(basename "$seed" .cu)-$param-$v.cu"
  # the #define line only: the annotation keeps its default, as a template child does
  sed "s/^#define $param .*/#define $param $v/" "$seed" >"$variant"
  echo "== $problem $(basename "$seed") $param=$v"
  "$build/kevo" eval --problem "$problem" --world "${KEVO_GPU_TEST_WORLD:-2}" --timeout 60 \
    "$variant" 2>&1 | grep -v '^evidence' || status=1
done
exit $status
