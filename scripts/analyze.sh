#!/usr/bin/env bash
# analyze.sh — static analysis of kevo's host C code: clang-tidy's
# clang-analyzer checks (the CMake option KEVO_ANALYZE) on every file of the
# libraries, kevo and kevo-worker, in a build of its own. A finding fails it;
# the few the analyzer gets wrong are suppressed at their line, and listed
# in docs/architecture.md ("Warnings and static analysis").
#
#   scripts/analyze.sh [BUILD_DIR]     (default build-analyze; 1.5-2.5 min on 2 cores)
#
# Needs clang-tidy (scripts/setup.sh installs it). Exit status: 0 when
# nothing is reported, non-zero otherwise (each finding names file, line
# and the path that leads to it).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-analyze}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKEVO_WERROR=ON -DKEVO_ANALYZE=ON >/dev/null
cmake --build "$dir" --target kevo kevo-worker -- -k 0
