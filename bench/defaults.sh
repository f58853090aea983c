#!/usr/bin/env bash
# What a new user gets without a performance flag: specserve on its defaults
# against llama.cpp on its defaults, same files, same machine.
#
#   bash bench/defaults.sh [--llama-bin DIR] [--cache DIR] [--bin DIR]
#                          [--concurrency 1,2,4] [--duration S] [--max-tokens N]
#                          [--no-load] [--json FILE]
#
# 1. The ~1B inflated target (bench/realistic.sh's construction and cache:
#    code-target-7m to llama-1b, Q8_0 and Q4_K_M) and the ~100M Q8_0 draft.
# 2. Decode t/s at depth 256 and prefill t/s of 64 tokens, at 1 and 2
#    threads: `specserve bench` with no flag but the shape of the run, and,
#    with --llama-bin, llama-bench (`-p 64 -n 0` and `-n 32 -d 256`).
# 3. Unless --no-load: the three services on their defaults (no --threads,
#    --cpus, --cpu-activations or --default-k) and specserve serve-bench's
#    closed-loop load at --concurrency: plain against speculative through
#    the gRPC API, and, with --llama-bin, llama-server on its defaults and
#    specserve's HTTP API through the same OpenAI client path
#    (serve-bench --openai-url).
# Prints one table per part and writes everything as one JSON file
# (default: CACHE/defaults.json). llama.cpp is built from its own source
# beside this checkout (cmake, then `ninja llama-bench llama-server`); this
# script only runs its binaries.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cache="${SPECSERVE_CACHE:-$HOME/.cache/specserve/realistic}"
bin="${SPECSERVE_BIN:-$repo/build/bin}"
shared="${SPECSERVE_SHARED:-$repo/../shared}"
llama_bin=""
concurrency="1,2,4"
duration=30
max_tokens=64
load=1
json=""

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-bin) llama_bin="$2"; shift 2 ;;
    --cache) cache="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --concurrency) concurrency="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --no-load) load=0; shift ;;
    --json) json="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "defaults.sh: unknown flag $1" >&2; usage >&2; exit 2 ;;
  esac
done
mkdir -p "$cache"
[ -n "$json" ] || json="$cache/defaults.json"
specserve="$bin/specserve"
[ -x "$specserve" ] || { echo "defaults.sh: $specserve is missing (bash tools/build.sh)" >&2; exit 1; }
if [ -n "$llama_bin" ]; then
  for b in llama-bench llama-server; do
    [ -x "$llama_bin/$b" ] || { echo "defaults.sh: $llama_bin/$b is missing" >&2; exit 1; }
  done
fi
prompts_src="$shared/eval/code_prompts.jsonl"
[ -f "$prompts_src" ] || { echo "defaults.sh: $prompts_src is missing" >&2; exit 1; }
run="$cache/defaults-run"
rm -rf "$run" && mkdir -p "$run"

model() {  # NAME: models/NAME.gguf, else ../shared/models/NAME.gguf
  for d in "$repo/models" "$shared/models"; do
    [ -f "$d/$1.gguf" ] && { echo "$d/$1.gguf"; return; }
  done
  echo "defaults.sh: model $1 not found" >&2
  exit 1
}
inflate() {  # SMALL SHAPE TYPE OUT
  [ -f "$4" ] && return
  echo "== inflating $(basename "$1") to $2 as $3 -> $4"
  "$specserve" inflate --model "$1" --shape "$2" --type "$3" --out "$4"
}
for t in q8_0 q4_k_m; do inflate "$(model code-target-7m)" llama-1b "$t" "$cache/target-1b-$t.gguf"; done
draft="$cache/draft-100m-q8_0.gguf"
inflate "$(model code-draft-1m)" 1024,8,32,8,4096 q8_0 "$draft"
targets=("$cache/target-1b-q8_0.gguf" "$cache/target-1b-q4_k_m.gguf")

# The held-out prompts, read now, each cut to its last 300 characters.
prompts="$run/prompts.jsonl"
python3 - "$prompts_src" "$prompts" <<'EOF'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        if line.strip():
            out.write(json.dumps({"prompt": json.loads(line)["prompt"][-300:]}) + "\n")
EOF

# 2. Kernels: decode at depth 256 and prefill of 64 tokens.
echo "== specserve bench (defaults), threads 1 and 2"
"$specserve" bench --models "$(IFS=,; echo "${targets[*]}")" --threads 1,2 --prompt-len 64 --depth 256 \
  --json "$run/specserve_bench.json" | tee "$run/specserve_bench.txt"
if [ -n "$llama_bin" ]; then
  echo "== llama-bench (defaults), threads 1 and 2"
  "$llama_bin/llama-bench" -m "${targets[0]}" -m "${targets[1]}" -t 1,2 -p 64 -n 0 -o json >"$run/llama_prefill.json"
  "$llama_bin/llama-bench" -m "${targets[0]}" -m "${targets[1]}" -t 1,2 -p 0 -n 32 -d 256 -o json >"$run/llama_decode.json"
fi

# 3. Load through the services, on their defaults.
pids=()
stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop EXIT
wait_http() {  # URL: until it answers 200 (180 s at most)
  for _ in $(seq 360); do
    curl -sf "$1" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "defaults.sh: $1 did not answer" >&2
  return 1
}
if [ "$load" = 1 ]; then
  read -r tp dp cp hp tm dm cm lp < <(python3 "$repo/tools/free_ports.py" 8)
  "$bin/specserve-target" --listen "127.0.0.1:$tp" --model "${targets[0]}" --metrics-port "$tm" >"$run/target.log" 2>&1 &
  pids+=($!)
  "$bin/specserve-draft" --listen "127.0.0.1:$dp" --model "$draft" --metrics-port "$dm" >"$run/draft.log" 2>&1 &
  pids+=($!)
  "$bin/specserve-coordinator" --listen "127.0.0.1:$cp" --target "127.0.0.1:$tp" --draft "127.0.0.1:$dp" \
    --metrics-port "$cm" --http-listen "127.0.0.1:$hp" >"$run/coordinator.log" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:$hp/ready"
  echo "== specserve through the gRPC API: plain vs speculative, concurrency $concurrency"
  "$specserve" serve-bench --coordinator "127.0.0.1:$cp" --target-model "${targets[0]}" --prompts "$prompts" \
    --limit 8 --max-tokens "$max_tokens" --temperatures 0 --concurrency "$concurrency" --duration "$duration" \
    --repeats 2 --drafters none,model --json "$run/specserve_grpc.json" | tee "$run/specserve_grpc.txt"
  if [ -n "$llama_bin" ]; then
    echo "== specserve through its OpenAI HTTP API, concurrency $concurrency"
    "$specserve" serve-bench --openai-url "http://127.0.0.1:$hp" --target-model "${targets[0]}" --prompts "$prompts" \
      --limit 8 --max-tokens "$max_tokens" --temperatures 0 --concurrency "$concurrency" --duration "$duration" \
      --json "$run/specserve_http.json" | tee "$run/specserve_http.txt"
  fi
  stop
  if [ -n "$llama_bin" ]; then
    "$llama_bin/llama-server" -m "${targets[0]}" --host 127.0.0.1 --port "$lp" >"$run/llama_server.log" 2>&1 &
    pids+=($!)
    wait_http "http://127.0.0.1:$lp/health"
    echo "== llama-server (defaults) through the same OpenAI client, concurrency $concurrency"
    "$specserve" serve-bench --openai-url "http://127.0.0.1:$lp" --target-model "${targets[0]}" --prompts "$prompts" \
      --limit 8 --max-tokens "$max_tokens" --temperatures 0 --concurrency "$concurrency" --duration "$duration" \
      --json "$run/llama_server.json" | tee "$run/llama_server.txt"
    stop
  fi
fi

python3 - "$run" "$json" <<'EOF'
import json, os, sys
run, out_path = sys.argv[1], sys.argv[2]
def load(name):
    p = os.path.join(run, name)
    return json.load(open(p)) if os.path.exists(p) else None
out = {"specserve_bench": load("specserve_bench.json")}
rows = {}
for r in out["specserve_bench"]["results"]:
    kind = "q4_k_m" if "q4_k_m" in r["model"] else "q8_0"
    rows[(kind, r["threads"])] = {"specserve_decode": r["decode_tokens_per_s_at_depth"],
                                  "specserve_prefill": r["prefill_tokens_per_s"]}
for name, field, key in (("llama_prefill.json", "avg_ts", "llama_prefill"), ("llama_decode.json", "avg_ts", "llama_decode")):
    data = load(name)
    out[name[:-5]] = data
    for r in data or []:
        kind = "q4_k_m" if "q4_k_m" in r["model_filename"] else "q8_0"
        rows.setdefault((kind, r["n_threads"]), {})[key] = r[field]
print("\n== decode at depth 256 and prefill of 64 tokens, tokens/s, every binary on its defaults")
print(f"{'file':8} {'threads':>7} {'llama.cpp decode':>17} {'specserve decode':>17} {'ratio':>6} "
      f"{'llama.cpp prefill':>18} {'specserve prefill':>18} {'ratio':>6}")
def ratio(a, b):
    return f"{a / b:6.2f}" if a and b else "     -"
def cell(v, w):
    return f"{v:{w}.1f}" if v else " " * (w - 1) + "-"
for (kind, th), r in sorted(rows.items()):
    ld, sd, lp, sp = (r.get(k) for k in ("llama_decode", "specserve_decode", "llama_prefill", "specserve_prefill"))
    print(f"{kind:8} {th:7d} {cell(ld, 17)} {cell(sd, 17)} {ratio(sd, ld)} {cell(lp, 18)} {cell(sp, 18)} {ratio(sp, lp)}")
table = {"kernels": [{"file": k, "threads": t, **v} for (k, t), v in sorted(rows.items())]}
for name in ("specserve_grpc", "specserve_http", "llama_server"):
    out[name] = load(name + ".json")
out["table"] = table
json.dump(out, open(out_path, "w"), indent=2)
print(f"\n(the load runs' tables are above; all of it in {out_path})")
EOF
