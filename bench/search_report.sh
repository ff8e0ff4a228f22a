#!/usr/bin/env bash
# search_report.sh — the figures of a kevo run from its event log and archive:
# evaluations per hour, GPU time per evaluation and the groups' busy share
# (from the results' gpu_s and wall_s), the best speedup per problem over time
# against its best seed (kevo archive history), and the archive's coverage
# (kevo archive list/stats).
#
#   bench/search_report.sh BUILD_DIR RUN_DIR
set -euo pipefail
build=$1
run=$2
events="$run/events.jsonl"
[ -f "$events" ] || { echo "search_report: no $events" >&2; exit 1; }

# one value of a flat JSON object line: num "key" / str "key"
awk '
function num(k,   m) { if (match($0, "\"" k "\":-?[0-9.e+-]+")) { m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); return m + 0 } return 0 }
function str(k,   m) { if (match($0, "\"" k "\":\"[^\"]*\"")) { m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:"/, "", m); sub(/"$/, "", m); return m } return "" }
# a process lives from its start/resume event to its last event (a killed one has no stop)
/"type":"(start|resume)"/ { starts++; if (!t0) t0 = num("t"); if (tstart) alive += last_any - tstart
                            groups = num("groups"); tstart = num("t") }
{ last_any = num("t") }
/"type":"result"/ {
  n++; t = num("t"); last = t; gpu += num("gpu_s"); wall += num("wall_s"); held += num("group_s")
  # the part of its group time after the first minute
  if (t - t0 > 60) { g = num("group_s"); w = t - t0 - 60; held60 += g < w ? g : w }
  stage[str("stage")]++; verdict[str("verdict")]++
}
/"type":"(stop|error)"/ { reason = str("reason") }
/"type":"(migrate|reseed)"/ { moves[str("type")]++ }
END {
  alive += last_any - tstart
  span = last - t0
  printf "events: %d results over %.0f s of wall time (%d process%s), stop: %s\n", n, span, starts, starts == 1 ? "" : "es", reason
  if (span > 0) printf "evaluations per hour: %.0f\n", n / span * 3600
  printf "by stage:"; for (k in stage) printf " %s %d", k, stage[k]; printf "\n"
  printf "by verdict:"; for (k in verdict) printf " %s %d", k, verdict[k]; printf "\n"
  printf "migrations %d, re-seedings %d\n", moves["migrate"], moves["reseed"]
  if (alive > 60 && groups > 0) printf "GPU groups busy: %.1f%% of the processes'"'"' wall time (%d group%s), %.1f%% after the first minute\n", 100 * held / (groups * alive), groups, groups == 1 ? "" : "s", 100 * held60 / (groups * (alive - 60))
  printf "timed GPU seconds per evaluation: %.3f; evaluation wall (compile + queue + job) per evaluation: %.2f s\n", n ? gpu / n : 0, n ? wall / n : 0
}' "$events"
# the best over time: kevo archive history's geomean rows
# (time_s evaluations problem size best program seed)
"$build/kevo" archive history --run "$run" | awk '
$4 == "geomean" { p = $3; b = $5 + 0; sub(/x$/, "", $7); seed[p] = $7 + 0
  if (!(p in seen)) { seen[p] = 1; problems[++np] = p }
  if (b > best[p]) { best[p] = b; order[p] = order[p] sprintf(" %.0fs:%.3fx", $1, b) } }
END {
  for (i = 1; i <= np; i++) { p = problems[i]
    printf "%-16s best seed %.3fx, best elite %.3fx (%s)\n", p, seed[p], best[p], (best[p] > seed[p] ? "improved" : "no better than the seeds")
    printf "%-16s elites over time (s since start: speedup):%s\n", "", order[p] }
}'
echo "== kevo archive list"
"$build/kevo" archive list --run "$run"
echo "== kevo archive stats"
"$build/kevo" archive stats --run "$run"
