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
deploy_log "PASS"
