#!/usr/bin/env bash
# Prefix caching through the three real processes: the same long prompt sent
# twice (greedy, the model drafter) gives the same text, and the second time
# both the target and the draft attach the prompt's cached KV blocks instead
# of computing them (specserve_prefix_cache_hit_tokens_total); a prompt that
# shares only the prefix attaches that prefix. Prints both times to first
# token (a figure, not asserted: this machine is shared and noisy).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
init_python_test
trap 'stop_stack; rm -rf "$work"' EXIT
start_stack "$work/logs"
fail() { deploy_log "FAIL: $*"; tail -n 20 "$work"/logs/*.log >&2; exit 1; }

prefix=$("$PYTHON" -c '
import json, sys
lines = [json.loads(l)["prompt"] for l in open(sys.argv[1])]
print("\n".join(lines)[:1500])' "$DEPLOY_ROOT/bench/prompts.jsonl")
ask() {
  "$SPECSERVE_BIN/specserve" client --coordinator "$COORD_ADDR" --prompt "$1" --max-tokens 16 --drafter model \
    --k 4 >"$work/$2.out" 2>"$work/$2.err" || fail "request $2"
}
hit_tokens() {
  "$PYTHON" - "$1" <<'PY'
import sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
print(int(sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
              if s.name == "specserve_prefix_cache_hit_tokens_total")))
PY
}
ask $'def warm_up():\n' warm_up  # first contact: connections, allocations
ask "$prefix"$'\ndef first():\n' cold
[ "$(hit_tokens "$TARGET_METRICS_PORT")" = 0 ] || fail "a hit before any prompt was cached"
ask "$prefix"$'\ndef first():\n' warm
cmp -s "$work/cold.out" "$work/warm.out" || fail "the cached prompt changed the output: $(cat "$work/cold.out") vs $(cat "$work/warm.out")"
target_hits=$(hit_tokens "$TARGET_METRICS_PORT")
draft_hits=$(hit_tokens "$DRAFT_METRICS_PORT")
[ "$target_hits" -ge 256 ] || fail "target attached $target_hits cached positions, expected the prompt's whole blocks"
[ "$draft_hits" -ge 256 ] || fail "draft attached $draft_hits cached positions"
ask "$prefix"$'\nclass Other:\n' shared
[ "$(hit_tokens "$TARGET_METRICS_PORT")" -gt "$target_hits" ] || fail "a prompt sharing the prefix attached nothing"
ttft() { sed -n 's/.*time to first token \([0-9.]*\) ms.*/\1/p' "$work/$1.err"; }
deploy_log "time to first token: cold $(ttft cold) ms, same prompt again $(ttft warm) ms, shared prefix $(ttft shared) ms; cached positions attached: target $target_hits, draft $draft_hits"

# The benchmark of it (serve-bench --prefix-tokens, tools/prefix_bench.h): 2
# cold/warm pairs per drafter on texts that each begin at a different prompt
# (none of them sent before).
"$PYTHON" - "$DEPLOY_ROOT/bench/prompts.jsonl" "$work/rotated.jsonl" <<'PY'
import json, sys
lines = [json.loads(l)["prompt"] for l in open(sys.argv[1]) if l.strip()]
with open(sys.argv[2], "w") as f:
    for i in range(1, 5):  # not from prompt 0: $prefix above began there
        f.write(json.dumps({"prompt": "\n".join(lines[i:] + lines[:i])}) + "\n")
PY
"$SPECSERVE_BIN/specserve" serve-bench --coordinator "$COORD_ADDR" \
  --target-model "$DEPLOY_ROOT/models/code-target-7m.gguf" --draft-model "$DEPLOY_ROOT/models/code-draft-1m.gguf" \
  --prompts "$work/rotated.jsonl" --prefix-tokens 192 --prefix-pairs 2 --max-tokens 4 --k 4 \
  --json "$work/prefix.json" >"$work/prefix.txt" || fail "serve-bench --prefix-tokens: $(cat "$work/prefix.txt")"
cat "$work/prefix.txt" >&2
"$PYTHON" - "$work/prefix.json" <<'PY' || fail "prefix rows"
import json, sys
rows = json.load(open(sys.argv[1]))
assert [(r["pair"], r["drafter"]) for r in rows] == [
    (0, "none"), (1, "none"), ("median", "none"), (0, "model/4"), (1, "model/4"), ("median", "model/4")], rows
for r in rows:
    assert r["where"] == "services" and r["prefix_tokens"] == 192 and r["suffix_tokens"] == 16, r
    assert r["cold_ttft_ms"] > 0 and r["warm_ttft_ms"] > 0, r
# The cached prefix is 12 of the cold prompt's 13 blocks of 16: a warm
# request that took as long as a cold one attached nothing.
for r in rows:
    if r["pair"] == "median":
        assert r["warm_ttft_ms"] < r["cold_ttft_ms"], r
PY
deploy_log "PASS"
