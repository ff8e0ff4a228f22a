#!/usr/bin/env bash
# setup.sh — installs kevo's system packages (apt-get; sudo when not root) and
# checks for what apt cannot provide here: the CUDA toolkit and NCCL.
#
#   scripts/setup.sh              install packages, then check
#   scripts/setup.sh --check      only check; install nothing
#
# Exit status: 0 when everything kevo needs to build is present, 1 otherwise,
# with one line per missing piece saying what it is and how to get it.
set -euo pipefail

check_only=0
for arg in "$@"; do
  case "$arg" in
    --check) check_only=1 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

# chromium: tests/integration/test_report_chromium.sh opens the run's report in it (skipped without)
# clang-format: scripts/format-check.sh, run by CI
# clang-tidy: scripts/analyze.sh, the static analysis
packages=(build-essential cmake ninja-build pkg-config liblmdb-dev libcjson-dev libcurl4-openssl-dev
          libzstd-dev libssl-dev python3 chromium clang-format clang-tidy)

if [ "$check_only" = 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" != 0 ]; then
      if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
        echo "setup.sh: not root and no sudo: cannot install ${packages[*]}" >&2; exit 1
      fi
    fi
    missing=()
    for p in "${packages[@]}"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
      echo "setup.sh: installing ${missing[*]}"
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
  else
    echo "setup.sh: no apt-get here; install by hand: cmake ninja pkg-config LMDB cJSON libcurl zstd OpenSSL (headers too), and Chromium for the report's test" >&2
  fi
fi

problems=0
say_missing() { echo "setup.sh: MISSING: $*" >&2; problems=$((problems + 1)); }

for tool in cc cmake ninja; do
  command -v "$tool" >/dev/null 2>&1 || say_missing "$tool (apt-get install build-essential cmake ninja-build)"
done
for h in lmdb.h:liblmdb-dev cjson/cJSON.h:libcjson-dev curl/curl.h:libcurl4-openssl-dev \
         zstd.h:libzstd-dev zdict.h:libzstd-dev openssl/evp.h:libssl-dev; do
  header=${h%%:*}; pkg=${h##*:}
  found=0
  for d in /usr/include /usr/include/*-linux-gnu /usr/local/include \
           ${KEVO_DEPS_PREFIX:+$KEVO_DEPS_PREFIX/usr/include $KEVO_DEPS_PREFIX/usr/include/*-linux-gnu}; do
    [ -f "$d/$header" ] && found=1
  done
  [ "$found" = 1 ] || say_missing "$header (apt-get install $pkg)"
done

nvcc_path=$(command -v nvcc 2>/dev/null || true)
[ -z "$nvcc_path" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc_path=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc_path" ]; then
  say_missing "the CUDA toolkit: nvcc not on PATH nor in /usr/local/cuda/bin (install CUDA >= 12.8 from NVIDIA)"
else
  cuda_root=$(cd "$(dirname "$nvcc_path")/.." && pwd)
  echo "setup.sh: CUDA: $("$nvcc_path" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') at $cuda_root"
  [ -f "$cuda_root/include/cublas_v2.h" ] || say_missing "cuBLAS headers (cublas_v2.h) in $cuda_root/include"
  # kevo reads a candidate's SASS with cuobjdump (and nvdisasm behind it).
  # Toolkits installed from pip wheels lack both; the wheels exist on PyPI.
  have_cuobjdump() { [ -x "$cuda_root/bin/cuobjdump" ] || command -v cuobjdump >/dev/null 2>&1; }
  if ! have_cuobjdump && [ "$check_only" = 0 ] && command -v python3 >/dev/null 2>&1; then
    echo "setup.sh: installing cuobjdump and nvdisasm (pip: nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm)"
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
    bin=$(python3 -c 'import glob, nvidia, os; print(" ".join(d for p in nvidia.__path__ for d in glob.glob(os.path.join(p, "cu*", "bin"))))')
    for d in $bin; do
      for tool in cuobjdump nvdisasm; do
        [ -x "$d/$tool" ] && ${sudo:-} ln -sf "$d/$tool" /usr/local/bin/$tool
      done
    done
  fi
  have_cuobjdump || say_missing "cuobjdump (CUDA binary utilities): not next to nvcc nor on PATH (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm, then put their bin/ on PATH)"
fi

nccl_h=""
for d in ${NCCL_HOME:+$NCCL_HOME/include} /usr/include /usr/local/include ${cuda_root:+$cuda_root/include}; do
  [ -f "$d/nccl.h" ] && { nccl_h="$d/nccl.h"; break; }
done
if [ -z "$nccl_h" ]; then
  say_missing "NCCL: nccl.h not found (install libnccl-dev >= 2.28 from NVIDIA's repository, or set NCCL_HOME)"
else
  version=$(awk '/#define NCCL_MAJOR/{ma=$3}/#define NCCL_MINOR/{mi=$3}/#define NCCL_PATCH/{pa=$3}END{print ma"."mi"."pa}' "$nccl_h")
  echo "setup.sh: NCCL: $version ($nccl_h)"
  [ -f "$(dirname "$nccl_h")/nccl_device.h" ] || say_missing "NCCL's device API (nccl_device.h, NCCL >= 2.28) next to $nccl_h"
fi

if [ "$problems" -gt 0 ]; then
  echo "setup.sh: $problems thing(s) missing; kevo cannot be built until they are installed" >&2
  exit 1
fi
echo "setup.sh: ready to build"
