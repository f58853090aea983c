#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, then run the local demo on
# the bundled models (CPU): the target service, the draft service and the
# coordinator as three processes on loopback, one streamed request through
# them, a few prompts comparing speculative and plain decoding through the
# same services, and the acceptance figures from the coordinator's metrics
# endpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only the four binaries the demo runs (tools/test.sh builds everything).
SPECSERVE_SETUP=demo SPECSERVE_CUDA=${SPECSERVE_CUDA:-OFF} bash tools/build.sh \
  specserve specserve-target specserve-draft specserve-coordinator
bin=build/bin
prompt=${PROMPT:-$'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'}

if [ ! -x "$bin/specserve-coordinator" ]; then
  echo "== in-process speculative decoding (services not built) =="
  exec "$bin/specserve" generate --model models/code-target-7m.gguf --draft models/code-draft-1m.gguf \
    --k adaptive --max-tokens 200 --prompt "$prompt"
fi

# Each service on cores of its own where the machine has two or more: the
# draft (and the coordinator, which mostly waits) on the first core this
# shell may use, the target on the rest. Their --threads default to the cores they are given.
read -r -a cores <<<"$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"
if [ "${#cores[@]}" -ge 2 ]; then
  rest=$(IFS=,; echo "${cores[*]:1}")
  draft_cpus=(--cpus "${cores[0]}"); target_cpus=(--cpus "$rest"); coordinator_cpus=(--cpus "${cores[0]}")
else
  draft_cpus=(); target_cpus=(); coordinator_cpus=()
fi
logs=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
"$bin/specserve-target" --listen 127.0.0.1:50052 --model models/code-target-7m.gguf --metrics-port 9102 \
  "${target_cpus[@]}" >"$logs/target.log" 2>&1 &
pids+=($!)
"$bin/specserve-draft" --listen 127.0.0.1:50053 --model models/code-draft-1m.gguf --metrics-port 9103 \
  "${draft_cpus[@]}" >"$logs/draft.log" 2>&1 &
pids+=($!)
"$bin/specserve-coordinator" --listen 127.0.0.1:50051 --target 127.0.0.1:50052 --draft 127.0.0.1:50053 \
  --metrics-port 9101 "${coordinator_cpus[@]}" >"$logs/coordinator.log" 2>&1 &
pids+=($!)
echo "== target, draft and coordinator starting on loopback (logs in $logs) =="
# Debian's python3-grpcio lives in /usr/bin/python3's packages.
py=/usr/bin/python3; [ -x "$py" ] || py=python3
"$py" clients/python/specserve_client.py generate --target 127.0.0.1:50051 --wait-ready 60 \
  --max-tokens 200 --adaptive-k --stats --prompt "$prompt"
echo
echo "== a few prompts through the services: speculative vs plain decoding (and vs the same loop in process) =="
"$bin/specserve" serve-bench --coordinator 127.0.0.1:50051 --limit 4 --max-tokens 128 --temperatures 0
echo
echo "== coordinator metrics (http://127.0.0.1:9101/metrics) =="
curl -s http://127.0.0.1:9101/metrics | grep -E '^specserve_(draft_tokens_(proposed|accepted)_total|generated_tokens_total|requests_total)' || true
