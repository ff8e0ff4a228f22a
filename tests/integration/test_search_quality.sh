#!/usr/bin/env bash
# test_search_quality.sh — the schedule benchmark's replay on a SYNTHETIC
# table (docs/schedules.md, "The schedule benchmark"): the program's
# invariants, not which policy wins (that is a measured result).
#   test_search_quality.sh SOURCE_DIR SEARCH_QUALITY SCHEDULE_SYNTH
# The table is the committed fixture, checked to be what
# tests/fixtures/make_schedules_synthetic.sh writes. Also the non-GPU parts
# of bench/schedule_sweep.sh, with a fake kevo.
set -euo pipefail
src=$1 sq=$2 synth=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

table=$src/tests/fixtures/schedules-synthetic.tsv
[ -f "$table" ] || fail "no fixture $table (tests/fixtures/make_schedules_synthetic.sh)"
"$synth" --n 60 --seed 1 >"$tmp/regen.tsv"
cmp -s "$table" "$tmp/regen.tsv" ||
  fail "the fixture is not what tests/fixtures/make_schedules_synthetic.sh writes now: run it"
cp "$table" "$tmp/table.tsv"
grep -q '^# SYNTHETIC' "$tmp/table.tsv" || fail "the synthetic table does not say so"

# 1. determinism: the same table and seeds give the same bytes
run() { "$sq" "$tmp/table.tsv" --seeds 6 --budgets 10,30,100 "$@"; }
run -o "$tmp/a.md" --curves "$tmp/a.csv" --runs "$tmp/a.tsv"
run -o "$tmp/b.md" --curves "$tmp/b.csv" --runs "$tmp/b.tsv"
cmp -s "$tmp/a.md" "$tmp/b.md" && cmp -s "$tmp/a.csv" "$tmp/b.csv" && cmp -s "$tmp/a.tsv" "$tmp/b.tsv" ||
  fail "two replays with the same seeds differ"
run --seed0 7 -o "$tmp/c.md" --runs "$tmp/c.tsv"
cmp -s "$tmp/a.tsv" "$tmp/c.tsv" && fail "other seeds gave the same runs"
run --absent redraw --redraws 4 -o "$tmp/r.md" --runs "$tmp/r.tsv"

# 2. the invariants of every run, and the report's completeness
python3 - "$tmp" <<'PY' || exit 1
import csv, sys, collections
tmp = sys.argv[1]
def fail(m):
    print("FAIL:", m, file=sys.stderr); sys.exit(1)
colls = []
for line in open(f"{tmp}/table.tsv"):
    if line.startswith("#") or line.startswith("collective\t"):
        continue
    c = line.split("\t")[0]
    if c not in colls:
        colls.append(c)
if len(colls) < 2:
    fail(f"the table has {len(colls)} collectives")
budgets = [10, 30, 100]
for runs in ("a.tsv", "r.tsv"):
    rows = list(csv.DictReader(open(f"{tmp}/{runs}"), delimiter="\t"))
    seen = collections.Counter()
    best = {}
    for r in rows:
        b, ev, cov = int(r["budget"]), int(r["evals"]), int(r["coverage"])
        if ev > b:
            fail(f"{runs}: {r['collective']} {r['policy']} seed {r['seed']}: {ev} evaluations at budget {b}")
        if ev < min(b, int(r["table_n"])) and r["policy"] == "random":
            fail(f"{runs}: random sampling stopped at {ev} of budget {b}")
        if cov > int(r["table_cells"]):
            fail(f"{runs}: coverage {cov} above the table's {r['table_cells']} cells")
        if float(r["qd"]) + 1e-9 < float(r["best"]):
            fail(f"{runs}: QD {r['qd']} below the best {r['best']}")
        key = (r["collective"], r["policy"], r["seed"])
        if key in best and float(r["best"]) + 1e-12 < best[key]:
            fail(f"{runs}: {key}: the best fell as the budget grew")
        best[key] = float(r["best"])
        seen[(r["collective"], r["policy"], b)] += 1
    for c in colls:
        for p in ("kevo", "random", "hillclimb"):
            for b in budgets:
                if seen[(c, p, b)] != 6:
                    fail(f"{runs}: {seen[(c, p, b)]} runs of {c} {p} at {b}, expected 6")
rows = list(csv.DictReader(open(f"{tmp}/a.tsv"), delimiter="\t"))
grew = 0
for c in colls:
    m = {b: sum(float(r["best"]) for r in rows if r["collective"] == c and r["policy"] == "random"
                and int(r["budget"]) == b) / 6 for b in budgets}
    if not (m[10] <= m[30] <= m[100]):
        fail(f"{c}: random sampling's mean best does not grow with the budget: {m}")
    grew += m[100] > m[10]
if grew == 0:
    fail("random sampling's mean best grew on no collective")
md = open(f"{tmp}/a.md").read()
for c in colls:
    if f"\n## {c}\n" not in md:
        fail(f"the report has no section {c}")
    if f"**{c} at 100: (a) kevo " not in md:
        fail(f"the report has no verdict line for {c}")
    for p, name in (("a", "kevo"), ("b", "random"), ("c", "hillclimb")):
        for b in budgets:
            if f"| ({p}) {name} | {b} |" not in md:
                fail(f"the report has no row {c} {name} {b}")
if "Verdict:" not in md:
    fail("the report has no overall verdict")
curves = list(csv.DictReader(open(f"{tmp}/a.csv")))
if len(curves) != len(colls) * 3 * 100:
    fail(f"{len(curves)} curve points, expected {len(colls) * 300}")
last = {}
for r in curves:
    k = (r["collective"], r["policy"])
    if k in last and float(r["mean"]) + 1e-12 < last[k]:
        fail(f"{k}: the anytime curve falls at {r['evals']}")
    last[k] = float(r["mean"])
PY

# 3. bad tables are refused with the line
printf 'collective\tschedule\n' >"$tmp/bad.tsv"
if "$sq" "$tmp/bad.tsv" >/dev/null 2>"$tmp/err"; then fail "a bad header was accepted"; fi
grep -q 'bad.tsv:1:' "$tmp/err" || fail "the error does not name the line: $(cat "$tmp/err")"

# 4. the sweep's non-GPU parts, with a fake kevo: generation, batches,
#    resumption under a time budget, the merge and its summary
fake=$tmp/fake-kevo
cat >"$fake" <<'FAKE'
#!/usr/bin/env bash
set -eu
if [ "$1" = schedule ]; then   # schedule gen --problem P --random N --seed S -o DIR/
  p=$4 n=$6 dir=${10}
  for ((i = 0; i < n; i++)); do
    printf '// kevo:pattern problem=%s transport=sm fusion=fused\n// kevo:schedule %s threads=%d\n' \
      "$p" "$p" "$i" >"$dir/sched-$(printf %03d "$i").cu"
  done
  exit 0
fi
[ "$1" = seed ] || exit 9
shift
pat="" prob=""
while [ $# -gt 0 ]; do case "$1" in --patterns) pat=$2; shift 2 ;; --problem) prob=$2; shift 2 ;; *) shift ;; esac; done
echo "$pat" >>"$(dirname "$pat")/../../seed-calls"
rc=0
for f in "$pat/$prob"/*.cu; do
  s=$(basename "$f" .cu)
  v=ok; [ "$s" = sched-003 ] && { v=mismatch; rc=4; }
  printf '{"problem":"%s","seed":"%s","claimed_cell":"sm/fused","report":{"verdict":"%s","message":"x","cell":"sm/fused","sizes":[' "$prob" "$s" "$v"
  sep=""
  for z in 64KiB 1MiB 16MiB 256MiB; do
    printf '%s{"name":"%s","candidate":{"median_us":10.5},"reference":{"median_us":12.0}}' "$sep" "$z"; sep=,
  done
  printf ']}}\n'
done
exit $rc
FAKE
chmod +x "$fake"
sweep=$src/bench/schedule_sweep.sh
"$sweep" --problems "allgather" --n 7 --seed 3 --batch 3 --out "$tmp/sw" --kevo "$fake" 2>"$tmp/sw.log" ||
  fail "the sweep failed: $(cat "$tmp/sw.log")"
[ "$(wc -l <"$tmp/sw/seed-calls")" = 3 ] || fail "7 schedules in batches of 3 took $(wc -l <"$tmp/sw/seed-calls") kevo seed calls"
"$sweep" --problems "allgather" --n 7 --seed 3 --batch 3 --out "$tmp/sw" --kevo "$fake" 2>>"$tmp/sw.log"
[ "$(wc -l <"$tmp/sw/seed-calls")" = 3 ] || fail "a finished sweep was evaluated again"
rm "$tmp/sw/allgather/batch-2.jsonl"
"$sweep" --problems "allgather" --n 7 --seed 3 --batch 3 --out "$tmp/sw" --kevo "$fake" 2>>"$tmp/sw.log"
[ "$(wc -l <"$tmp/sw/seed-calls")" = 4 ] || fail "a resumed sweep did not do only the missing batch"
rc=0
"$sweep" --merge --problems "allgather" --out "$tmp/sw" --table "$tmp/sw.tsv" --machine test 2>"$tmp/merge.log" || rc=$?
[ "$rc" = 3 ] || fail "the merge of a sweep with a mismatch exited $rc, expected 3: $(cat "$tmp/merge.log")"
grep -q 'allgather/sched-003: mismatch' "$tmp/merge.log" || fail "the summary does not name the bad schedule"
grep -q '^# machine: test' "$tmp/sw.tsv" || fail "the table's header does not name the machine"
[ "$(grep -c '^allgather	' "$tmp/sw.tsv")" = 7 ] || fail "the table does not have 7 rows"
echo "ok"
