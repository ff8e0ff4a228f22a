#!/usr/bin/env bash
# train-zdict.sh — trains the zstd dictionary that compresses program sources
# in the archive (docs/archive.md, "Sources: zstd with a dictionary") on the
# seed kernels and headers of patterns/ and the problems' references.
#
#   scripts/train-zdict.sh VERSION      writes archive/zdict/src-VERSION.zdict
#
# The dictionary's id is 0x6B760000 + VERSION ("kv" and the version), inside
# the range zstd leaves to private dictionaries (32768 to 2^31 - 1). A
# dictionary kevo has shipped is never changed or removed: a new one gets the
# next VERSION, and CMakeLists.txt's KEVO_ZDICT names the one new sources are
# compressed with. Needs the zstd command (apt-get install zstd).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: train-zdict.sh VERSION}
case "$version" in ''|*[!0-9]*) echo "train-zdict.sh: VERSION must be a number" >&2; exit 2 ;; esac
[ "$version" -ge 1 ] && [ "$version" -le 65535 ] || { echo "train-zdict.sh: VERSION 1 to 65535" >&2; exit 2; }
command -v zstd >/dev/null 2>&1 || { echo "train-zdict.sh: needs the zstd command (apt-get install zstd)" >&2; exit 1; }
out=archive/zdict/src-$version.zdict
[ -e "$out" ] && { echo "train-zdict.sh: $out exists: shipped dictionaries never change" >&2; exit 1; }
id=$(( 0x6B760000 + version ))
# 32 KiB: about a tenth of the corpus (zstd's rule of thumb for a
# dictionary is 10 to 100 times less than what it is trained on)
mapfile -t corpus < <(find patterns -name '*.cu' -o -name '*.cuh' | LC_ALL=C sort; ls problems/*/reference.cu)
zstd -q --train "${corpus[@]}" --maxdict=32768 --dictID="$id" -o "$out"
echo "train-zdict.sh: $out: $(wc -c <"$out") bytes, id $id, trained on ${#corpus[@]} files ($(cat "${corpus[@]}" | wc -c) bytes)"
