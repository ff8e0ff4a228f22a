#!/usr/bin/env bash
# test_hostile_verdicts.sh — bench/hostile_verdicts.py, the verdict check of
# bench/hostile_search.sh, on hand-made attempts: it passes when every hostile
# seed got the verdict its file expects, and fails naming each seed that got
# another verdict, was never evaluated as a seed, or has no "// expect:" line.
#
#   test_hostile_verdicts.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: test_hostile_verdicts.sh SOURCE_DIR}
check=$src/bench/hostile_verdicts.py
tmp=$(mktemp -d /tmp/kevo-hostile-verdicts.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# attempts NAME:STAGE:VERDICT... -> $tmp/attempts, as `kevo archive attempts --json` prints
# them (one object a line, a proposal row first, stderr mixed in)
attempts() {
  local i=0 row name stage verdict
  { echo "["
    for row in "$@"; do
      IFS=: read -r name stage verdict <<<"$row"
      i=$((i + 1))
      printf '{"seq":%d,"stage":"proposal","verdict":"ok","program":"p%d","model":"hostile_%s"},\n' \
        "$i" "$i" "$name"
      printf '{"seq":%d,"stage":"%s","verdict":"%s","program":"p%d","model":""},\n' \
        "$i" "$stage" "$verdict" "$i"
    done
    echo '{"seq":0,"stage":"screen","verdict":"ok","program":"other","model":""}'
    echo "]"
    echo "kevo archive attempts: 3 bytes that were not UTF-8 printed as U+FFFD"
  } >"$tmp/attempts"
}

# run EXPECTED_STATUS NAME... -> output in $tmp/out
run() {
  local want=$1; shift
  python3 "$check" "$tmp/attempts" "$dir" "$@" >"$tmp/out" 2>&1
  local rc=$?
  [ "$rc" = "$want" ] || { fail "exit $rc, not $want, for $*:"; cat "$tmp/out"; }
}

says() { grep -qF -- "$1" "$tmp/out" || { fail "the output does not say '$1':"; cat "$tmp/out"; }; }

# the real hostile files, with the verdicts of the search in docs/results.md
dir=$src/tests/hostile
attempts parent_fds:seed:ok run_dir:seed:ok flood_output:seed:ok printf_loop:seed:ok \
  kill_parent:seed:ok thread_bomb:seed:runtime_error fork_bomb:seed:refused \
  fill_scratch:seed:ok driver_entry_point:seed:refused multicast_elf_walk:seed:refused
run 0 parent_fds run_dir flood_output printf_loop kill_parent thread_bomb fork_bomb \
  fill_scratch driver_entry_point multicast_elf_walk
says "thread_bomb            runtime_error  seed runtime_error x1"
grep -q FAIL "$tmp/out" && { fail "a FAIL where every verdict is right:"; cat "$tmp/out"; }

# hand-made seed files: words after the verdict are not part of it
dir=$tmp/hostile
mkdir "$dir"
printf '// expect: ok\nint a;\n' >"$dir/a.cu"
printf '// expect: refused (layer 1)\nint b;\n' >"$dir/b.cu"
printf 'int c; // expect:crash\n' >"$dir/c.cu"
printf 'int d;\n' >"$dir/d.cu"

attempts a:seed:ok b:seed:refused c:seed:crash a:remeasure:hang
run 0 a b c

attempts a:seed:ok b:seed:ok c:seed:crash
run 1 a b c
says "FAIL: hostile seed b: expected refused, got ok"
grep -q "seed a:\|seed c:" "$tmp/out" && { fail "a right verdict named:"; cat "$tmp/out"; }

# a second seed evaluation that differs fails too
attempts a:seed:ok b:seed:refused c:seed:crash c:seed:hang
run 1 a b c
says "FAIL: hostile seed c: expected crash, got crash, hang"

# never evaluated as a seed (a screen only, or nothing)
attempts a:screen:ok b:seed:refused
run 1 a b c
says "FAIL: hostile seed a: expected ok, but it was never evaluated as a seed"
says "FAIL: hostile seed c: expected crash, but it was never evaluated as a seed"

attempts d:seed:ok
run 1 d
says "FAIL: hostile seed d: $dir/d.cu has no '// expect:' line"

# what the run keeps (kevo archive attempts, show and best print numeric program ids): a hostile
# may hold a cell when its attack failed and its kernel is correct, never when it games the
# results (a "// no-faster-than:" line), and is never a size's best
printf '// expect: ok\n// no-faster-than: x.cu\nint e;\n' >"$dir/e.cu"
printf '[\n{"seq":1,"stage":"seed","verdict":"ok","program":7,"model":"hostile_a"},\n%s\n]\n' \
  '{"seq":2,"stage":"seed","verdict":"ok","program":9,"model":"hostile_e"},' >"$tmp/attempts"
echo '{"seq":3,"stage":"seed","verdict":"ok","program":11,"model":"seed_x"}' >>"$tmp/attempts"
echo '{"c0": {"program": 7, "speedup": 1.0}, "c1": {"program": 11}, "c2": null}' >"$tmp/elites"
echo '[{"size": "64KiB", "program": 11}]' >"$tmp/bests"
run 0 --elites "$tmp/elites" --bests "$tmp/bests" a e
says "hostile_a (program 7) holds a cell: correct, its attack failed"
says "bests: 1 programs, 0 of them hostile seeds"
echo '{"c0": {"program": 9}}' >"$tmp/elites"
run 1 --elites "$tmp/elites" a e
says "FAIL: hostile seed hostile_e: program 9 is among the elites"
echo '[{"size": "64KiB", "program": 7}]' >"$tmp/bests"
run 1 --bests "$tmp/bests" a e
says "FAIL: hostile seed hostile_a: program 7 is among the bests"

exit $failed
