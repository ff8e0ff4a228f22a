#!/usr/bin/env bash
# seed_sass_diff.sh REV SEED.cu... — whether each seed's kernels compile to the same SASS at REV
# and in the working tree (the evaluator's nvcc flags, sm_90a). For changes meant to move host
# code only (patterns/kevo_host.cuh): "same" is the proof that no kernel changed. Addresses and
# the source file's name are left out of the comparison.
#   exit 0: every seed the same; 1: some differ (named); 2: usage or a compile failed
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 REV SEED.cu..." >&2; exit 2; }
rev=$1; shift
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
tmp=$(mktemp -d /tmp/kevo-sass.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/old/patterns" "$tmp/old/include"
git -C "$root" archive "$rev" patterns include | tar -x -C "$tmp/old" || exit 2

# kernels' SASS of one tree's copy of a seed, normalized
sass_of() { # tree seed out
  local tree=$1 seed=$2 out=$3
  cp "$tree/$seed" "$tmp/candidate.cu"
  "$nvcc" -O3 -std=c++17 -cubin -gencode arch=compute_90a,code=sm_90a -I"$tree/include" \
    -I"$tree/patterns" -o "$tmp/k.cubin" "$tmp/candidate.cu" 2>"$tmp/err" ||
    { echo "$seed: does not compile in $tree:" >&2; head -20 "$tmp/err" >&2; return 2; }
  "${CUOBJDUMP:-cuobjdump}" -sass "$tmp/k.cubin" |
    sed -E 's@/\*[0-9a-f]{4,}\*/@@g; s@ +@ @g' | grep -v '^\s*$' >"$out"
}

status=0
for seed in "$@"; do
  seed=${seed#"$root/"}
  sass_of "$tmp/old" "$seed" "$tmp/a" || { status=2; continue; }
  sass_of "$root" "$seed" "$tmp/b" || { status=2; continue; }
  if cmp -s "$tmp/a" "$tmp/b"; then
    echo "same       $seed"
  else
    echo "different  $seed ($(diff "$tmp/a" "$tmp/b" | grep -c '^[<>]') lines)"
    [ $status -eq 0 ] && status=1
  fi
done
exit $status
