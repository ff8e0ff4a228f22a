#!/usr/bin/env bash
# search_quality.sh — the replay of the schedule benchmark (docs/schedules.md,
# "The schedule benchmark"), on the CPU: bench/search_quality over a table of
# measured schedules, 20 seeds, budgets 50, 150 and 500 evaluations; the
# report (markdown), the anytime curves (CSV) and the per-run lines (TSV)
# into OUTDIR (default build-bench/search_quality/).
#   bench/search_quality.sh [TABLE] [--outdir DIR] [search_quality options]
# TABLE: default the newest bench/data/schedules-*.tsv, else the synthetic
# fixture tests/fixtures/schedules-synthetic.tsv (said so).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-bench}
table="" outdir=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --outdir) outdir=$2; shift 2 ;;
    *.tsv) table=$1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ -z "$table" ]; then
  table=$(ls -t bench/data/schedules-*.tsv 2>/dev/null | head -1 || true)
  if [ -z "$table" ]; then
    table=tests/fixtures/schedules-synthetic.tsv
    echo "search_quality: no bench/data/schedules-*.tsv yet: replaying the SYNTHETIC fixture $table" >&2
  fi
fi
if [ ! -d "$build" ]; then
  cmake -S . -B "$build" -G Ninja -DKEVO_WERROR=ON >/dev/null
fi
cmake --build "$build" --target search_quality >/dev/null
outdir=${outdir:-$build/search_quality}
mkdir -p "$outdir"
name=$(basename "$table" .tsv)
"$build/bench/search_quality" "$table" --seeds 20 --budgets 50,150,500 \
  -o "$outdir/$name.md" --curves "$outdir/$name-curves.csv" --runs "$outdir/$name-runs.tsv" \
  ${args[@]+"${args[@]}"}
grep -E '^\*\*|^Verdict' "$outdir/$name.md"
echo "search_quality: $outdir/$name.md, $outdir/$name-curves.csv, $outdir/$name-runs.tsv" >&2
