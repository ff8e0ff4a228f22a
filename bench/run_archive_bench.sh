#!/usr/bin/env bash
# run_archive_bench.sh — builds and runs the archive benchmark (docs/results.md,
# "Archive (CPU)"): a batch-size sweep on a smaller archive, the full run
# (1,000,000 programs, 100,000 elite offers), then the latency of
# `kevo archive show PROBLEM` on the full archive.
#
#   bench/run_archive_bench.sh [options]
#   bench/run_archive_bench.sh --show-only RUN_DIR [--kevo PATH] [--show-wait S]
#
# options:
#   --programs N     programs in the full run (default 1000000)
#   --offers N       elite offers in the full run (default 100000)
#   --batch N        operations per write transaction in the full run (default 1000)
#   --sweep-programs N  programs per sweep run (default 100000; 0 skips the sweep)
#   --sweep-batches "B1 B2 ..."  batch sizes of the sweep (default "10 100 1000 10000");
#                    the sweep also times 2000 single-program transactions (batch 1)
#   --show-runs N    timed runs of `kevo archive show` (default 200)
#   --show-wait S    if `kevo archive show` does not exist yet, rebuild and retry
#                    every 120 s for up to S seconds (default 0: do not wait)
#   --kevo PATH      the kevo binary (default: build-bench/kevo, else build/kevo)
#   --tmp DIR        where the archives go (default $TMPDIR, else /var/tmp: local
#                    disk, and out of the way of /tmp clean-ups; the full run
#                    needs about 6 GB free)
#   --keep           keep the full run's archive (always kept when the show step
#                    could not run, so that --show-only can time it later)
#   --no-build       use the binaries already built
#
# The build is `cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release`
# and ninja. Output: the benchmark's tables and BENCH lines, then a summary of
# the figures against the targets.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

programs=1000000 offers=100000 batch=1000
sweep_programs=100000 sweep_batches="10 100 1000 10000"
show_runs=200 show_wait=0 kevo="" tmp="${TMPDIR:-/var/tmp}" keep=0 build=1 show_only=""
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --programs) programs=$2; shift ;;
    --offers) offers=$2; shift ;;
    --batch) batch=$2; shift ;;
    --sweep-programs) sweep_programs=$2; shift ;;
    --sweep-batches) sweep_batches=$2; shift ;;
    --show-runs) show_runs=$2; shift ;;
    --show-wait) show_wait=$2; shift ;;
    --kevo) kevo=$2; shift ;;
    --tmp) tmp=$2; shift ;;
    --keep) keep=1 ;;
    --no-build) build=0 ;;
    --show-only) show_only=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_archive_bench.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

bdir=build-bench
bench=$bdir/bench/archive_bench

# ---- build ----------------------------------------------------------------------
build_all() {
  mkdir -p "$bdir"
  if ! cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$bdir/cmake.log" 2>&1 ||
     ! ninja -C "$bdir" archive_bench kevo >"$bdir/ninja.log" 2>&1; then
    echo "build failed: see $bdir/cmake.log and $bdir/ninja.log" >&2
    exit 1
  fi
  echo "build: $bench and $bdir/kevo (cmake, Release)"
}

build_kevo() {
  ninja -C "$bdir" kevo >"$bdir/ninja.log" 2>&1
}

find_kevo() {
  if [ -n "$kevo" ]; then echo "$kevo"
  elif [ -x "$bdir/kevo" ]; then echo "$root/$bdir/kevo"
  else echo "$root/build/kevo"; fi
}

show_works() { [ -x "$1" ] && "$1" archive show --help >/dev/null 2>&1; }

# ---- the show step (also run alone with --show-only) -------------------------
# Times `kevo archive --run DIR show PROBLEM` with archive_bench --exec-times
# (fork/exec, wall clock, output to /dev/null). Returns 3 when the subcommand
# is not there.
show_step() {
  local run=$1 k waited=0
  k=$(find_kevo)
  while ! show_works "$k"; do
    if [ "$waited" -ge "$show_wait" ]; then
      echo "show: '$k archive show --help' does not work yet; the archive is kept in $run."
      echo "show: time it later with: bench/run_archive_bench.sh --show-only $run"
      return 3
    fi
    echo "show: '$k archive show' not available yet; retrying in 120 s ($waited/$show_wait s waited)"
    sleep 120
    waited=$((waited + 120))
    [ "$build" = 1 ] && build_kevo || true
    k=$(find_kevo)
  done
  echo "== kevo archive show on $run ($k)"
  local problem=allreduce
  "$k" archive --run "$run" show "$problem" >"$tmp/kevo-show-output.txt" 2>&1 || {
    echo "show: '$k archive --run $run show $problem' failed:"; cat "$tmp/kevo-show-output.txt"; return 1; }
  echo "output: $(wc -l <"$tmp/kevo-show-output.txt") lines, $(wc -c <"$tmp/kevo-show-output.txt") bytes; first lines:"
  head -n 15 "$tmp/kevo-show-output.txt" | sed 's/^/  | /'
  rm -f "$tmp/kevo-show-output.txt"
  echo "-- first run after the benchmark (file in the page cache):"
  "$bench" --exec-times 1 --warmup 0 -- "$k" archive --run "$run" show "$problem" | sed 's/^BENCH exec_/BENCH show_first_/'
  echo "-- $show_runs runs:"
  "$bench" --exec-times "$show_runs" --warmup 3 -- "$k" archive --run "$run" show "$problem" |
    sed 's/^BENCH exec_/BENCH show_/'
  echo "-- $show_runs runs of the --json form:"
  "$bench" --exec-times "$show_runs" --warmup 3 -- "$k" archive --run "$run" show "$problem" --json |
    sed 's/^BENCH exec_/BENCH show_json_/'
  echo "-- for scale, $show_runs runs of 'kevo --version' (process start alone):"
  "$bench" --exec-times "$show_runs" --warmup 3 -- "$k" --version | sed 's/^BENCH exec_/BENCH version_/'
}

if [ -n "$show_only" ]; then
  [ "$build" = 1 ] && { [ -x "$bench" ] || build_all; build_kevo || true; }
  show_step "$show_only"
  exit $?
fi

[ "$build" = 1 ] && build_all
[ -x "$bench" ] || { echo "no $bench: build first" >&2; exit 1; }

# ---- disk space ----------------------------------------------------------------
mkdir -p "$tmp"
need_kb=$(( programs * 6 + 1000000 ))   # ~4.5 KiB of archive per program, plus slack
avail_kb=$(df -Pk "$tmp" | awk 'NR==2 {print $4}')
echo "disk: $((avail_kb / 1024)) MiB free under $tmp ($(df -P "$tmp" | awk 'NR==2 {print $1}')); the full run needs about $((need_kb / 1024)) MiB"
if [ "$avail_kb" -lt "$need_kb" ]; then
  echo "run_archive_bench.sh: not enough free space under $tmp (use --tmp DIR)" >&2
  exit 1
fi
work=$(mktemp -d "$tmp/kevo-archive-bench-XXXXXX")
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD -- archive common bench 2>/dev/null || echo ' (archive/, common/ or bench/ modified)')"
# Timings depend on what else runs: say how busy the machine was.
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- batch-size sweep ------------------------------------------------------------
sweep_log="$work/sweep.txt"
: >"$sweep_log"
if [ "$sweep_programs" -gt 0 ]; then
  echo "== sweep: 2000 programs, batch 1 (one transaction, with its fsync, per program)"
  "$bench" --programs 2000 --offers 2000 --attempts 0 --no-results --batch 1 --dir "$work/sweep-1" |
    grep -E '^(programs|offers) |^BENCH (programs|offers)_(per_s|batch_p50_ms|batch_p99_ms)' |
    sed "s/^BENCH /BENCH sweep_b1_/" | tee -a "$sweep_log"
  for b in $sweep_batches; do
    echo "== sweep: $sweep_programs programs, batch $b"
    "$bench" --programs "$sweep_programs" --offers $((sweep_programs / 10)) --attempts 0 \
      --no-results --batch "$b" --dir "$work/sweep-$b" |
      grep -E '^(programs|offers) |^BENCH (programs|offers)_(per_s|batch_p50_ms|batch_p99_ms)' |
      sed "s/^BENCH /BENCH sweep_b${b}_/" | tee -a "$sweep_log"
  done
fi

# ---- the full run ----------------------------------------------------------------
echo "== full run: $programs programs, $offers elite offers, batch $batch"
full_log="$work/full.txt"
"$bench" --programs "$programs" --offers "$offers" --batch "$batch" --dir "$work/run" --keep |
  tee "$full_log"

# ---- kevo archive show -------------------------------------------------------------
show_rc=0
show_step "$work/run" | tee "$work/show.txt" || show_rc=$?
if [ "$show_rc" = 3 ]; then keep=1; fi

# ---- summary ------------------------------------------------------------------------
val() {
  awk -v k="$1" '$1 == "BENCH" && $2 == k {print $3}' "$full_log" "$work/show.txt" "$sweep_log" |
    tail -n1
}
echo "== summary (targets: >= 20000 inserts/s; show p99 < 50 ms; archive <= 1.5x raw)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %s (%s bytes written to archive.mdb per program, CPU busy %s)\n' \
  "program inserts/s (batch $batch)" "$(val programs_per_s)" "$(val programs_write_bytes_per_op)" \
  "$(val programs_cpu_fraction)"
for b in 1 $sweep_batches; do
  [ -n "$(val sweep_b${b}_programs_per_s)" ] || continue
  n=$sweep_programs; [ "$b" = 1 ] && n=2000
  printf '%-34s %s (transaction p50 %s ms, p99 %s ms)\n' "  inserts/s, batch $b, $n programs" \
    "$(val sweep_b${b}_programs_per_s)" "$(val sweep_b${b}_programs_batch_p50_ms)" \
    "$(val sweep_b${b}_programs_batch_p99_ms)"
done
printf '%-34s %s\n' "elite offers/s" "$(val offers_per_s)"
printf '%-34s %s\n' "results/s, attempts/s" "$(val results_per_s), $(val attempts_per_s)"
printf '%-34s %s / %s us\n' "kv_top_k(10) p50 / p99" "$(val top_k_p50_us)" "$(val top_k_p99_us)"
printf '%-34s %s / %s us\n' "open (writer) p50 / p99" "$(val open_writer_p50_us)" "$(val open_writer_p99_us)"
printf '%-34s %s bytes raw, %s st_size (%sx), %s allocated (%sx)\n' "size" \
  "$(val raw_source_bytes)" "$(val archive_st_size_bytes)" "$(val archive_size_ratio)" \
  "$(val archive_allocated_bytes)" "$(val archive_allocated_ratio)"
if [ -n "$(val show_p99_ms)" ]; then
  printf '%-34s %s / %s ms\n' "kevo archive show p50 / p99" "$(val show_p50_ms)" "$(val show_p99_ms)"
else
  printf '%-34s %s\n' "kevo archive show" "not measured (see above)"
fi
[ "$keep" = 1 ] && echo "archive kept in $work/run"
exit 0
