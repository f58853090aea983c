#!/usr/bin/env bash
# Plain vs speculative decoding under load through the three services:
# starts target, draft and coordinator on free loopback ports and runs
# `specserve serve-bench --concurrency LIST` (closed loop), plain decoding
# and each drafter of --drafters (default: the model drafter) at adaptive K,
# printing the table and writing JSON. Under each drafting row, a line
# from the coordinator's /metrics (serve-bench --coordinator-metrics): its
# rounds by why the K policy chose their K, and the gain it predicted for
# drafting over plain decoding (docs/metrics.md, specserve_k_choices_total).
#
#   bash bench/load_sweep.sh [--pair bundled|realistic] [--concurrency 1,2,4,8,16,32]
#                            [--duration S] [--max-tokens N] [--json FILE] [--plot FILE.png]
#                            [--prompts FILE.jsonl] [--limit N]
#                            [--max-sessions N] [--max-waiting N] [--cpu-activations fp32|int8]
#                            [--k adaptive|N] [--prefix-tokens N] [--repeats R]
#                            [--samples FILE] [--target FILE.gguf] [--batch-gather-ms N]
#                            [--prefill-chunk-tokens N] [--request-rate R]
#                            [--drafters none,model[,ngram]]
#
# --drafters: the rows of each concurrency (serve-bench --drafters): plain
# decoding (none), the draft service (model), the coordinator's n-gram
# prompt lookup with no draft model (ngram). Default none,model.
#
# --samples FILE: every request of the sweep, with each streamed delta's gap
# and tokens (serve-bench --samples-json), to see where a p99 comes from.
#
# --prefix-tokens N runs the repeated-prefix benchmark instead of the sweep
# (serve-bench --prefix-tokens, tools/prefix_bench.h): on fresh services, the
# time to first token of a prompt whose first N tokens an earlier request
# sent, against the same prompt cold; no warm-up, 8 tokens per request unless
# --max-tokens is given.
#
# --repeats R splits each row's --duration into R slices run in turn with
# the other drafter's (plain, speculative, plain, ...) and merged
# (serve-bench --repeats), so that a slow spell of a shared machine falls on
# both columns of a ratio.
#
# --max-sessions / --max-waiting go to the coordinator (64 / 256): with more
# clients than --max-sessions the rest wait in its queue (their wait shows in
# TTFT), or, with --max-waiting 0, are refused and counted as errors.
#
# --batch-gather-ms N goes to the target (its default 30).
#
# SPECSERVE_COORDINATOR_ARGS, when set, is added to the coordinator's flags
# (say "--overlap off").
#
# --request-rate R: Poisson arrivals, R requests a second (open loop: the
# same seeded schedule for both columns) instead of the closed loop; each
# --concurrency row then caps the requests in flight (an arrival with no
# free client waits, and its TTFT counts the wait).
#
# --prefill-chunk-tokens N goes to target and draft (their default 64; 0:
# whole prompts, rpc/model_service.h SetPrefillChunk).
#
# --target FILE.gguf replaces the pair's target (the realistic Q4_K_M one,
# say: ~/.cache/specserve/realistic/target-1b-q4_k_m.gguf).
#
# bundled: code-target-7m with code-draft-1m (models/). realistic: the
# inflated ~1B Q8_0 target and ~100M draft that bench/realistic.sh builds
# into ~/.cache/specserve/realistic (run it once first). Target and draft are
# pinned to cores 0 and 1 (--cpus) when the machine has two or more, the
# coordinator to the draft's core.
# Prompts: ../shared/eval/code_prompts.jsonl when present (read at run
# time), else bench/prompts.jsonl. Needs a build in build/ (tools/build.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${SPECSERVE_BIN:-$root/build/bin}
repeats=1
pair=bundled concurrency=1,2,4,8,16,32 duration=10 max_tokens=64 json="" plot="" prompts="" limit=8
max_sessions=64 max_waiting=256 activations=int8 k=adaptive prefix_tokens="" max_tokens_given="" samples=""
target_override="" gather=() chunk=() rate=() drafters=none,model
while [ $# -gt 0 ]; do
  case $1 in
    --pair) pair=$2; shift 2 ;;
    --concurrency) concurrency=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; max_tokens_given=1; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --plot) plot=$2; shift 2 ;;
    --prompts) prompts=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --max-sessions) max_sessions=$2; shift 2 ;;
    --max-waiting) max_waiting=$2; shift 2 ;;
    --cpu-activations) activations=$2; shift 2 ;;
    --k) k=$2; shift 2 ;;
    --prefix-tokens) prefix_tokens=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    --target) target_override=$2; shift 2 ;;
    --batch-gather-ms) gather=(--batch-gather-ms "$2"); shift 2 ;;
    --prefill-chunk-tokens) chunk=(--prefill-chunk-tokens "$2"); shift 2 ;;
    --request-rate) rate=(--request-rate "$2"); shift 2 ;;
    --drafters) drafters=$2; shift 2 ;;
    *) echo "load_sweep.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $pair in
  bundled) target=$root/models/code-target-7m.gguf; draft=$root/models/code-draft-1m.gguf ;;
  realistic)
    cache=${SPECSERVE_REALISTIC_CACHE:-$HOME/.cache/specserve/realistic}
    target=$cache/target-1b-q8_0.gguf; draft=$cache/draft-100m-q8_0.gguf ;;
  *) echo "load_sweep.sh: --pair bundled|realistic" >&2; exit 2 ;;
esac
[ -n "$target_override" ] && target=$target_override
for f in "$target" "$draft"; do
  [ -f "$f" ] || { echo "load_sweep.sh: missing $f (bench/realistic.sh builds the realistic pair)" >&2; exit 1; }
done
if [ -z "$prompts" ]; then
  prompts=$root/../shared/eval/code_prompts.jsonl
  [ -f "$prompts" ] || prompts=$root/bench/prompts.jsonl
fi
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT; [ -n "${KEEP_LOGS:-}" ] && trap "cp $work/*.log $KEEP_LOGS/; cleanup" EXIT
read -r tp dp cp mp <<<"$(python3 "$root/tools/free_ports.py" 4)"
tcpu=() dcpu=()
if [ "$(nproc)" -ge 2 ]; then tcpu=(--cpus 0); dcpu=(--cpus 1); fi  # the coordinator beside the draft (dcpu)
"$bin/specserve-target" --listen 127.0.0.1:$tp --model "$target" "${tcpu[@]}" --max-sessions 64 --cpu-activations "$activations" "${gather[@]}" "${chunk[@]}" >"$work/target.log" 2>&1 &
pids+=($!)
"$bin/specserve-draft" --listen 127.0.0.1:$dp --model "$draft" "${dcpu[@]}" --max-sessions 64 --cpu-activations "$activations" "${chunk[@]}" >"$work/draft.log" 2>&1 &
pids+=($!)
"$bin/specserve-coordinator" --listen 127.0.0.1:$cp --metrics-port $mp --target 127.0.0.1:$tp --draft 127.0.0.1:$dp \
  --max-sessions "$max_sessions" --max-waiting "$max_waiting" "${dcpu[@]}" ${SPECSERVE_COORDINATOR_ARGS:-} >"$work/coordinator.log" 2>&1 &
pids+=($!)
# Ready when a request through the model drafter succeeds (two tokens: a
# one-token request never drafts, so it never opens a draft session).
for _ in $(seq 600); do
  if "$bin/specserve" client --coordinator 127.0.0.1:$cp --prompt "def" --max-tokens 2 >/dev/null 2>&1; then break; fi
  sleep 0.5
done
sleep 2  # the coordinator reaches the draft service shortly after it serves
if [ -n "$prefix_tokens" ]; then
  [ -n "$max_tokens_given" ] || max_tokens=8
  json_args=()
  [ -n "$json" ] && json_args=(--json "$json")
  "$bin/specserve" serve-bench --coordinator 127.0.0.1:$cp --target-model "$target" --draft-model "$draft" \
    --prompts "$prompts" --max-tokens "$max_tokens" --k "$k" --prefix-tokens "$prefix_tokens" "${json_args[@]}"
  exit 0
fi
# Warm-up: every prompt once through both services (two tokens each: a
# one-token request never drafts, and the draft service would never see the
# prompt), so the rows measure decoding with the prompts' prefixes cached
# (--prefix-cache), not the first row alone paying every cold prefill.
"$bin/specserve" serve-bench --coordinator 127.0.0.1:$cp --target-model "$target" --draft-model "$draft" \
  --prompts "$prompts" --limit "$limit" --max-tokens 2 --temperatures 0 --k 4 --concurrency "$limit" \
  --duration 1 >/dev/null 2>&1 || true
[ -n "$plot" ] && [ -z "$json" ] && json=$work/rows.json
json_args=()
[ -n "$json" ] && json_args=(--json "$json")
[ -n "$samples" ] && json_args+=(--samples-json "$samples")
"$bin/specserve" serve-bench --coordinator 127.0.0.1:$cp --target-model "$target" --draft-model "$draft" \
  --prompts "$prompts" --limit "$limit" --max-tokens "$max_tokens" --temperatures 0 --k "$k" \
  --concurrency "$concurrency" --duration "$duration" --repeats "$repeats" --drafters "$drafters" \
  --coordinator-metrics http://127.0.0.1:$mp "${rate[@]}" "${json_args[@]}"
if [ -n "$plot" ]; then
  python3 "$root/bench/plot_load.py" "$json" "$plot" --title "serve-bench, $pair pair$([ -n "$target_override" ] && echo " ($(basename "$target"))"), K $k vs plain"
fi
