#!/usr/bin/env bash
# Configures and builds specserve into build/ (binaries in build/bin/):
# every target, or only the ninja targets named as arguments
# (`tools/build.sh specserve specserve-target`). CUDA is built when nvcc
# exists (SPECSERVE_CUDA=AUTO); pass SPECSERVE_CUDA=OFF in the environment
# for a CPU-only build. SPECSERVE_SETUP=demo installs only the demo's
# packages (tools/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh "${SPECSERVE_SETUP:-all}"
jobs=${JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DSPECSERVE_CUDA="${SPECSERVE_CUDA:-AUTO}" ${CMAKE_ARGS:-} >/dev/null
ninja -C build -j"$jobs" "$@"
