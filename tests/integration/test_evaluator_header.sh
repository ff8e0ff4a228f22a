#!/usr/bin/env bash
# test_evaluator_header.sh — evaluator/evaluator.h is the evaluator's one
# public header: no file outside evaluator/ includes another evaluator
# header, except the CPU tests of the part they test (tests/). It checks the
# tree, and first that the check refuses a made-up tree that breaks the rule.
#
#   test_evaluator_header.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: test_evaluator_header.sh SOURCE_DIR}
tmp=$(mktemp -d /tmp/kevo-evalh.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# check ROOT: prints every include of an internal evaluator header from
# outside evaluator/ and tests/ ("file:line: text"); succeeds when none.
check() {
  local bad
  bad=$(cd "$1" && grep -rnE --include='*.c' --include='*.h' --include='*.cu' \
          '^[[:space:]]*#[[:space:]]*include[[:space:]]+"evaluator/' . |
        grep -vE '^\./(evaluator|tests|build[^/]*)/' |
        grep -vF '"evaluator/evaluator.h"')
  [ -z "$bad" ] || { echo "$bad"; return 1; }
}

mkdir -p "$tmp/elsewhere" "$tmp/evaluator/group"
printf '#include "evaluator/evaluator.h"\n' >"$tmp/elsewhere/ok.c"
printf '#include "evaluator/group/group.h"\n' >"$tmp/evaluator/group/group.c"
check "$tmp" >/dev/null || fail "a tree that includes evaluator/evaluator.h only is refused"
printf '#include "evaluator/group/group.h"\n' >"$tmp/elsewhere/bad.c"
out=$(check "$tmp") && fail "a file outside evaluator/ includes an internal evaluator header and is accepted"
case "$out" in *elsewhere/bad.c:1:*) ;; *) fail "the refusal does not name the file and line: $out" ;; esac

out=$(check "$src") || fail "files outside evaluator/ include its internal headers (include evaluator/evaluator.h):
$out"

[ $failed -eq 0 ] && echo "evaluator.h is the only evaluator header included outside evaluator/ and tests/"
exit $failed
