#!/usr/bin/env bash
# `specserve serve-bench --concurrency` against the real servers: starts the
# three processes with the bundled models, runs closed-loop load at 1 and 3
# clients (each row two slices, --repeats 2) and an open-loop row, and checks
# the JSON rows: every field there, no errors, percentiles in order, the
# model drafter accepting tokens, an n-gram row (--drafters), and both
# services back to zero open sessions afterwards. Then the same load
# through the coordinator's OpenAI-compatible HTTP API (--openai-url).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
init_python_test
trap 'stop_stack; rm -rf "$work"' EXIT
HTTP_PORT=$(free_ports 1)
COORD_EXTRA=(--http-listen "127.0.0.1:$HTTP_PORT")
start_stack "$work/logs"
fail() { deploy_log "FAIL: $*"; tail -n 20 "$work"/logs/*.log >&2; exit 1; }

bench() {
  "$SPECSERVE_BIN/specserve" serve-bench --coordinator "$COORD_ADDR" \
    --target-model "$DEPLOY_ROOT/models/code-target-7m.gguf" --draft-model "$DEPLOY_ROOT/models/code-draft-1m.gguf" \
    --prompts "$DEPLOY_ROOT/bench/prompts.jsonl" --limit 4 --max-tokens 24 --temperatures 0 --k 4 \
    --duration 3 "$@"
}
bench --concurrency 1,3 --repeats 2 --json "$work/closed.json" --samples-json "$work/samples.json" \
  >"$work/closed.txt" || fail "closed loop"
bench --concurrency 2 --request-rate 4 --json "$work/open.json" >"$work/open.txt" || fail "open loop"
# --drafters: a row for the coordinator's n-gram drafter (no draft service),
# and a clear refusal of an unknown one.
bench --concurrency 1 --drafters none,ngram --json "$work/ngram.json" >"$work/ngram.txt" || fail "--drafters ngram"
bench --concurrency 1 --drafters none,eagle >"$work/bad-drafter.txt" 2>&1 && fail "--drafters eagle succeeded"
grep -q "drafters: none, model or ngram" "$work/bad-drafter.txt" || fail "--drafters eagle: $(cat "$work/bad-drafter.txt")"
bench --openai-url "http://127.0.0.1:$HTTP_PORT" --concurrency 2 --json "$work/openai.json" >"$work/openai.txt" \
  || fail "--openai-url"
bench --openai-url "http://127.0.0.1:$HTTP_PORT" --openai-model no-such-model --concurrency 1 --duration 1 \
  >"$work/bad.txt" 2>&1 && fail "--openai-url with an unknown model succeeded"
grep -q "HTTP 404" "$work/bad.txt" || fail "--openai-url with an unknown model: $(cat "$work/bad.txt")"
cat "$work/closed.txt" "$work/open.txt" "$work/openai.txt" >&2

"$PYTHON" - "$work" "$TARGET_METRICS_PORT" "$DRAFT_METRICS_PORT" <<'PY' || fail "load rows"
import json, math, sys, time, urllib.request
from prometheus_client.parser import text_string_to_metric_families
work, ports = sys.argv[1], sys.argv[2:]
closed = json.load(open(work + "/closed.json"))
open_ = json.load(open(work + "/open.json"))
openai = json.load(open(work + "/openai.json"))
ngram = json.load(open(work + "/ngram.json"))
assert [(r["concurrency"], r["drafter"]) for r in ngram] == [(1, "none"), (1, "ngram")], ngram
n = ngram[1]
assert n["errors"] == 0 and n["requests"] > 0 and n["where"] == "services", n
assert 0 <= n["acceptance_rate"] <= 1 and n["tokens_per_pass"] >= 1, n
assert [(r["concurrency"], r["drafter"], r["where"], r["k"]) for r in openai] == [(2, "server", "openai", None)], openai
o = openai[0]
assert o["errors"] == 0 and o["requests"] > 0 and o["tokens"] > 0, o
assert 0 < o["ttft_p50_ms"] <= o["ttft_p99_ms"] and 0 < o["itl_p50_ms"] <= o["itl_p99_ms"], o
# The coordinator's default drafter is the draft model: its round statistics
# come back in the `specserve` extension of the stream.
assert 0 < o["acceptance_rate"] <= 1 and o["tokens_per_pass"] > 1, o
assert [(r["concurrency"], r["drafter"]) for r in closed] == [(1, "none"), (1, "model"), (3, "none"), (3, "model")], closed
# --repeats 2: each row merges two slices of 1.5 s, run in turn with the other drafter's.
assert [r["repeats"] for r in closed] == [2, 2, 2, 2] and [r["repeats"] for r in open_] == [1, 1], closed
assert [(r["concurrency"], r["drafter"], r["request_rate"]) for r in open_] == [(2, "none", 4), (2, "model", 4)], open_
for r in closed + open_:
    assert r["where"] == "services", r
    assert r["errors"] == 0 and r["requests"] > 0, r
    assert r["throughput_tokens_per_s"] > 0 and r["tokens"] > 0, r
    assert 0 <= r["goodput_tokens_per_s"] <= r["throughput_tokens_per_s"] + 1e-9, r
    for m in ("ttft", "itl", "e2e", "tpot"):
        p50, p90, p99 = r[m + "_p50_ms"], r[m + "_p90_ms"], r[m + "_p99_ms"]
        assert 0 < p50 <= p90 <= p99, (m, r)
    assert r["e2e_p50_ms"] >= r["ttft_p50_ms"], r
    if r["drafter"] == "model":
        assert 0 < r["acceptance_rate"] <= 1 and r["tokens_per_pass"] > 1, r
    else:
        assert r["acceptance_rate"] == 0 and abs(r["tokens_per_pass"] - 1) < 1e-9, r
# --samples-json: every request of the closed rows. Its deltas after the first
# carry fewer tokens than it made and fit in its time after TTFT, and the
# row's TPOT is the nearest-rank percentile of the requests' (E2E - TTFT) /
# (tokens - 1).
samples = json.load(open(work + "/samples.json"))
def nearest_rank(v, q):
    v = sorted(v)
    i = math.ceil(q * len(v))  # as tools/load_bench.cc ComputePercentiles, in the same doubles
    return v[min(len(v), max(i, 1)) - 1]
for r in closed:
    mine = [s for s in samples if s["concurrency"] == r["concurrency"]
            and (s["drafter"] == "none") == (r["drafter"] == "none")]
    assert len(mine) == r["requests"] and all("error" not in s for s in mine), (r, mine[:1])
    for s in mine:
        assert 0 < sum(t for _, t in s["gaps"]) < s["tokens"], s
        assert all(ms > 0 for ms, _ in s["gaps"]), s
        assert sum(ms for ms, _ in s["gaps"]) <= s["e2e_ms"] - s["ttft_ms"] + 1e-6, s
        # When it was sent (ms into its row) and which prompt it sent.
        assert 0 <= s["start_ms"] and 0 <= s["prompt"], s
    # A closed loop: each client sends its next request when the last ends,
    # so the first `concurrency` requests start at once, in prompt order.
    first = sorted(mine, key=lambda s: s["start_ms"])[:r["concurrency"]]
    assert max(s["start_ms"] for s in first) < 1000, first
    tpot = [(s["e2e_ms"] - s["ttft_ms"]) / (s["tokens"] - 1) for s in mine if s["tokens"] > 1]
    for q, name in ((0.5, "tpot_p50_ms"), (0.99, "tpot_p99_ms")):
        assert abs(nearest_rank(tpot, q) - r[name]) < 1e-6, (name, r[name], sorted(tpot))
# Three clients share the target's passes: some batched pass held more than
# one session (a histogram's sum exceeds its count only then). Throughput
# itself is a benchmark figure, not asserted: this machine is shared and noisy.
def samples(port):
    text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=5).read().decode()
    return [s for f in text_string_to_metric_families(text) for s in f.samples]
batch = {s.name: s.value for s in samples(ports[0]) if s.name.startswith("specserve_batch_size_")}
assert batch["specserve_batch_size_sum"] > batch["specserve_batch_size_count"] > 0, batch
# Every session the load opened is closed again on both services.
def open_sessions(port):
    return sum(s.value for s in samples(port) if s.name == "specserve_active_sessions")
for port in ports:
    for _ in range(50):
        if open_sessions(port) == 0: break
        time.sleep(0.1)
    assert open_sessions(port) == 0, ("sessions left open on metrics port", port)
print("load rows:", [(r["concurrency"], r["drafter"], round(r["throughput_tokens_per_s"])) for r in closed + open_])
PY
# The optional plot (bench/plot_load.py, gnuplot): a PNG from the rows.
if command -v gnuplot >/dev/null 2>&1; then
  "$PYTHON" "$DEPLOY_ROOT/bench/plot_load.py" "$work/closed.json" "$work/plot.png" >/dev/null || fail "plot"
  [ "$(head -c 8 "$work/plot.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "plot: not a PNG"
fi
deploy_log "PASS"
