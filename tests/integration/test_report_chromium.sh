#!/usr/bin/env bash
# test_report_chromium.sh — the run's report in a real browser: a search with
# the fake evaluator (tests/support/search_driver: problems allreduce and allgather, 2
# islands, children of elites) that refreshes DIR/report.html as kevo run does
# (every 0.002 minutes and at exit), then `kevo report --out`, and both pages
# opened in headless Chromium. Checks: the run's refresh events; no console
# message from either page (a page with console.error first proves that such a
# message is seen); every section id (run, budgets, models, verdicts; per problem
# problem-, grid-, sizes-, anytime-, lineage-; elite-<id> per elite program)
# and every problem name in the DOM Chromium dumps; a screenshot well above a
# blank page's. The report, its DOM, Chromium's log and the screenshot stay in
# ARTEFACT_DIR. Exit 77 (skipped) without Chromium (Debian's `chromium`,
# installed by scripts/setup.sh).
#
#   test_report_chromium.sh ARTEFACT_DIR
# KEVO_BIN and KEVO_SEARCH_DRIVER name the binaries under test.
set -u
art=${1:?usage: test_report_chromium.sh ARTEFACT_DIR}
bin=${KEVO_BIN:?KEVO_BIN names the kevo binary}
driver=${KEVO_SEARCH_DRIVER:?KEVO_SEARCH_DRIVER names tests/search_driver}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    echo "SKIP: no chromium on PATH (scripts/setup.sh installs Debian's chromium)"
    exit 77
fi
command -v python3 >/dev/null || { echo "FAIL: python3 is needed" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kevo-report-chromium-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$art" && rm -f "$art"/*
failed=0
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# chrome OUT_PREFIX FILE [ARGS...]: FILE in headless Chromium; stdout to
# OUT_PREFIX.out, its log (console messages included) to OUT_PREFIX.log
chrome() {
    local out=$1 file=$2
    shift 2
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 "$@" \
        "file://$(realpath "$file")" >"$out.out" 2>"$out.log"
    local rc=$?
    [ "$rc" = 0 ] || fail "chromium on $file exited $rc: $(tail -5 "$out.log")"
}
# a page's console messages, as Chromium logs them ("...:INFO:CONSOLE:1] ..."
# or "...:INFO:CONSOLE(1)] ...")
console_lines() { grep -E ':CONSOLE[:(]' "$1" || true; }

# Chromium's logging is what the console check reads: a page that writes to
# the console must show up there.
printf '<!DOCTYPE html><html><body><script>console.error("kevo-canary")</script></body></html>\n' \
    >"$tmp/canary.html"
chrome "$tmp/canary" "$tmp/canary.html" --dump-dom
console_lines "$tmp/canary.log" | grep -q kevo-canary ||
    fail "a console.error of a page is not in Chromium's log: the console check would see nothing"

# the run, refreshing its report as kevo run does
run=$tmp/run
"$driver" "$run" 7 150 10 2 2 10 0.002 >"$tmp/driver.out" 2>&1 ||
    { echo "FAIL: search_driver: $(cat "$tmp/driver.out")" >&2; exit 1; }
intervals=$(grep '"type":"report"' "$run/events.jsonl" | grep -c '"when":"interval"')
exits=$(grep '"type":"report"' "$run/events.jsonl" | grep -c '"when":"exit"')
errors=$(grep -c '"type":"report_error"' "$run/events.jsonl")
[ "$intervals" -ge 1 ] && [ "$exits" = 1 ] && [ "$errors" = 0 ] ||
    fail "report events: $intervals interval, $exits exit, $errors errors (want >= 1, 1, 0)"
[ -s "$run/report.html" ] || fail "the run wrote no $run/report.html"
ls "$run"/report.html.tmp.* >/dev/null 2>&1 && fail "a temporary report was left in $run"

# what the report must show: the problems, their elites, and some lineage
"$bin" archive --run "$run" export >"$tmp/programs.json" 2>"$tmp/err" ||
    { echo "FAIL: kevo archive export: $(cat "$tmp/err")" >&2; exit 1; }
problems=$(python3 -c 'import json,sys
print(" ".join(sorted({p["problem"] for p in json.load(open(sys.argv[1]))})))' "$tmp/programs.json")
children=$(python3 -c 'import json,sys
print(sum(1 for p in json.load(open(sys.argv[1])) if p["parents"]))' "$tmp/programs.json")
[ "$(echo "$problems" | wc -w)" -ge 2 ] || fail "the run has problems '$problems' (want 2)"
[ "$children" -ge 5 ] || fail "the run has $children programs with parents (want some lineage)"
ids="run budgets models verdicts"
for p in $problems; do
    ids="$ids problem-$p grid-$p sizes-$p anytime-$p lineage-$p"
    "$bin" archive --run "$run" show "$p" --json >"$tmp/show.json" 2>"$tmp/err" ||
        fail "kevo archive show $p: $(cat "$tmp/err")"
    elites=$(python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
print(" ".join(sorted({str(c["program"]) for i in d["islands"] for c in i["grid"].values() if c})))' \
        "$tmp/show.json")
    [ -n "$elites" ] || fail "problem $p has no elite"
    for e in $elites; do ids="$ids elite-$e"; done
done

"$bin" report --run "$run" --out "$art/report.html" >"$tmp/out" 2>"$tmp/err" ||
    fail "kevo report exited $?: $(cat "$tmp/err")"

# check_page NAME FILE: the page in Chromium, its DOM and its console
check_page() {
    local name=$1 file=$2
    chrome "$art/$name" "$file" --dump-dom
    mv "$art/$name.out" "$art/$name.dom"
    local c
    c=$(console_lines "$art/$name.log")
    [ -z "$c" ] || fail "$name: console messages: $c"
    grep -qi '<html' "$art/$name.dom" || fail "$name: Chromium dumped no DOM (see $art/$name.log)"
    for id in $ids; do
        grep -qE "id=\"$id\"" "$art/$name.dom" || fail "$name: no element with id \"$id\""
    done
    for p in $problems; do
        grep -qE ">[^<]*\\b$p\\b" "$art/$name.dom" || fail "$name: problem $p is not named in the text"
    done
}
check_page report "$art/report.html"
check_page run-report "$run/report.html"

# the screenshot: well above a blank page's at the same size
printf '<!DOCTYPE html><html><body></body></html>\n' >"$tmp/blank.html"
chrome "$tmp/blank" "$tmp/blank.html" --window-size=1280,1600 --screenshot="$tmp/blank.png"
chrome "$tmp/shot" "$art/report.html" --window-size=1280,1600 --screenshot="$art/report.png"
blank=$(stat -c %s "$tmp/blank.png" 2>/dev/null || echo 0)
shot=$(stat -c %s "$art/report.png" 2>/dev/null || echo 0)
[ "$blank" -gt 0 ] || fail "no screenshot of a blank page"
[ "$shot" -gt $((blank * 2)) ] && [ "$shot" -gt 20000 ] ||
    fail "screenshot $art/report.png is $shot bytes (a blank page's: $blank; want > 2x and > 20000)"

if [ "$failed" != 0 ]; then
    echo "$failed check(s) failed; artefacts in $art" >&2
    exit 1
fi
echo "ok: $(echo "$ids" | wc -w) section ids, problems: $problems; screenshot $art/report.png ($shot bytes)"
