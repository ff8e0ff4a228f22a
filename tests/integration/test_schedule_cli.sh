#!/usr/bin/env bash
# test_schedule_cli.sh — kevo schedule (cli/cmd_schedule.c) as a process:
# list (text and JSON), check (canonical form and cell; an invalid schedule
# exits 1 with the error on stderr), gen (one schedule to a file or stdout;
# --random N to a folder), and the usage errors (exit 2).
# KEVO_BIN names the binary under test.
set -u
bin=${KEVO_BIN:?KEVO_BIN names the kevo binary}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kevo-schedule-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# expect STATUS NEEDLE(stdout or stderr) -- ARGS...
expect() {
    local want=$1 needle=$2
    shift 3
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [ "$got" != "$want" ]; then
        fail "kevo $* exited $got, want $want: $(cat "$tmp/err")"
    elif [ -n "$needle" ] && ! grep -qF -- "$needle" "$tmp/out" "$tmp/err"; then
        fail "kevo $*: no '$needle' in: $(cat "$tmp/out" "$tmp/err")"
    elif grep -q "Sanitizer\|runtime error:" "$tmp/err"; then
        fail "kevo $*: $(cat "$tmp/err")"
    else
        ok
    fi
}

canon='allreduce threads=512 ctas=2 launch=fused ll_max=256K; rs algo=direct dir=pull xport=sm16 proto=simple chunk=0 inflight=4 sync=cta order=ring fuse=none; ag algo=direct dir=push xport=sm16 proto=simple chunk=0 inflight=4 sync=cta order=ring fuse=none'

# list
expect 0 'rs ag' -- schedule list --problem allreduce
expect 0 "$canon" -- schedule list --problem allreduce
expect 0 'valid schedules: 8830108944 (10525791024 with nvls)' -- schedule list --problem allreduce
expect 0 '"space_size":	1228176' -- schedule list --problem reducescatter --json
"$bin" schedule list --problem alltoall --json >"$tmp/list.json" 2>/dev/null
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["phase_sequences"]==["a2a","local a2a"], d; assert d["fields"]["chunk"][0]=="0"' "$tmp/list.json"; then ok; else fail "list --json"; fi
expect 2 "missing --problem P" -- schedule list
expect 2 "problem 'gemm' has no schedules" -- schedule list --problem gemm
expect 2 "unknown option '--bogus'" -- schedule list --problem allreduce --bogus

# check
expect 0 "$canon" -- schedule check 'allreduce; rs; ag dir=push'
expect 0 'cell: sm/fused' -- schedule check 'allreduce; rs; ag dir=push'
expect 0 'cell: tma/fused' -- schedule check 'allgather; ag xport=tma'
expect 0 'cell: ce/unfused' -- schedule check 'allgather; ag xport=ce'
expect 0 'sync=grid' -- schedule check 'allgather; ag xport=ce'
expect 1 "kevo: phase 1 (rs): xport 'sm32': expected sm4, sm8, sm16, tma, ce or nvls" -- schedule check 'allreduce; rs xport=sm32; ag'
expect 1 '(invariant 8)' -- schedule check 'allreduce; rs sync=cta; ag xport=sm8'
expect 1 'unknown collective' -- schedule check 'allreduc; rs; ag'
expect 2 "'check' needs a SCHEDULE" -- schedule check
expect 2 'unexpected argument' -- schedule check 'allgather; ag' 'allgather; ag'

# gen
expect 0 '// kevo:schedule allgather threads=512' -- schedule gen --problem allgather 'allgather; ag'
expect 0 '' -- schedule gen --problem broadcast 'broadcast; scatter; ag' -o "$tmp/one.cu"
if grep -q '^// kevo:schedule broadcast ' "$tmp/one.cu"; then ok; else fail "gen -o: $tmp/one.cu"; fi
expect 1 "the schedule is allgather's, not allreduce's" -- schedule gen --problem allreduce 'allgather; ag'
expect 1 '(invariant 10)' -- schedule gen --problem allgather 'allgather launch=split; ag'
expect 0 'alltoall_' -- schedule gen --problem alltoall --random 5 --seed 3 -o "$tmp/rand"
n=$(ls "$tmp/rand" | grep -c '^alltoall_[0-9a-f]\{8\}\.cu$')
if [ "$n" -ge 4 ]; then ok; else fail "gen --random 5 wrote $n files"; fi
for f in "$tmp"/rand/*.cu; do
    line=$(sed -n 's|^// kevo:schedule ||p' "$f" | head -1)
    "$bin" schedule check "$line" >/dev/null 2>&1 && ok || fail "$f: its schedule line does not check"
done
"$bin" schedule gen --problem alltoall --random 5 --seed 3 -o "$tmp/rand2" >/dev/null 2>&1
if diff -r "$tmp/rand" "$tmp/rand2" >/dev/null; then ok; else fail "gen --random is not reproducible from --seed"; fi
expect 2 "needs -o DIR" -- schedule gen --problem alltoall --random 5
expect 2 "--random '0'" -- schedule gen --problem alltoall --random 0 -o "$tmp/x"
expect 2 "'gen' needs a SCHEDULE" -- schedule gen --problem alltoall
expect 2 "unknown action 'bogus'" -- schedule bogus
expect 0 'kevo schedule check' -- schedule --help
expect 0 'schedule' -- --help

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
