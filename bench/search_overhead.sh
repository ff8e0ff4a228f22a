#!/usr/bin/env bash
# search_overhead.sh — the coordinator's own CPU use: the search loop
# (tests/support/search_driver: the real loop, archive, pattern library and template
# mutator, with the fake evaluator standing in for GPU groups) with G groups
# whose tasks take T ms each. Prints evaluations, wall and CPU seconds and the
# cores the coordinator used (CPU / wall); the target is at most one core
# with 4 groups at real task lengths (seconds), so short tasks overstate it.
#
#   bench/search_overhead.sh [BUILD_DIR] [GROUPS] [TASK_MS] [EVALUATIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
groups=${2:-4}
task_ms=${3:-100}
evals=${4:-400}
run=$(mktemp -d /tmp/kevo-search-bench.XXXXXX)
trap 'rm -rf "$run"' EXIT
line=$(KEVO_SOURCE_DIR=$PWD "$build/tests/search_driver" "$run" 1 "$evals" "$task_ms" "$groups" 4)
done_evals=$(sed -n 's/.*evaluations=\([0-9]*\).*/\1/p' <<<"$line")
cpu=$(sed -n 's/.*cpu_s=\([0-9.]*\).*/\1/p' <<<"$line")
wall=$(sed -n 's/.*wall_s=\([0-9.]*\).*/\1/p' <<<"$line")
awk -v g="$groups" -v t="$task_ms" -v n="$done_evals" -v c="$cpu" -v w="$wall" 'BEGIN {
  printf "groups %d, task %g ms, %d evaluations: wall %.2f s, coordinator CPU %.2f s = %.3f cores; ideal wall %.2f s (groups busy %.0f%%)\n",
         g, t, n, w, c, c / w, n * t / 1000 / g, 100 * (n * t / 1000 / g) / w }'
