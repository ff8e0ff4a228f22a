#!/usr/bin/env bash
# test_symbols.sh FILE... — every global symbol kevo's libraries and programs
# define starts with kv_ or KV_, so that no kevo name can collide with a
# caller's, a library's or another part's (the names the C runtime and the
# toolchain define, which begin with '_' or are main, data_start, environ, the
# getopt and stdio globals copied in from glibc, and DW.ref.* of the CUDA
# objects, are not kevo's). A self-test first shows it fails on an object that
# defines an unprefixed name.
set -euo pipefail
fail=0
# the defined global names of one file that are not kevo's to name
unprefixed() {
  nm -g --defined-only "$1" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDBRCVWG]$/ { print $3 }' |
    grep -v -E '^(kv_|KV_|_|main$|data_start$|DW\.ref\.)|@GLIBC_' || true
}
check() {
  local bad
  bad=$(unprefixed "$1")
  if [ -n "$bad" ]; then
    echo "test_symbols: $1 defines names without kv_: $(echo $bad | tr '\n' ' ')" >&2
    return 1
  fi
}

# the self-test: an object with one good and one bad name
tmp=$(mktemp -d /tmp/kevo-symbols.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
printf 'int kv_fine(void) { return 0; }\nint grow_array(void) { return 1; }\nstatic int hidden(void) { return 2; }\nint kv_use(void) { return hidden(); }\n' >"$tmp/t.c"
cc -c "$tmp/t.c" -o "$tmp/t.o"
if check "$tmp/t.o" 2>"$tmp/self.txt" || ! grep -q "grow_array" "$tmp/self.txt" || grep -q "hidden\|kv_fine" "$tmp/self.txt"; then
  cat "$tmp/self.txt"
  echo "test_symbols: FAIL: the self-test's unprefixed name was not found alone" >&2
  exit 1
fi

[ "$#" -gt 0 ] || { echo "usage: test_symbols.sh FILE..." >&2; exit 2; }
for f in "$@"; do
  [ -e "$f" ] || { echo "test_symbols: $f: no such file" >&2; fail=1; continue; }
  check "$f" || fail=1
done
[ "$fail" = 0 ] && echo "test_symbols: every global name of $# files starts with kv_ or KV_"
exit "$fail"
