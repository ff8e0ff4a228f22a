#!/usr/bin/env bash
# hostile_flatten.sh — prints a hostile candidate as one file: a header beside it
# (`#include "memo.cuh"`, tests/hostile/) in place of its #include line, as kevo takes one .cu
# file; an include of kevo's own (kevo_sync.cuh) stays. tests/gpu/test_gpu_eval.c does the same.
#
#   bench/hostile_flatten.sh FILE.cu
set -euo pipefail
file=${1:?usage: hostile_flatten.sh FILE.cu}
awk -v dir="$(dirname "$file")" \
  '/^#include "[a-z_]+\.cuh"/ { split($0, q, "\""); f = dir "/" q[2]
     if ((getline l < f) > 0) { print l; while ((getline l < f) > 0) print l; next } }
   { print }' "$file"
