#!/usr/bin/env bash
# Configures and builds specserve into build/ (binaries in build/bin/).
# CUDA is built when nvcc exists (SPECSERVE_CUDA=AUTO); pass
# SPECSERVE_CUDA=OFF in the environment for a CPU-only build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
jobs=${JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DSPECSERVE_CUDA="${SPECSERVE_CUDA:-AUTO}" ${CMAKE_ARGS:-} >/dev/null
ninja -C build -j"$jobs"
