#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz/ (clang-14, ASan + UBSan,
# SPECSERVE_FUZZ=ON) and runs each for SECONDS (default 60), then prints a
# table: executions, exec/s, new corpus units, coverage, crashes.
#
#   bash fuzz/run.sh            # 60 s per target (tools/test.sh and CI run 15 s)
#   bash fuzz/run.sh 3600       # an hour per target
#   bash fuzz/run.sh --check    # only: are clang-14 and libFuzzer installed?
#
# Targets run side by side, JOBS at a time (default: the number of CPUs);
# FUZZ_TARGETS="fuzz_gguf ..." picks some. Each one's corpus lives in
# build-fuzz/corpus/<target> (git-ignored, kept between runs) and starts from
# fuzz/seeds/<target>; fuzz/crashes/<target> holds inputs that once crashed,
# replayed first as regression tests. A crash stops that target, leaves its
# input in build-fuzz/artifacts/<target>/ (the path is printed) and makes
# the script exit 1. Logs: build-fuzz/logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

CC_FUZZ=${FUZZ_CC:-clang-14}
CXX_FUZZ=${FUZZ_CXX:-clang++-14}
# clang and its libFuzzer runtime (Debian: clang-14, libclang-rt-14-dev).
have_toolchain() {
  command -v "$CXX_FUZZ" >/dev/null 2>&1 || return 1
  local rt
  rt=$("$CXX_FUZZ" --print-runtime-dir 2>/dev/null) || return 1
  [ -f "$rt/libclang_rt.fuzzer-x86_64.a" ] || [ -f "$rt/libclang_rt.fuzzer.a" ]
}
if [ "${1:-}" = "--check" ]; then
  have_toolchain
  exit
fi
if ! have_toolchain; then
  echo "fuzz: $CXX_FUZZ or its libFuzzer runtime is missing (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 2
fi

secs=${1:-60}
jobs=${JOBS:-$(nproc)}
build=build-fuzz
targets=(fuzz_gguf fuzz_spm_tokenizer fuzz_bpe_tokenizer fuzz_proto_convert fuzz_chat_template fuzz_json_schema)
if [ -n "${FUZZ_TARGETS:-}" ]; then read -ra targets <<<"$FUZZ_TARGETS"; fi

t0=$(date +%s)
CC=$CC_FUZZ CXX=$CXX_FUZZ cmake -S . -B "$build" -G Ninja -DSPECSERVE_CUDA=OFF -DSPECSERVE_FUZZ=ON >/dev/null
ninja -C "$build" -j"$jobs" "${targets[@]}"
echo "fuzz: built ${targets[*]} in $(($(date +%s) - t0)) s"

mkdir -p "$build/logs"
run_one() {
  local t=$1
  local corpus=$build/corpus/$t artifacts=$build/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  local dirs=("$corpus" "fuzz/seeds/$t")
  if [ -d "fuzz/crashes/$t" ]; then dirs+=("fuzz/crashes/$t"); fi
  local rc=0
  # -timeout: an input that takes 30 s is a hang, reported as a crash.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$build/bin/$t" -max_total_time="$secs" -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${dirs[@]}" >"$build/logs/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$build/logs/$t.rc"
}

echo "fuzz: ${#targets[@]} targets, ${secs} s each, $jobs at a time"
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
wait

# The last value of `key` in a log ("stat::number_of_executed_units: 123").
# (Empty when absent: a target that crashes on its seeds prints no coverage.)
stat() { { grep -a "^$2:" "$1" || true; } | tail -1 | awk '{print $2}'; }
failed=0
printf '\n%-20s %12s %8s %6s %7s %7s\n' target executions exec/s new cov crashes
for t in "${targets[@]}"; do
  log=$build/logs/$t.log
  rc=$(cat "$build/logs/$t.rc")
  execs=$(stat "$log" stat::number_of_executed_units)
  rate=$(stat "$log" stat::average_exec_per_sec)
  new=$(stat "$log" stat::new_units_added)
  cov=$({ grep -ao 'cov: [0-9]*' "$log" || true; } | tail -1 | awk '{print $2}')
  crashes=0
  if [ "$rc" != 0 ]; then crashes=1; failed=1; fi
  printf '%-20s %12s %8s %6s %7s %7s\n' "$t" "${execs:-?}" "${rate:-?}" "${new:-?}" "${cov:-?}" "$crashes"
done
for t in "${targets[@]}"; do
  rc=$(cat "$build/logs/$t.rc")
  [ "$rc" = 0 ] && continue
  log=$build/logs/$t.log
  echo
  echo "fuzz: $t failed (exit $rc); log $log"
  grep -a -m3 -E 'FUZZ_CHECK failed|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant violated' "$log" || true
  grep -a -E 'Test unit written to|^artifact_prefix' "$log" || true
  echo "  reproduce: $build/bin/$t <that file>; keep it as a regression input in fuzz/crashes/$t/"
done
if ((failed)); then
  echo "fuzz: FAILED"
  exit 1
fi
echo "fuzz: no crashes"
