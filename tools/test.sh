#!/usr/bin/env bash
# Sets up, builds and runs every test: the full suite on the normal build,
# then the GGUF loader's tests again under AddressSanitizer and UBSan.
# GPU tests skip (and say so) where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
jobs=${JOBS:-$(nproc)}
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)
# Sanitizers: the loader and tokenizer read untrusted bytes.
cmake -S . -B build-asan -G Ninja -DSPECSERVE_CUDA=OFF -DSPECSERVE_SANITIZE=ON \
  -DCMAKE_BUILD_TYPE=Debug >/dev/null
ninja -C build-asan -j"$jobs" gguf_test tensor_types_test tokenizer_test
for t in gguf_test tensor_types_test tokenizer_test; do
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ./build-asan/bin/$t --gtest_brief=1
done
echo "all tests passed"
