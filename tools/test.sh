#!/usr/bin/env bash
# Sets up, builds and runs every test:
#  1. the full suite (unit, golden, statistical, end-to-end, deploy checks) on
#     a CPU build in build/;
#  2. where nvcc exists, a CUDA build in build-cuda/ that compiles every
#     kernel for sm_80 and sm_90 and runs the CUDA tests (they skip, saying
#     so, where no GPU is present);
#  3. the GGUF loader and tokenizer tests under AddressSanitizer and UBSan;
#  4. each libFuzzer target (fuzz/) for 15 s in build-fuzz/ (clang-14).
# Between stage 1's build and its tests, clang-14's thread-safety analysis
# (tools/thread_safety.sh) runs over the CPU build's non-test sources.
# Where clang or libFuzzer is missing a clang stage is skipped, saying so,
# except under CI=true, where that is a failure (tools/setup.sh installs
# them).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's start, in seconds since this script began: CI has a budget.
stage() { echo "== stage: $1 (at ${SECONDS} s)"; }
stage "CPU build"
SPECSERVE_CUDA=OFF bash tools/build.sh
jobs=${JOBS:-$(nproc)}
# Clang's thread-safety analysis over the CPU build's sources (its compile
# database), before the suite so that a finding fails fast: mutex-guarded
# members carry ABSL_GUARDED_BY, and any access the annotations do not
# allow is an error.
stage "thread-safety analysis"
if bash tools/thread_safety.sh --check; then
  bash tools/thread_safety.sh
elif [ "${CI:-}" = "true" ]; then
  echo "thread-safety: clang++-14 missing under CI (tools/setup.sh installs clang-14)" >&2
  exit 1
else
  echo "thread-safety: SKIPPED: clang++-14 is missing (apt-get install clang-14)"
fi
stage "CPU suite"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  stage "CUDA build and tests"
  # Release (-O3, no debug info): this stage checks that the CUDA build
  # compiles (kernels for sm_80 and sm_90), links and serves; its tests take
  # seconds, and debug info would make its build the longest step of CI
  # (docs/decisions/0020-test-build-flags.md).
  cmake -S . -B build-cuda -G Ninja -DSPECSERVE_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  # Only what the filter below runs: every test file that names CUDA or the
  # e2e generation suite (the e2e tests pull in the three servers), plus
  # the specserve CLI; the rest of the suite ran on the CPU build above.
  cuda_tests=$(grep -l -E 'Cuda|cuda|GenerationTest' tests/*_test.cc | xargs -n1 basename | sed 's/\.cc$//')
  # shellcheck disable=SC2086
  ninja -C build-cuda -j"$jobs" specserve $cuda_tests
  # The CUDA tests, and the services built with CUDA end to end.
  (cd build-cuda && ctest --output-on-failure -j"$jobs" --timeout 900 -R 'Cuda|cuda|GenerationTest')
fi

# Sanitizers: the loader and tokenizers read untrusted bytes. These are
# tests/CMakeLists.txt's SPECSERVE_RUNTIME_TESTS, which link only the model
# runtime, so this build compiles no RPC layer.
stage "sanitizers"
sanitized_tests="gguf_test tensor_types_test tokenizer_test bpe_tokenizer_test"
cmake -S . -B build-asan -G Ninja -DSPECSERVE_CUDA=OFF -DSPECSERVE_SANITIZE=ON \
  -DCMAKE_BUILD_TYPE=Debug >/dev/null
# shellcheck disable=SC2086
ninja -C build-asan -j"$jobs" $sanitized_tests
for t in $sanitized_tests; do
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ./build-asan/bin/$t --gtest_brief=1
done
# Fuzzing: the GGUF parser, both tokenizers and the proto conversions.
stage "fuzzing"
if bash fuzz/run.sh --check; then
  bash fuzz/run.sh "${FUZZ_SECONDS:-15}"
elif [ "${CI:-}" = "true" ]; then
  echo "fuzz: clang-14 / libFuzzer missing under CI (tools/setup.sh installs clang-14 libclang-rt-14-dev)" >&2
  exit 1
else
  echo "fuzz: SKIPPED: clang-14 or its libFuzzer runtime is missing (apt-get install clang-14 libclang-rt-14-dev)"
fi
echo "all tests passed (in ${SECONDS} s)"
