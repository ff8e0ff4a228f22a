#!/usr/bin/env bash
# hostile_search.sh — a three-minute kevo run whose pattern library holds the hostile
# candidates of tests/hostile/ that attack the archive, the disk, the supervisor and the
# driver, as allreduce seeds beside the real ones (issue 14's "done" run). Afterwards it
# checks that the run ended normally, that the archive opens and lists its programs, that
# each hostile seed got the verdict its file expects ("// expect:", bench/hostile_verdicts.py)
# and none is a size's best (nor an elite, when it games the results),
# that the worker logs stayed within their cap, that snapshots were taken, that nothing wrote
# ESCAPED, and that no process of the workers' uids is left.
#
#   bench/hostile_search.sh BUILD_DIR RUN_DIR [--check-only]
#     --check-only   only the checks, on a run directory an earlier call left
set -uo pipefail
build=${1:?usage: hostile_search.sh BUILD_DIR RUN_DIR}
run=${2:?usage: hostile_search.sh BUILD_DIR RUN_DIR}
src=$(cd "$(dirname "$0")/.." && pwd)
kevo=$build/kevo
hostile=(parent_fds run_dir flood_output printf_loop kill_parent thread_bomb fork_bomb
         fill_scratch driver_entry_point multicast_elf_walk secret_env net_connect proc_mem
         raw_syscall memo_sample memo_hash memo_stash memo_pointer memo_count)

# KEVO_HOME: the source tree, with a pattern library that also holds the hostile seeds
home=$(mktemp -d /tmp/kevo-hostile-home.XXXXXX)
trap 'rm -rf "$home"' EXIT
for d in include problems docs; do ln -s "$src/$d" "$home/$d"; done
cp -r "$src/patterns" "$home/patterns"
# Each gets a kernel of its own, never launched: most of them differ from each other only in
# host code, and the search would otherwise skip all but the first as the same SASS.
# A seed is one file: a header beside the hostile goes in place of its #include (hostile_flatten.sh).
for h in "${hostile[@]}"; do
  { "$src/bench/hostile_flatten.sh" "$src/tests/hostile/$h.cu"
    echo "__global__ void hostile_seed_$h(int *p) { if (p) *p = ${#h}; }"
    echo "// kevo:pattern problem=allreduce transport=sm fusion=unfused"; } \
    >"$home/patterns/allreduce/hostile_$h.cu"
done

status=0
if [ "${3:-}" != --check-only ]; then
  rm -rf "$run"
  start=$(date +%s)
  KEVO_HOME=$home "$kevo" run --config "$src/configs/hostile-search.json" --run "$run" \
    >"$run.out" 2>&1
  rc=$?
  end=$(date +%s)
  echo "kevo run: exit $rc after $((end - start)) s"
  tail -4 "$run.out"
  [ "$rc" = 0 ] || status=1
fi

if ! "$kevo" archive stats --run "$run" >"$run.stats" 2>&1; then
  echo "FAIL: kevo archive stats: $(head -3 "$run.stats")"; status=1
else
  head -12 "$run.stats"
fi
"$kevo" archive attempts --run "$run" --json >"$run.attempts" 2>&1 || {
  echo "FAIL: kevo archive attempts"; status=1; }
# attempts of each hostile seed's program, by stage and verdict; a seed whose verdict is not
# the one its file expects fails the run, named
# none of them may be a size's best, nor an elite when it games the results
"$kevo" archive show allreduce --run "$run" --json >"$run.elites" 2>&1 || {
  echo "FAIL: kevo archive show"; status=1; }
"$kevo" archive best allreduce --per-size --run "$run" --json >"$run.bests" 2>&1 || {
  echo "FAIL: kevo archive best --per-size"; status=1; }
python3 "$src/bench/hostile_verdicts.py" "$run.attempts" "$src/tests/hostile" \
  --elites "$run.elites" --bests "$run.bests" "${hostile[@]}" || status=1
logs=$(du -sb "$run/logs" | cut -f1)
log_mib=64
echo "worker logs: $logs bytes in $(ls "$run/logs" | wc -l) files (bound: 2 x ${log_mib} MiB a worker)"
for f in "$run"/logs/worker-*; do
  [ "$(stat -c %s "$f")" -le $((log_mib << 20)) ] || { echo "FAIL: $f over ${log_mib} MiB"; status=1; }
done
echo "cut marks in the logs: $(cat "$run"/logs/worker-* | grep -c 'bytes of output cut here')"
if grep -l ESCAPED "$run"/logs/worker-* 2>/dev/null; then
  echo "FAIL: a hostile seed says ESCAPED"; status=1
fi
echo "snapshots: $(ls "$run/snapshots" 2>/dev/null | tr '\n' ' ')"
[ -n "$(ls "$run/snapshots" 2>/dev/null)" ] || { echo "FAIL: no snapshot"; status=1; }
left=$(ps -eo uid= | awk '$1 >= 61000 && $1 < 61100' | wc -l)
echo "processes of the workers' uids left: $left"
[ "$left" = 0 ] || status=1
[ -e /tmp/kevo-fake-escaped ] && { echo "FAIL: a file escaped to /tmp"; status=1; }
exit $status
