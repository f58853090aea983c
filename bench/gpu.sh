#!/usr/bin/env bash
# GPU checks and benchmark of the CUDA backend: builds the GPU test binaries
# and the services for sm_90, runs the GPU tests (kernel parity:
# tests/cuda_ops_test.cc, exact verify tokens: tests/cuda_verify_parity_test.cc,
# golden models and batch invariance through the CUDA backend:
# tests/cuda_backend_test.cc, the verify step on the device:
# tests/forward_verify_test.cc, the draft's sampling step on the device:
# tests/forward_sample_test.cc), then the benchmark (tests/cuda_bench_test.cc:
# copy bandwidth and decode floor, decode ms/token, the verify pass for
# K+1 = 1..16 and the verify kernel for V = 4096 and 128256), then the three
# services on the GPU with device verification: the target inflated to the
# llama-8b shape and the draft to llama-1b (`specserve inflate`), plain vs
# speculative tokens/s through the coordinator, the verify kernel's time per
# round (the target's specserve_verify_duration_seconds) and the round time
# split into draft / verify / network; one short table at the end.
#
# The lent GPU machine has CUDA but no gRPC, protobuf or Abseil libraries
# (../shared/GPU.md), so the work is split in two:
#   bench/gpu.sh build   here: build into build-gpu/ ($BUILD_DIR) and pack
#                        out/gpu.tar.xz (the binaries, every shared library
#                        they load except glibc, libstdc++, libgcc and CUDA's
#                        own, and golden.json)
#   bench/gpu.sh run     on the GPU machine, from the repository root, with
#                        out/gpu.tar.xz carried: tests, benchmark, services
#   bench/gpu.sh         both (a machine that can build and has a GPU)
# Device call: run(command="bash bench/gpu.sh run", carry=["out/gpu.tar.xz"],
# timeout_s=540). Each stage has its own time limit (tests 150 s, benchmark
# 150 s, services about 300 s), and every line is also in $OUT/gpu.log.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bundle=out/gpu
build_dir=${BUILD_DIR:-build-gpu}
mode=${1:-all}
gpu_tests="cuda_ops_test cuda_verify_parity_test cuda_backend_test forward_verify_test forward_sample_test e2e_verify_location_test"
# Full logs go to $OUT on the device machine (what comes back from a device
# call), else out/gpu-logs: gpu.log (everything printed), tests.log (every GPU
# test's full output), services.log (the three servers' logs).
log_dir=${OUT:-$root/out/gpu-logs}
stage() { echo "== [${SECONDS}s] $*"; }
services="specserve-target specserve-draft specserve-coordinator specserve"

build() {
  local jobs=${JOBS:-$(nproc)}
  cmake -S . -B "$build_dir" -G Ninja -DSPECSERVE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$build_dir" -j"$jobs" $gpu_tests cuda_bench_test $services
  rm -rf "$bundle" "$bundle.tar.xz"
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/shared/models" "$bundle/shared/golden"
  for t in $gpu_tests cuda_bench_test $services; do
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
  # The repository's models travel with the checkout; the 14m target (25 MB
  # compressed) would take the call past the 64 MiB it may carry, so the
  # GPU tests' 14m golden case skips there and the benchmark uses the 7m.
  [ -f "$shared/golden/golden.json" ] && cp "$shared/golden/golden.json" "$bundle/shared/golden/"
  # The device call carries at most 64 MiB: one compressed archive.
  tar -C "$(dirname "$bundle")" -cJf "$bundle.tar.xz" "$(basename "$bundle")"
  du -sh "$bundle" "$bundle.tar.xz"
}

# The three services on device 0 (one GPU machine: draft and target share
# it), the target verifying on the device; plain vs speculative through the
# coordinator, then one table.
services_bench() {
  local bin=$root/$bundle/bin work
  work=$(mktemp -d)
  local target=$work/target-8b.gguf draft=$work/draft-1b.gguf shape_t=llama-8b shape_d=llama-1b
  stage "services: inflating the target (llama-8b) and the draft (llama-1b)"
  if ! timeout 150 "$bin/specserve" inflate --model models/code-target-7m.gguf --shape llama-8b --type f16 \
      --out "$target" >/dev/null || ! timeout 60 "$bin/specserve" inflate --model models/code-draft-1m.gguf \
      --shape llama-1b --type f16 --out "$draft" >/dev/null; then
    echo "inflation failed or took too long: the bundled 7m target and 1m draft instead"
    target=$root/models/code-target-7m.gguf draft=$root/models/code-draft-1m.gguf shape_t=7m shape_d=1m
  fi
  read -r tp dp cp tm dm cm < <(python3 tools/free_ports.py 6 | tr '\n' ' '; echo)
  local pids=()
  "$bin/specserve-target" --backend cuda --device 0 --listen "127.0.0.1:$tp" --model "$target" \
    --max-sessions 4 --metrics-port "$tm" >"$work/target.log" 2>&1 & pids+=($!)
  "$bin/specserve-draft" --backend cuda --device 0 --listen "127.0.0.1:$dp" --model "$draft" \
    --max-sessions 4 --metrics-port "$dm" >"$work/draft.log" 2>&1 & pids+=($!)
  local ok=0
  for _ in $(seq 240); do
    grep -q "listening on port" "$work/target.log" && grep -q "listening on port" "$work/draft.log" && { ok=1; break; }
    sleep 0.5
  done
  if [ "$ok" = 1 ]; then
    stage "services: both model services listening"
    "$bin/specserve-coordinator" --listen "127.0.0.1:$cp" --target "127.0.0.1:$tp" --draft "127.0.0.1:$dp" \
      --draft-timeout-ms 0 --metrics-port "$cm" >"$work/coordinator.log" 2>&1 & pids+=($!)
    sleep 2
    timeout 150 "$bin/specserve" serve-bench --coordinator "127.0.0.1:$cp" --target-model "$target" \
      --prompts bench/prompts.jsonl --max-tokens 128 --temperatures 0,1 --k 4 --concurrency 1 --duration 15 \
      --json "$work/serve.json" || ok=0
    for port in "$tm" "$cm"; do python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" >"$work/metrics-$port.txt" || true; done
  else
    echo "the services did not start:"; tail -5 "$work/target.log" "$work/draft.log"
  fi
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  for f in target draft coordinator; do
    [ -f "$work/$f.log" ] && { echo "---- $f.log"; tail -n 200 "$work/$f.log"; }
  done >"$log_dir/services.log" 2>&1
  [ "$ok" = 1 ] || return 1
  python3 - "$work/serve.json" "$work/metrics-$tm.txt" "$work/metrics-$cm.txt" "$shape_t" "$shape_d" <<'PY'
import json, re, sys
rows = json.load(open(sys.argv[1]))
def metric(path, name, labels=""):
    pat = re.compile(r"^" + re.escape(name) + r"\{[^}]*" + re.escape(labels) + r"[^}]*\} (\S+)$|^" + re.escape(name) + r" (\S+)$")
    total = 0.0
    for line in open(path):
        m = pat.match(line.strip())
        if m: total += float(m.group(1) or m.group(2))
    return total
t, c = sys.argv[2], sys.argv[3]
vs, vn = metric(t, "specserve_verify_duration_seconds_sum"), metric(t, "specserve_verify_duration_seconds_count")
where = "cuda" if metric(t, "specserve_verify_location", 'location="cuda"') == 1 else "cpu"
phase = {p: (metric(c, "specserve_round_duration_seconds_sum", 'phase="%s"' % p),
             metric(c, "specserve_round_duration_seconds_count", 'phase="%s"' % p)) for p in ("draft", "verify", "network")}
print("== services: target %s, draft %s, both on GPU 0, verification on %s" % (sys.argv[4], sys.argv[5], where))
print("%-5s %-8s %10s" % ("T", "drafter", "tokens/s"))
for r in rows:
    print("%-5s %-8s %10.1f" % (r.get("temperature"), r.get("drafter"), r.get("throughput_tokens_per_s", 0)))
vb = metric(t, "specserve_verify_bytes_to_host_total")
print("verify kernel per round: %.3f ms, %.0f bytes back (%d rounds)" % (1e3 * vs / max(vn, 1), vb / max(vn, 1), vn))
print("round split (ms/round): " + ", ".join("%s %.2f" % (p, 1e3 * s / max(n, 1)) for p, (s, n) in phase.items()))
PY
}

run() {
  if [ ! -d "$bundle" ] && [ -f "$bundle.tar.xz" ]; then
    mkdir -p "$(dirname "$bundle")" && tar -C "$(dirname "$bundle")" -xJf "$bundle.tar.xz"
  fi
  for t in $gpu_tests; do
    [ -x "$bundle/bin/$t" ] || { echo "no $bundle/bin/$t: run 'bench/gpu.sh build' first" >&2; exit 2; }
  done
  export LD_LIBRARY_PATH="$root/$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  # The binaries were built in another checkout: give them the models and
  # golden.json through $SPECSERVE_SHARED (models/: the repository's).
  local shared
  shared=$(mktemp -d)
  mkdir -p "$shared/models"
  ln -s "$root/$bundle/shared/golden" "$shared/golden"
  for m in "$root"/models/*.gguf "$root/$bundle"/shared/models/*.gguf; do
    [ -f "$m" ] && ln -sf "$m" "$shared/models/"
  done
  export SPECSERVE_SHARED=$shared
  export SPECSERVE_BIN_DIR=$root/$bundle/bin  # the servers e2e_verify_location_test starts
  # On the GPU machine a CUDA runtime that cannot start is a failure, not a
  # run in which every GPU test skips (tests/backend_ops_harness.h).
  export SPECSERVE_REQUIRE_CUDA=1
  mkdir -p "$log_dir"
  exec > >(tee "$log_dir/gpu.log") 2>&1
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
  local status=0
  stage "GPU tests (full output in $log_dir/tests.log)"
  local deadline=$((SECONDS + 150))  # 150 s for the GPU tests together
  for t in $gpu_tests; do
    local rc=0 t0=$SECONDS
    echo "######## $t" >>"$log_dir/tests.log"
    timeout $((deadline > SECONDS ? deadline - SECONDS : 1)) "$bundle/bin/$t" >>"$log_dir/tests.log" 2>&1 || rc=$?
    [ "$rc" = 0 ] || status=$rc
    printf '%-26s rc %-3s %3ss  ' "$t" "$rc" $((SECONDS - t0))
    awk -v t="######## $t" '$0 == t {on = 1; next} /^######## / {on = 0}
      on && /^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?[.,]/ {printf "%s ", $0} END {print ""}' "$log_dir/tests.log"
    # The first failures, with the assertion that says why.
    awk -v t="######## $t" '$0 == t {on = 1; next} /^######## / {on = 0} on' "$log_dir/tests.log" |
      { grep -A4 -E ': Failure$' || true; } | sed -n '1,6s/^/    /p' || true
  done
  stage "benchmark"
  SPECSERVE_BENCH=1 timeout 150 "$bundle/bin/cuda_bench_test" --gtest_brief=1 || status=$?
  services_bench || status=1
  # Out-of-bounds accesses and races in the verify and sampling kernels, when
  # time is left (compute-sanitizer ships with CUDA; a run is slow).
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [ -x "$sanitizer" ] && [ "$SECONDS" -lt 420 ]; then
    for tool in memcheck racecheck; do
      stage "compute-sanitizer --tool $tool cuda_verify_parity_test"
      timeout 40 "$sanitizer" --tool "$tool" --print-limit 5 --error-exitcode 9 \
        "$bundle/bin/cuda_verify_parity_test" --gtest_brief=1 2>&1 | tail -n 15 || true
    done
  fi
  stage "done, status $status"
  exit "$status"
}

case "$mode" in
  build) build ;;
  run) run ;;
  all) build && run ;;
  *) echo "usage: bench/gpu.sh [build|run]" >&2; exit 2 ;;
esac
