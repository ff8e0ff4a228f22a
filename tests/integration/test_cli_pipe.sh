#!/usr/bin/env bash
# test_cli_pipe.sh — a reader that stops reading is a normal end (cli/main.c,
# cli/output.c): every archive view, and the other commands that print much,
# exit 0 with nothing on stderr when their stdout's pipe is closed, whether
# the reader has gone before the first write (| true, after a pause) or after
# the first line (| head -1). Also the run directory the views read when none
# is named (kv_cli_reader_run_dir): the default one when it holds an archive,
# else the most recent run beside it, said on stderr.
# Arguments: the kevo binary, and test_cli (test_cli --fixture DIR builds the
# fixture archive of tests/support/cli_fixture.c).
set -u
bin=${1:?the kevo binary}
fixture=${2:?test_cli, which builds the fixture}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kevo-cli-pipe-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

"$fixture" --fixture "$tmp/run" || { echo "FAIL: the fixture archive" >&2; exit 1; }

# closed ARGS...: kevo ARGS with its stdout a pipe nobody reads (the reader
# exits at once; kevo starts after it), then into head -1
closed() {
    ( sleep 0.3; exec "$bin" "$@" ) 2>"$tmp/err" | true
    local got=${PIPESTATUS[0]}
    if [ "$got" != 0 ] || [ -s "$tmp/err" ]; then
        fail "kevo $* | true: exit $got, stderr: $(cat "$tmp/err")"
    else
        ok
    fi
    "$bin" "$@" 2>"$tmp/err" | head -1 >"$tmp/first"
    got=${PIPESTATUS[0]}
    if [ "$got" != 0 ] || grep -q "bug in kevo\|standard output" "$tmp/err"; then
        fail "kevo $* | head -1: exit $got, stderr: $(cat "$tmp/err")"
    elif [ ! -s "$tmp/first" ]; then
        fail "kevo $* | head -1: no first line"
    else
        ok
    fi
}

r=(--run "$tmp/run")
closed archive "${r[@]}" list
closed archive "${r[@]}" list --json
closed archive "${r[@]}" show allreduce
closed archive "${r[@]}" best allreduce
closed archive "${r[@]}" best allreduce --per-size
closed archive "${r[@]}" lineage 4
closed archive "${r[@]}" attempts
closed archive "${r[@]}" attempts --json
closed archive "${r[@]}" stats
closed archive "${r[@]}" export
closed archive "${r[@]}" export --format csv
closed archive "${r[@]}" export --with-source
closed archive "${r[@]}" verify
closed schedule list --problem allreduce
closed config defaults

# a full disk is still an error: only a closed pipe is a normal end
if [ -w /dev/full ]; then
    "$bin" archive "${r[@]}" attempts >/dev/full 2>"$tmp/err"
    got=$?
    if [ "$got" = 1 ] && grep -q "writing to standard output: No space left" "$tmp/err"; then
        ok
    else
        fail "kevo archive attempts >/dev/full: exit $got, stderr: $(cat "$tmp/err")"
    fi
fi

# the run the views read when none is named
mkdir -p "$tmp/cwd/runs/empty" "$tmp/cwd/runs/old"
cp -r "$tmp/run" "$tmp/cwd/runs/quickstart"
cp "$tmp/run/archive.mdb" "$tmp/cwd/runs/old/"
touch -d '2020-01-01' "$tmp/cwd/runs/old/archive.mdb"
# views name their run
runs() { (cd "$tmp/cwd" && env -u KEVO_RUN "$bin" "$@" >"$tmp/out" 2>"$tmp/err"); }
runs archive list
got=$?
if [ "$got" = 0 ] && grep -qx "kevo: reading runs/quickstart (the most recent run; --run DIR to choose)" "$tmp/err" &&
    grep -q allreduce "$tmp/out"; then
    ok
else
    fail "archive list without --run: exit $got, stderr: $(cat "$tmp/err")"
fi
runs archive verify
got=$?
if [ "$got" = 0 ] && grep -q "^kevo: reading runs/quickstart " "$tmp/err" &&
    grep -q "^runs/quickstart/archive.mdb: sound" "$tmp/out"; then
    ok
else
    fail "archive verify without --run: exit $got, stderr: $(cat "$tmp/err")"
fi
# an explicit choice is kept, and said nothing of
for how in "--run runs/old" "KEVO_RUN"; do
    if [ "$how" = KEVO_RUN ]; then
        (cd "$tmp/cwd" && KEVO_RUN=runs/old "$bin" archive verify >"$tmp/out" 2>"$tmp/err")
    else
        runs archive $how verify
    fi
    got=$?
    if [ "$got" = 0 ] && [ ! -s "$tmp/err" ] && grep -q "^runs/old/archive.mdb: sound" "$tmp/out"; then
        ok
    else
        fail "archive verify with $how: exit $got, out: $(cat "$tmp/out") err: $(cat "$tmp/err")"
    fi
done
# the default configuration's run_dir, once it holds an archive, quietly
cp -r "$tmp/run" "$tmp/cwd/runs/default"
touch -d '2020-01-01' "$tmp/cwd/runs/default/archive.mdb"
runs archive verify
got=$?
if [ "$got" = 0 ] && [ ! -s "$tmp/err" ] && grep -q "^runs/default/archive.mdb: sound" "$tmp/out"; then
    ok
else
    fail "archive verify with runs/default: exit $got, err: $(cat "$tmp/err")"
fi
# no run at all: the default is named in the error, as before
rm -rf "$tmp/cwd/runs"
runs archive list
got=$?
if [ "$got" = 1 ] && grep -q "runs/default" "$tmp/err" && ! grep -q "most recent" "$tmp/err"; then
    ok
else
    fail "archive list without runs: exit $got, err: $(cat "$tmp/err")"
fi

echo "test_cli_pipe: $passed passed, $failed failed"
[ "$failed" = 0 ]
