#!/usr/bin/env bash
# tsan.sh — builds kevo with ThreadSanitizer (build-tsan; warnings are errors)
# and runs the tests whose processes start threads: the archive's snapshot job
# (test_snapshot, and the search that runs it: test_search) and the file-tree
# walker against a thread that swaps the tree under it (test_fstree). A data
# race is a report that fails the test. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKEVO_WERROR=ON -DKEVO_TSAN=ON >/dev/null
cmake --build build-tsan --target kevo kevo-worker test_snapshot test_search test_fstree search_driver fake_worker
cd build-tsan
# halt_on_error: the first race fails the test instead of a line in its log
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  ctest --output-on-failure --timeout 900 -j 2 -R '^(test_snapshot|test_search|test_fstree)$' "$@"
