#!/usr/bin/env bash
# gpu-deps.sh — for GPU machines that cannot install packages: carry the
# Debian packages kevo needs and unpack them into a private prefix.
#
#   scripts/gpu-deps.sh fetch DIR      (where apt works) download the .debs into DIR
#   scripts/gpu-deps.sh unpack DIR P   (on the GPU machine) unpack them under P;
#                                      then build with -DCMAKE_PREFIX_PATH=P/usr
set -euo pipefail
# libcurl is not carried: the GPU machines have its -dev package, and the
# carried one holds only a static archive that needs OpenSSL and GSSAPI.
# zstd and OpenSSL's libcrypto are carried with their run-time packages: the
# machines have the libraries (dpkg and libcurl need them) but may lack the
# headers, and the carried -dev packages' .so links point at the versions
# carried beside them (the same sonames, libzstd.so.1 and libcrypto.so.3).
packages=(liblmdb0 liblmdb-dev libcjson1 libcjson-dev libzstd1 libzstd-dev libssl3 libssl-dev)
case "${1:-}" in
  fetch)
    dir=${2:?usage: gpu-deps.sh fetch DIR}
    mkdir -p "$dir"
    (cd "$dir" && apt-get download "${packages[@]}")
    ;;
  unpack)
    dir=${2:?usage: gpu-deps.sh unpack DIR PREFIX}; prefix=${3:?usage: gpu-deps.sh unpack DIR PREFIX}
    mkdir -p "$prefix"
    for deb in "$dir"/*.deb; do dpkg -x "$deb" "$prefix"; done
    # the -dev packages' .so links point at versioned files unpacked beside them
    echo "gpu-deps.sh: unpacked $(ls "$dir"/*.deb | wc -l) packages under $prefix"
    ;;
  *) echo "usage: gpu-deps.sh fetch DIR | unpack DIR PREFIX" >&2; exit 2 ;;
esac
