#!/usr/bin/env bash
# memo_check.sh — the memoizing hostiles (tests/hostile/memo_*.cu) against the honest one-shot
# all-reduce they are built on (tests/candidates/allreduce_oneshot_sm.cu), through kevo eval at
# the full protocol: each one's verdict and, per size, its time and speedup over NCCL. A
# memoizing candidate that profits from remembering shows a time far below the honest one's.
#
#   bench/memo_check.sh BUILD_DIR [--timing graph|call] [--sizes a,b]
# BUILD_DIR holds kevo and kevo-worker (another tree's build works too: the hostiles are read
# from this tree). Prints one block per candidate; exit 0.
set -uo pipefail
build=${1:?usage: memo_check.sh BUILD_DIR [--timing MODE] [--sizes a,b]}
shift
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/kevo-memo.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# a candidate is one file: the hostiles' shared header goes in place of its #include
for f in "$src"/tests/hostile/memo_*.cu; do
  "$src/bench/hostile_flatten.sh" "$f" >"$tmp/$(basename "$f")"
done
cp "$src/tests/candidates/allreduce_oneshot_sm.cu" "$tmp/"
for f in "$tmp/allreduce_oneshot_sm.cu" "$tmp"/memo_*.cu; do
  echo "== $(basename "$f")"
  (cd "$src" && "$build/kevo" eval --problem allreduce "$@" "$f" 2>&1) |
    grep -v "^evidence"
done
exit 0
