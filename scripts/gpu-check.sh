#!/usr/bin/env bash
# gpu-check.sh — the one script run on a GPU machine: builds kevo there
# (against that machine's CUDA and NCCL; LMDB/cJSON from carried packages in
# .deps when the machine cannot install them), then runs the steps named on
# the command line. Everything printed also goes to $OUT/run.log (the device
# tool's output folder, or ./gpu-out); the build logs, worker logs and
# per-step files are packed into $OUT/logs.tgz (the tool returns few files);
# the GPU tests' full output goes straight to $OUT, so it survives a time limit.
#
#   scripts/gpu-check.sh [smoke] [full] [tests] [references] [selfcheck] [problems-check] [offsets] [baseline] [bench] [floor] [overlap] [seed] [graph]
#                        [export] [search-start] [search-resume] [hostile-search] [confine]
#     smoke       kevo doctor, kevo baseline --screen, kevo eval --screen of tests/candidates
#     full        the same evaluations with the full protocol (500 warm-up, 100 timed)
#     tests       tests/gpu/test_gpu_eval (the correct candidates and every hostile one)
#     references  tests/gpu/test_gpu_references: every problem's reference against
#                 its float64 host computation
#     selfcheck   tests/gpu/test_gpu_selfcheck: every reference against itself on shifted
#                 plain memory, and a reference wrong on purpose
#     problems-check  kevo problems check of every problem at W=$KEVO_GPU_TEST_WORLD (--no-cache), of
#                 tests/gpu_problems/nccl_misaligned, of wrong_reference (must fail) and of
#                 inflated_cost (must fail: the reference beats the floor of its cost model)
#     offsets     bench/nccl_offsets: NCCL's collectives on the window at shifted offsets
#                 against plain memory and the host (every failure in $OUT/nccl-offsets.csv)
#     baseline    kevo baseline for every problem (full protocol) at W=$KEVO_GPU_TEST_WORLD
#                 (default 2; the GPU tests read the same variable)
#     bench       bench/eval_bench: evaluations per hour, overhead, compile, restart
#     floor       bench/launch_floor: the timer's floor (empty kernels, barriers) at W
#     overlap     bench/link_overlap: NVLink throughput of copy engines and SMs together
#     search-start   kevo run --config $KEVO_SEARCH_CONFIG (default configs/quickstart.json)
#                    into build-gpu/quickstart-run, SIGKILLed after $KEVO_SEARCH_KILL_AFTER
#                    seconds (default 240)
#     search-resume  kevo run build-gpu/quickstart-run to the end of its budget, then
#                    bench/search_report.sh (the run directory stays in build-gpu/, which
#                    survives between calls on a warm machine)
#     search      kevo run --config $KEVO_SEARCH_CONFIG to the end of its budget, unkilled,
#                 into build-gpu/search-<config name>, then bench/search_report.sh
#     hostile-search  bench/hostile_search.sh: a 3-minute kevo run whose allreduce seeds include
#                 the hostile candidates that attack the archive, the disk and the supervisor
#     confine     tests/integration/test_confine and tests/integration/test_group (CPU tests: the confinement as
#                 this machine's kernel and root give it)
#     graph       bench/graph_check.sh: the replay hostiles, the candidates, the export test,
#                 every seed timed in $KEVO_TIMING (graph), the baselines in both timing modes,
#                 all in $OUT/graph-check.tgz
#     sched-sweep bench/schedule_sweep.sh: $KEVO_SWEEP_N (200) random schedules per collective
#                 ($KEVO_SWEEP_PROBLEMS), evaluated by kevo seed ($KEVO_SWEEP_SEED_OPTS, e.g.
#                 --screen), resumable in build-gpu/sched-sweep; the table into $OUT
#     seed        bench/pattern_table.sh: every seed of patterns/ against NCCL
#                 ($KEVO_SEED_PROBLEMS: only these, space-separated)
#     export      tests/gpu/test_gpu_export: the allreduce seeds measured, exported (kevo
#                 export), built with the export's CMake file, and called from a CUDA
#                 graph against ncclAllReduce (tests/gpu/export_app.cu)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/kevo-gpu-check.XXXXXX)
exec > >(tee -a "$out/run.log") 2>&1
prefix=/tmp/kevo-deps
log() { echo "== $(date +%T) $*"; }

if [ -d .deps ] && ! ls /usr/include/lmdb.h >/dev/null 2>&1; then
  scripts/gpu-deps.sh unpack .deps "$prefix" >/dev/null
fi
log "build"
if ! cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix/usr" \
     >"$work/cmake.log" 2>&1 || ! cmake --build build-gpu -j "$(nproc)" >"$work/build.log" 2>&1; then
  tail -n 60 "$work/cmake.log" "$work/build.log"
  exit 1
fi
export KEVO_CACHE_DIR=/tmp/kevo-cache
kevo=build-gpu/kevo
status=0

for step in "$@"; do
  case "$step" in
    smoke)
      log "doctor"; $kevo doctor 2>&1
      log "baseline allreduce (screening protocol)"
      $kevo baseline --problem allreduce --screen 2>&1 || status=1
      for c in tests/candidates/*.cu; do
        log "eval $c"
        $kevo eval --problem allreduce --screen --timeout 60 "$c" 2>&1 || status=1
      done
      ;;
    full)
      log "baseline allreduce (full protocol)"
      $kevo baseline --problem allreduce 2>&1 || status=1
      for c in tests/candidates/*.cu; do
        log "eval $c (full protocol)"
        $kevo eval --problem allreduce "$c" 2>&1 | grep -v '^evidence' || status=1
      done
      ;;
    tests)
      log "ctest -R test_gpu_eval"
      (cd build-gpu && ctest -R test_gpu_eval --output-on-failure -V) >"$out/ctest-gpu.txt" 2>&1 || status=1
      grep -E "(candidate|hostile) |    |passed|failed|FAIL" "$out/ctest-gpu.txt" | tail -80
      ;;
    export)
      log "ctest -R test_gpu_export"
      (cd build-gpu && ctest -R test_gpu_export --output-on-failure -V) >"$out/ctest-export.txt" 2>&1 || status=1
      sed 's/^[0-9]*: //' "$out/ctest-export.txt" | grep -vE "^(--|\[ *[0-9]+%\]|Building|Linking)" | tail -120
      ;;
    references)
      log "ctest -R test_gpu_references"
      (cd build-gpu && ctest -R test_gpu_references --output-on-failure -V) >"$out/ctest-refs.txt" 2>&1 || status=1
      grep -E "elements|passed|failed|FAIL|skipped" "$out/ctest-refs.txt" | sed 's/^[0-9]*: //' | tail -80
      ;;
    selfcheck)
      log "ctest -R test_gpu_selfcheck"
      (cd build-gpu && ctest -R test_gpu_selfcheck --output-on-failure -V) >"$out/ctest-selfcheck.txt" 2>&1 || status=1
      grep -E " W=[0-9] |does not agree|passed|failed|FAIL|skipped" "$out/ctest-selfcheck.txt" | sed 's/^[0-9]*: //' | tail -40
      ;;
    problems-check)
      W=${KEVO_GPU_TEST_WORLD:-2}
      for d in problems/*/; do
        n=$(basename "$d")
        log "kevo problems check $n --world $W --no-cache"
        $kevo problems check "$n" --world "$W" --no-cache 2>&1 || status=1
      done
      log "kevo problems check nccl_misaligned --world $W --no-cache (tests/gpu_problems)"
      KEVO_PROBLEMS=tests/gpu_problems $kevo problems check nccl_misaligned --world "$W" --no-cache \
        2>&1 || status=1
      log "kevo problems check wrong_reference --world $W --no-cache (wrong on purpose: must fail)"
      if KEVO_PROBLEMS=tests/gpu_problems $kevo problems check wrong_reference --world "$W" \
           --no-cache 2>&1; then
        echo "wrong_reference PASSED its check: that is wrong"
        status=1
      fi
      log "kevo problems check inflated_cost --world $W --no-cache (its cost model is wrong: must fail naming it)"
      KEVO_PROBLEMS=tests/gpu_problems $kevo problems check inflated_cost --world "$W" --no-cache \
        >"$work/inflated.txt" 2>&1
      rc=$?
      cat "$work/inflated.txt"
      if [ "$rc" -ne 1 ] || ! grep -q "the problem's cost model (problem.json, \"cost\") is wrong" \
           "$work/inflated.txt"; then
        echo "inflated_cost: expected exit 1 naming the cost model, got exit $rc"
        status=1
      fi
      log "kevo problems check allreduce --world $W (kept from above)"
      $kevo problems check allreduce --world "$W" 2>&1 || status=1
      ;;
    offsets)
      log "bench/nccl_offsets ${KEVO_GPU_TEST_WORLD:-2}: the sequence, then the sweep"
      build-gpu/bench/nccl_offsets "${KEVO_GPU_TEST_WORLD:-2}" sequence 2>&1
      NCCL_OFFSETS_CSV="$out/nccl-offsets.csv" build-gpu/bench/nccl_offsets "${KEVO_GPU_TEST_WORLD:-2}" \
        >"$out/nccl-offsets.txt" 2>&1
      grep -v '^FAIL' "$out/nccl-offsets.txt" | tail -30
      ;;
    baseline)
      for p in problems/*/; do
        p=$(basename "$p")
        log "baseline $p"
        $kevo baseline --problem "$p" --world "${KEVO_GPU_TEST_WORLD:-2}" 2>&1 || status=1
      done
      ;;
    seed)
      log "bench/pattern_table.sh ${KEVO_SEED_PROBLEMS:-}"
      # shellcheck disable=SC2086
      bench/pattern_table.sh build-gpu ${KEVO_SEED_PROBLEMS:-} 2>&1 | grep -v '^evidence' || status=1
      ;;
    floor)
      log "bench/launch_floor ${KEVO_GPU_TEST_WORLD:-2}"
      build-gpu/bench/launch_floor "${KEVO_GPU_TEST_WORLD:-2}" 2>&1 || status=1
      ;;
    overlap)
      log "bench/link_overlap 256"
      build-gpu/bench/link_overlap 256 2>&1 || status=1
      ;;
    search-start)
      qs=build-gpu/quickstart-run
      rm -rf "$qs"
      cfg=${KEVO_SEARCH_CONFIG:-configs/quickstart.json}
      log "kevo run --config $cfg (SIGKILL after ${KEVO_SEARCH_KILL_AFTER:-240} s)"
      $kevo run --config "$cfg" --run "$qs" >"$out/search-start.txt" 2>&1 &
      pid=$!
      sleep "${KEVO_SEARCH_KILL_AFTER:-240}"
      kill -9 "$pid"
      wait "$pid" 2>/dev/null
      sleep 5
      left=$(pgrep -f kevo-worker | wc -l)
      log "SIGKILLed the coordinator; kevo-worker processes left after 5 s: $left"
      pkill -9 -f kevo-worker 2>/dev/null || true
      tail -5 "$out/search-start.txt"
      bench/search_report.sh build-gpu "$qs" 2>&1 | head -20
      ;;
    search-resume)
      qs=build-gpu/quickstart-run
      log "kevo run $qs (resume)"
      $kevo run "$qs" >"$out/search-resume.txt" 2>&1 || status=1
      tail -5 "$out/search-resume.txt"
      bench/search_report.sh build-gpu "$qs" 2>&1 || status=1
      cp "$qs/events.jsonl" "$out/" 2>/dev/null
      ;;
    search)
      cfg=${KEVO_SEARCH_CONFIG:-configs/quickstart.json}
      name=$(basename "$cfg" .json)
      dir=build-gpu/search-$name
      rm -rf "$dir"
      log "kevo run --config $cfg"
      $kevo run --config "$cfg" --run "$dir" >"$out/search-$name.txt" 2>&1 || status=1
      tail -3 "$out/search-$name.txt"
      bench/search_report.sh build-gpu "$dir" 2>&1 || status=1
      cp "$dir/events.jsonl" "$out/events-$name.jsonl" 2>/dev/null
      ;;
    sched-sweep)
      # resumable in build-gpu/sched-sweep (kept on a warm machine); the table
      # is merged once every collective is done
      sw=build-gpu/sched-sweep
      probs=${KEVO_SWEEP_PROBLEMS:-allreduce allgather reducescatter alltoall broadcast fp8_allgather}
      log "bench/schedule_sweep.sh --problems '$probs' --n ${KEVO_SWEEP_N:-200}"
      rc=0
      bench/schedule_sweep.sh --problems "$probs" --n "${KEVO_SWEEP_N:-200}" --seed "${KEVO_SWEEP_SEED:-1}" \
        --batch "${KEVO_SWEEP_BATCH:-50}" --time-budget "${KEVO_SWEEP_BUDGET:-0}" --out "$sw" \
        --kevo "$PWD/$kevo" -- ${KEVO_SWEEP_SEED_OPTS:-} 2>&1 || rc=$?
      if [ "$rc" = 0 ]; then
        bench/schedule_sweep.sh --merge --problems "$probs" --out "$sw" \
          --table "$out/schedules-$(hostname -s).tsv" 2>&1 || status=1
      else
        status=1
      fi
      tar -C "$sw" -czf "$out/sched-sweep.tgz" --exclude=gen --exclude=run --exclude=batches . 2>/dev/null
      ;;
    hostile-search)
      log "bench/hostile_search.sh"
      bench/hostile_search.sh build-gpu build-gpu/hostile-search ${KEVO_HOSTILE_CHECK_ONLY:+--check-only} \
        2>&1 || status=1
      cp build-gpu/hostile-search.out "$out/hostile-search.txt" 2>/dev/null
      ;;
    confine)
      log "ctest -R 'test_confine|test_group'"
      (cd build-gpu && ctest -R 'test_confine|test_group' --output-on-failure -V) \
        >"$out/ctest-confine.txt" 2>&1 || status=1
      grep -E "confined|escape:|flood:|fork bomb:|passed|failed|FAIL" "$out/ctest-confine.txt" | tail -20
      ;;
    graph)
      log "bench/graph_check.sh (${KEVO_TIMING:-graph})"
      bench/graph_check.sh build-gpu "$out/graph-check.tgz" "${KEVO_TIMING:-graph}" 2>&1 || status=1
      ;;
    bench)
      log "bench/eval_bench --timing ${KEVO_TIMING:-graph}"
      KEVO_WORKER=build-gpu/kevo-worker build-gpu/bench/eval_bench --timing "${KEVO_TIMING:-graph}" \
        2>&1 || status=1
      ;;
    *) echo "gpu-check.sh: unknown step '$step'" >&2; exit 2 ;;
  esac
done
cp -r /tmp/kevo-gpu-test-logs /tmp/kevo-logs-* "$work/" 2>/dev/null
tar -C "$work" -czf "$out/logs.tgz" . 2>/dev/null
exit $status
