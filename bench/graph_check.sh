#!/usr/bin/env bash
# graph_check.sh — the CUDA-graph checks of a GPU machine, in one call: the replay hostiles and
# the test candidates (kevo eval), the export test, every seed of patterns/ with kevo seed
# (replay trial, timed in MODE), and every problem's baseline in both timing modes. Each stage
# stops starting new work past its time budget; everything lands in one tarball, rewritten after
# every stage, so a time limit loses nothing.
#
#   bench/graph_check.sh BUILD_DIR OUT_TGZ [MODE]       (MODE: graph (default) or call)
set -u
build=${1:?build dir}; out=${2:?output tarball}; mode=${3:-graph}
k=$build/kevo
w=$(mktemp -d /tmp/kevo-graph-check.XXXXXX)
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
pack() { tar -C "$w" -czf "$out" . 2>/dev/null; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$w/gpus.txt" 2>&1
for f in tests/hostile/replay_host_epoch.cu tests/hostile/replay_host_parity.cu tests/candidates/*.cu; do
  n=$(basename "$f" .cu)
  "$k" eval --problem allreduce --timeout 60 --timing "$mode" "$f" > "$w/eval-$n.txt" 2>&1
  echo "eval $f: $(grep -m1 '^verdict' "$w/eval-$n.txt") $(grep -m1 -o 'replay [0-9] of a CUDA graph[^:]*' "$w/eval-$n.txt")"
done
pack
if [ -x "$build/tests/test_gpu_export" ]; then
  (cd "$build" && timeout 200 ctest -R test_gpu_export --output-on-failure -V) > "$w/export.txt" 2>&1
  echo "export test: $(grep -E '[0-9]+ passed' "$w/export.txt" | tail -1) after $(el) s"
  pack
fi
for p in allreduce allgather reducescatter alltoall broadcast fp8_allgather tp_rmsnorm \
         ulysses_seq_to_heads halo_conv1d vocab_parallel_cross_entropy moe_dispatch moe_combine \
         gemm_allreduce gemm_reducescatter allgather_gemm; do
  [ "$(el)" -gt "${KEVO_SEED_BUDGET_S:-470}" ] && { echo "seeds stopped before $p (time)"; break; }
  "$k" seed --run "$w/seed-run" --world 2 --timeout 60 --timing "$mode" --problem "$p" \
    > "$w/seed-$p.txt" 2>&1
  echo "seed $p: exit $? after $(el) s"
  pack
done
for p in problems/*/; do
  p=$(basename "$p")
  [ "$(el)" -gt "${KEVO_BASELINE_BUDGET_S:-550}" ] && { echo "baselines stopped before $p (time)"; break; }
  for t in call graph; do
    "$k" baseline --problem "$p" --timing $t --json > "$w/baseline-$p-$t.json" 2>"$w/baseline-$p-$t.err" ||
      echo "baseline $p $t failed"
  done
done
pack
echo "done after $(el) s: $out"
