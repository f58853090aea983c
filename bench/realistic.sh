#!/usr/bin/env bash
# Speculative decoding where it is meant to pay: a ~1B target and a ~100M
# draft made from the bundled models by `specserve inflate` (the same
# function, so the small pair's acceptance, with a real model's bytes per
# token), measured in process and through the three services.
#
#   target: code-target-7m inflated to llama-1b (2048 wide, 16 layers,
#           48 / 12 heads, ffn 8192; 1.2 B parameters) in Q8_0 and Q4_K_M
#   draft:  code-draft-1m inflated to 1024,8,32,8,4096 (132 M) in Q8_0
#
# The files are built once into the cache folder ($SPECSERVE_CACHE, else
# ~/.cache/specserve/realistic) and reused. Then:
#   1. specserve bench: prefill, decode and pass costs of the target(s) and
#      the draft;
#   2. specserve spec-bench: plain vs speculative (K 2/4/adaptive, T 0 and 1)
#      at 1 and 2 threads, with acceptance and tokens per pass;
#   3. the three services (target and draft pinned to separate cores when
#      taskset exists; --target-cores 2: the target on both, the draft
#      sharing one) and specserve serve-bench: plain vs speculative through
#      them and in process at as many threads as the target has;
# and prints a summary table and writes all of it as one JSON file.
# SPECSERVE_COORDINATOR_ARGS, when set, is added to the coordinator's flags
# (say "--overlap off", to compare with the draft's look-ahead off).
# Prompts are the held-out ones in ../shared/eval (read now), the tail of each
# cut to --prompt-chars. The defaults (2 prompts of ~100 tokens x 64 new
# tokens, the Q8_0 target) take about 15 minutes on a 2-core machine once the
# files exist; the first run adds the inflation (about 3 minutes, 2 GB of
# memory). Flags widen it: --targets q8_0,q4_k_m --limit 8 --max-tokens 128.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cache="${SPECSERVE_CACHE:-$HOME/.cache/specserve/realistic}"
bin="${SPECSERVE_BIN:-$repo/build/bin}"
shared="${SPECSERVE_SHARED:-$repo/../shared}"
prompts_src=""
limit=2
max_tokens=64
prompt_chars=300
threads="1,2"
bench_threads="1"
targets="q8_0"
ks="2,4,adaptive"
temperatures="0,1"
serve_k="adaptive"
target_cores=1
in_process_threads=""
services=1
in_process=1
json=""
activations="int8"

usage() {
  cat <<EOF
usage: bench/realistic.sh [flags]
  --cache DIR          where the inflated models live (default: \$SPECSERVE_CACHE or ~/.cache/specserve/realistic)
  --bin DIR            folder with specserve and the three servers (default: \$SPECSERVE_BIN or build/bin)
  --prompts FILE       JSON-lines prompts (default: ../shared/eval/code_prompts.jsonl)
  --limit N            prompts per configuration (default: $limit)
  --max-tokens N       new tokens per prompt (default: $max_tokens)
  --prompt-chars N     keep the last N characters of each prompt (default: $prompt_chars; 0: all)
  --threads LIST       spec-bench thread counts (default: $threads)
  --bench-threads LIST specserve bench thread counts (default: $bench_threads)
  --targets LIST       target formats to measure: q8_0, q4_k_m (default: $targets; both are built)
  --ks LIST            spec-bench K values (default: $ks)
  --temperatures LIST  (default: $temperatures)
  --serve-k K          K through the services, a number or adaptive (default: $serve_k)
  --target-cores N     the services' layout: 1, target and draft on a core each (cores 0 and 1);
                       2, the target on both cores with 2 threads, the draft sharing core 1 (default: $target_cores)
  --in-process-threads N  threads of serve-bench's in-process comparison (default: the services' target threads;
                       2 with --target-cores 1 compares a core each against one process on both cores)
  --no-services        skip the three-process runs
  --services-only      only the three-process runs (the summary keeps the last run's other results)
  --cpu-activations A  fp32 or int8 matrix products everywhere (default: $activations; docs/performance_model.md)
  --json FILE          the combined results (default: CACHE/results.json)
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --prompts) prompts_src="$2"; shift 2 ;;
    --limit) limit="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --prompt-chars) prompt_chars="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --bench-threads) bench_threads="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --ks) ks="$2"; shift 2 ;;
    --temperatures) temperatures="$2"; shift 2 ;;
    --serve-k) serve_k="$2"; shift 2 ;;
    --target-cores) target_cores="$2"; shift 2 ;;
    --in-process-threads) in_process_threads="$2"; shift 2 ;;
    --no-services) services=0; shift ;;
    --services-only) in_process=0; shift ;;
    --json) json="$2"; shift 2 ;;
    --cpu-activations) activations="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "realistic.sh: unknown flag $1" >&2; usage >&2; exit 2 ;;
  esac
done
case "$target_cores" in 1|2) ;; *) echo "realistic.sh: --target-cores 1|2" >&2; exit 2 ;; esac
in_process_threads="${in_process_threads:-$target_cores}"
case "$in_process_threads" in [1-9]|[1-9][0-9]) ;; *) echo "realistic.sh: --in-process-threads N (1-99)" >&2; exit 2 ;; esac
[ -n "$prompts_src" ] || prompts_src="$shared/eval/code_prompts.jsonl"
mkdir -p "$cache"
[ -n "$json" ] || json="$cache/results.json"
specserve="$bin/specserve"
for f in "$specserve" "$prompts_src"; do
  [ -e "$f" ] || { echo "realistic.sh: $f is missing" >&2; exit 1; }
done

model() {  # NAME: models/NAME.gguf, else ../shared/models/NAME.gguf
  for d in "$repo/models" "$shared/models"; do
    [ -f "$d/$1.gguf" ] && { echo "$d/$1.gguf"; return; }
  done
  echo "realistic.sh: model $1 not found" >&2
  exit 1
}

# 0. The inflated models (once).
draft_shape="1024,8,32,8,4096"
inflate() {  # SMALL SHAPE TYPE OUT
  if [ ! -f "$4" ]; then
    echo "== inflating $(basename "$1") to $2 as $3 -> $4"
    "$specserve" inflate --model "$1" --shape "$2" --type "$3" --out "$4"
  fi
}
for t in q8_0 q4_k_m; do
  inflate "$(model code-target-7m)" llama-1b "$t" "$cache/target-1b-$t.gguf"
done
draft="$cache/draft-100m-q8_0.gguf"
inflate "$(model code-draft-1m)" "$draft_shape" q8_0 "$draft"

# The prompts, read now: the first --limit, each cut to its last --prompt-chars.
prompts="$cache/prompts.jsonl"
python3 - "$prompts_src" "$prompts" "$limit" "$prompt_chars" <<'EOF'
import json, sys
src, dst, limit, chars = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = []
for line in open(src):
    if line.strip() and len(out) < limit:
        p = json.loads(line)["prompt"]
        out.append({"prompt": p[-chars:] if chars > 0 else p})
with open(dst, "w") as f:
    f.writelines(json.dumps(o) + "\n" for o in out)
EOF

run_dir="$cache/run"
if [ "$in_process" = 1 ]; then rm -rf "$run_dir"; fi
mkdir -p "$run_dir"
t_start=$(date +%s)

if [ "$in_process" = 1 ]; then
# 1. Plain speed of each target format and of the draft.
bench_models=""
for t in ${targets//,/ }; do bench_models="$bench_models$cache/target-1b-$t.gguf,"; done
echo "== specserve bench (threads $bench_threads)"
"$specserve" bench --models "$bench_models$draft" --threads "$bench_threads" --prompt-len 128 --depth 256 \
  --cpu-activations "$activations" \
  --json "$run_dir/bench.json"

# 2. In process, one target format at a time.
for t in ${targets//,/ }; do
  for th in ${threads//,/ }; do
    echo "== specserve spec-bench, target-1b-$t, $th thread(s)"
    "$specserve" spec-bench --target "$cache/target-1b-$t.gguf" --draft "$draft" --prompts "$prompts" \
      --limit "$limit" --max-tokens "$max_tokens" --threads "$th" --temperatures "$temperatures" --ks "$ks" \
      --cpu-activations "$activations" \
      --json "$run_dir/spec_bench_${t}_$th.json"
  done
done

fi

# 3. Through the three services, one target format at a time.
pids=()
stop_services() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_services EXIT
wait_for() {  # TEXT LOG...: until every LOG has a line with TEXT (120 s at most)
  local text="$1" log
  shift
  for log in "$@"; do
    for _ in $(seq 240); do
      grep -q "$text" "$log" 2>/dev/null && break
      sleep 0.5
    done
    grep -q "$text" "$log" || { echo "realistic.sh: no '$text' in $log" >&2; tail -5 "$log" >&2; exit 1; }
  done
}
if [ "$services" = 1 ]; then
  for b in specserve-target specserve-draft specserve-coordinator; do
    [ -x "$bin/$b" ] || { echo "realistic.sh: $bin/$b is missing (or pass --no-services)" >&2; exit 1; }
  done
  read -r tp dp cp tm dm cm < <(python3 "$repo/tools/free_ports.py" 6 | tr '\n' ' '; echo)
  # The coordinator goes beside the draft, off the target's core, so that
  # its threads never wake on the core of a verify pass: a steadier layout,
  # not a faster one (level with leaving it to the scheduler;
  # docs/decisions/0015-service-cores.md).
  pin0=() pin1=() coord_cpus=()
  if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    pin0=(taskset -c 0) pin1=(taskset -c 1) coord_cpus=(--cpus 1)
    [ "$target_cores" = 2 ] && pin0=(taskset -c 0,1)
  fi
  for t in ${targets//,/ }; do
    if [ "$target_cores" = 2 ]; then
      echo "== services: target-1b-$t on 2 threads${pin0:+ (cores 0,1)}, the draft on 1${pin1:+ (core 1)}"
    else
      echo "== services: target-1b-$t and the draft, one thread each${pin0:+, on cores 0 and 1}"
    fi
    "${pin0[@]}" "$bin/specserve-target" --listen "127.0.0.1:$tp" --model "$cache/target-1b-$t.gguf" \
      --threads "$target_cores" --cpu-activations "$activations" --metrics-port "$tm" >"$run_dir/target-$t.log" 2>&1 &
    pids+=($!)
    "${pin1[@]}" "$bin/specserve-draft" --listen "127.0.0.1:$dp" --model "$draft" --threads 1 \
      --cpu-activations "$activations" --metrics-port "$dm" >"$run_dir/draft-$t.log" 2>&1 &
    pids+=($!)
    # The coordinator starts once both services listen, and waits for a slow
    # draft rather than falling back to n-grams (a loaded machine).
    wait_for "listening on port" "$run_dir/target-$t.log" "$run_dir/draft-$t.log"
    "$bin/specserve-coordinator" --listen "127.0.0.1:$cp" --target "127.0.0.1:$tp" --draft "127.0.0.1:$dp" \
      --draft-timeout-ms 0 --metrics-port "$cm" "${coord_cpus[@]}" ${SPECSERVE_COORDINATOR_ARGS:-} >"$run_dir/coordinator-$t.log" 2>&1 &
    pids+=($!)
    wait_for "listening on port" "$run_dir/coordinator-$t.log"
    "$specserve" serve-bench --coordinator "127.0.0.1:$cp" --target-model "$cache/target-1b-$t.gguf" \
      --draft-model "$draft" --prompts "$prompts" --limit "$limit" --max-tokens "$max_tokens" \
      --temperatures "$temperatures" --k "$serve_k" --threads "$in_process_threads" \
      --cpu-activations "$activations" --json "$run_dir/serve_bench_$t.json"
    stop_services
  done
fi

# Summary: one table and one JSON file.
python3 - "$run_dir" "$json" "$(( $(date +%s) - t_start ))" "$limit" "$max_tokens" "$activations" "$target_cores" "$in_process_threads" <<'EOF'
import glob, json, os, sys
run_dir, out_path, seconds, limit, max_tokens, activations = sys.argv[1:3] + [int(sys.argv[3])] + sys.argv[4:7]
target_cores = int(sys.argv[7])  # the services' target threads
in_process_threads = int(sys.argv[8])  # the in-process comparison's
load = lambda p: json.load(open(p)) if os.path.exists(p) else None
bench = load(os.path.join(run_dir, "bench.json"))
spec = []  # (target format, row)
for p in sorted(glob.glob(os.path.join(run_dir, "spec_bench_*.json"))):
    t = os.path.basename(p)[len("spec_bench_"):-5].rsplit("_", 1)[0]
    spec += [(t, r) for r in load(p)]
serve = {}
for p in sorted(glob.glob(os.path.join(run_dir, "serve_bench_*.json"))):
    serve[os.path.basename(p)[len("serve_bench_"):-5]] = load(p)
print(f"\n== summary ({limit} prompts x {max_tokens} tokens, {seconds} s of benchmarks, {activations} activations)")
if bench:
    print(f"{'model':44} {'thr':>3} {'prefill t/s':>11} {'decode t/s':>10} {'@depth':>7} {'GB/token':>8} {'of bw':>6}")
    for r in bench["results"]:
        print(f"{r['model'][:44]:44} {r['threads']:3d} {r['prefill_tokens_per_s']:11.1f} {r['decode_tokens_per_s']:10.2f} "
              f"{r['decode_tokens_per_s_at_depth']:7.2f} {r['weight_bytes_per_token'] / 1e9:8.3f} {r['bandwidth_fraction_at_depth']:6.2f}")
print(f"\n{'where':10} {'target':10} {'thr':>3} {'T':>3} {'drafter':7} {'K':>8} {'tok/s':>7} {'vs plain':>8} {'accept':>6} {'tok/pass':>8}")
def fmt(where, target, thr, r, tps, speed):
    print(f"{where:10} {target:10} {thr:>3} {r['temperature']:3.0f} {r['drafter']:7} {str(r['k']):>8} {tps:7.2f} "
          f"{speed:7.2f}x {r['acceptance_rate']:6.3f} {r['tokens_per_pass']:8.2f}")
seen_plain = set()
for t, r in spec:
    key = (t, r["threads"], r["temperature"])
    if key not in seen_plain:
        seen_plain.add(key)
        print(f"{'in-proc':10} {t:10} {r['threads']:>3} {r['temperature']:3.0f} {'none':7} {'-':>8} "
              f"{r['plain_tokens_per_s']:7.2f} {1:7.2f}x")
    fmt("in-proc", t, r["threads"], r, r["tokens_per_s"], r["speedup"])
for t, rows in serve.items():
    for r in rows:
        thr = in_process_threads if r["where"].startswith("in-process") else target_cores
        fmt(r["where"][:10], t, thr, r, r["tokens_per_s"], r["speedup_vs_plain"])
json.dump({"cpu_activations": activations, "target_cores": target_cores, "in_process_threads": in_process_threads, "limit": int(limit), "max_tokens": int(max_tokens), "seconds": seconds, "bench": bench,
           "spec_bench": [dict(r, format=t) for t, r in spec], "serve_bench": serve}, open(out_path, "w"), indent=2)
print(f"\nJSON: {out_path}")
EOF
