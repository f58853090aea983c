#!/usr/bin/env bash
# GPU checks and benchmark of the CUDA backend: builds the GPU test binaries
# for sm_90, runs the GPU tests (kernel parity: tests/cuda_ops_test.cc, exact
# verify tokens: tests/cuda_verify_parity_test.cc, golden models through the
# CUDA backend: tests/cuda_backend_test.cc), then the benchmark (tests/cuda_bench_test.cc),
# which prints one table: copy bandwidth and decode floor, decode ms/token, the
# verify pass for K+1 = 1..16 and the verify kernel for V = 4096 and 128256.
#
# The lent GPU machine has CUDA but no gRPC, protobuf or Abseil libraries
# (../shared/GPU.md), so the work is split in two:
#   bench/gpu.sh build   here: build into build-gpu/ ($BUILD_DIR) and pack out/gpu/ (the
#                        binaries, every shared library they load except glibc,
#                        libstdc++, libgcc and CUDA's own, the 14m model and
#                        golden.json): about 55 MB
#   bench/gpu.sh run     on the GPU machine, from the repository root, with
#                        out/gpu carried: tests, then the benchmark
#   bench/gpu.sh         both (a machine that can build and has a GPU)
# Device call: run(command="bash bench/gpu.sh run", carry=["out/gpu"],
# timeout_s=480). Run end to end in well under 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bundle=out/gpu
build_dir=${BUILD_DIR:-build-gpu}
mode=${1:-all}
gpu_tests="cuda_ops_test cuda_verify_parity_test cuda_backend_test"

build() {
  local jobs=${JOBS:-$(nproc)}
  cmake -S . -B "$build_dir" -G Ninja -DSPECSERVE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$build_dir" -j"$jobs" $gpu_tests cuda_bench_test
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/shared/models" "$bundle/shared/golden"
  for t in $gpu_tests cuda_bench_test; do
    cp "$build_dir/bin/$t" "$bundle/bin/"
    strip --strip-debug "$bundle/bin/$t"
  done
  # Every library the binaries resolve, but the ones the GPU machine has.
  ldd "$bundle"/bin/* | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) continue ;;
    esac
    case "$lib" in /usr/local/cuda*) continue ;; esac
    cp -L "$lib" "$bundle/lib/"
  done
  local shared=${SPECSERVE_SHARED:-$root/../shared}
  [ -f "$shared/models/code-target-14m.gguf" ] && cp "$shared/models/code-target-14m.gguf" "$bundle/shared/models/"
  [ -f "$shared/golden/golden.json" ] && cp "$shared/golden/golden.json" "$bundle/shared/golden/"
  du -sh "$bundle"
}

run() {
  for t in $gpu_tests; do
    [ -x "$bundle/bin/$t" ] || { echo "no $bundle/bin/$t: run 'bench/gpu.sh build' first" >&2; exit 2; }
  done
  export LD_LIBRARY_PATH="$root/$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  # The binaries were built in another checkout: give them the models and
  # golden.json through $SPECSERVE_SHARED (models/: the repository's + 14m).
  local shared
  shared=$(mktemp -d)
  mkdir -p "$shared/models"
  ln -s "$root/$bundle/shared/golden" "$shared/golden"
  for m in "$root"/models/*.gguf "$root/$bundle"/shared/models/*.gguf; do
    [ -f "$m" ] && ln -sf "$m" "$shared/models/"
  done
  export SPECSERVE_SHARED=$shared
  # On the GPU machine a CUDA runtime that cannot start is a failure, not a
  # run in which every GPU test skips (tests/backend_ops_harness.h).
  export SPECSERVE_REQUIRE_CUDA=1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  local status=0
  echo "== GPU tests"
  local deadline=$((SECONDS + 240))  # 240 s for the GPU tests together
  for t in $gpu_tests; do
    timeout $((deadline > SECONDS ? deadline - SECONDS : 1)) "$bundle/bin/$t" --gtest_brief=1 || status=$?
  done
  echo "== benchmark"
  SPECSERVE_BENCH=1 timeout 300 "$bundle/bin/cuda_bench_test" --gtest_brief=1 || status=$?
  exit "$status"
}

case "$mode" in
  build) build ;;
  run) run ;;
  all) build && run ;;
  *) echo "usage: bench/gpu.sh [build|run]" >&2; exit 2 ;;
esac
