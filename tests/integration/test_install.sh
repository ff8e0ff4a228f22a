#!/usr/bin/env bash
# test_install.sh BUILD_DIR — cmake --install puts kevo where it runs without
# the source tree: into a fresh prefix, then run from a folder outside the
# tree with KEVO_HOME and KEVO_PROBLEMS unset, the installed kevo reads its
# problems, patterns and configs from <prefix>/share/kevo (common/datadir.h).
set -euo pipefail
build=$1
tmp=$(mktemp -d /tmp/kevo-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_install: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
for f in bin/kevo bin/kevo-worker include/kevo/kernel.h include/kevo/check.h \
         share/kevo/include/kevo/kernel.h share/kevo/docs/abi.md \
         share/kevo/problems/allreduce/problem.json share/kevo/patterns/allreduce \
         share/kevo/configs/quickstart.json; do
  [ -e "$tmp/prefix/$f" ] || fail "the install holds no $f"
done
data=$(cd "$tmp/prefix/share/kevo" && pwd -P)

mkdir "$tmp/elsewhere" && cd "$tmp/elsewhere"
kevo() { env -u KEVO_HOME -u KEVO_PROBLEMS -u KEVO_RUN "$tmp/prefix/bin/kevo" "$@"; }

kevo problems >out.txt 2>&1 || { cat out.txt; fail "kevo problems"; }
grep -q "^problems in $data/problems " out.txt || { head -3 out.txt; fail "kevo problems did not read $data/problems"; }
for p in allreduce alltoall moe_dispatch; do
  grep -q "^$p " out.txt || fail "kevo problems does not list $p"
done
kevo config check "$data/configs/quickstart.json" >out.txt 2>&1 || { cat out.txt; fail "kevo config check"; }
grep -q "ok (3 problems" out.txt || { cat out.txt; fail "kevo config check said no ok"; }
kevo schedule list --problem allreduce >out.txt 2>&1 || { cat out.txt; fail "kevo schedule list"; }
grep -q "^allreduce" out.txt || fail "kevo schedule list names no allreduce"
# a generated program includes the installed pattern headers
kevo schedule gen --problem allreduce 'allreduce; ar' -o "$tmp/ar.cu" >out.txt 2>&1 || { cat out.txt; fail "kevo schedule gen"; }
grep -q '#include "kevo_sched.cuh"\|#include "kevo/kernel.h"' "$tmp/ar.cu" || fail "the generated program includes no kevo header"
kevo seed --help >/dev/null || fail "kevo seed --help"
# a problem the data root does not hold is named with the installed root
if kevo problems check no_such_problem >out.txt 2>&1; then fail "an unknown problem passed"; fi
grep -q "no_such_problem" out.txt || { cat out.txt; fail "the error does not name the problem"; }
echo "test_install: ok ($tmp/prefix, run from $tmp/elsewhere)"
