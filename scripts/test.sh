#!/usr/bin/env bash
# test.sh — sets up, builds (warnings are errors; AddressSanitizer + UBSan)
# and runs the test suite. GPU tests skip cleanly where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKEVO_WERROR=ON -DKEVO_SANITIZE=ON >/dev/null
cmake --build build-test
cd build-test
ctest --output-on-failure --timeout 600 -j 2 "$@"
