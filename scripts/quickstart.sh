#!/usr/bin/env bash
# quickstart.sh — sets up, builds and runs the main job: a quickstart search
# (configs/quickstart.json) on the local GPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build
build/kevo config check configs/quickstart.json

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "quickstart: no NVIDIA GPU here (nvidia-smi finds none). The search needs a node with"
  echo "quickstart: at least 2 NVLink-connected GPUs, the CUDA driver and NCCL >= 2.28."
  exit 1
fi
exec build/kevo run --config configs/quickstart.json
