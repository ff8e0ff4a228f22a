#!/usr/bin/env bash
# test_layers.sh — cmake/KevoLayers.cmake refuses a tree that breaks a layer
# rule, and the kevo-worker that was built holds nothing of the archive, the
# search, the mutators, LMDB or libcurl.
#
#   test_layers.sh SOURCE_DIR KEVO_WORKER_BINARY
set -uo pipefail
src=${1:?usage: test_layers.sh SOURCE_DIR WORKER}; worker=${2:?usage: test_layers.sh SOURCE_DIR WORKER}
tmp=$(mktemp -d /tmp/kevo-layers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

configure() { # case -> output in $tmp/$1.log (CMake's line breaks joined), status returned
  cmake -S "$src/tests/layers" -B "$tmp/$1" -DKEVO_ROOT="$src" -DLAYERS_CASE="$1" >"$tmp/$1.raw" 2>&1
  local rc=$?
  tr -s ' \n' ' ' <"$tmp/$1.raw" >"$tmp/$1.log"
  return $rc
}

configure clean || { fail "a clean tree is refused:"; cat "$tmp/clean.log"; }
if configure include; then
  fail "a worker file that includes an archive header is accepted"
else
  grep -q 'worker/worker.c includes "archive/..."' "$tmp/include.log" ||
    { fail "the include refusal does not name the file:"; cat "$tmp/include.log"; }
fi
if configure link; then
  fail "a worker that links the archive through the protocol is accepted"
else
  grep -q 'kevo_worker (worker/) reaches kevo_archive: kevo_worker > kevo_protocol > kevo_archive' "$tmp/link.log" ||
    { fail "the link refusal does not name the path:"; cat "$tmp/link.log"; }
fi

# The real worker: no symbol of the layers it may not use, defined or needed.
if [ ! -x "$worker" ]; then
  fail "$worker is not an executable"
else
  bad=$(nm -C "$worker" 2>/dev/null | grep -E ' (mdb_|curl_|ZSTD_|kv_archive_|kv_txn_|kv_search_|kv_llm_|kv_mutator|kv_template_|kv_evalq|kv_group_|kv_compile|kv_hostcheck)' | head -5)
  [ -z "$bad" ] || fail "kevo-worker holds symbols of layers it may not use: $bad"
  nm "$worker" >/dev/null 2>&1 || fail "nm cannot read $worker"
fi
[ "$failed" = 0 ] && echo "layers: 3 made-up trees judged as they should be; kevo-worker holds no archive, search, mutator, compiler (nvcc or cc), LMDB or libcurl symbol"
exit "$failed"
