#!/usr/bin/env bash
# The Python client (clients/python) and `specserve client` against the real servers: starts
# specserve-target, specserve-draft and specserve-coordinator on loopback with
# the bundled models, streams generations through the coordinator and checks
# what comes back; also checks specserve-health-probe where it is built.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
init_python_test
trap 'stop_stack; rm -rf "$work"' EXIT
start_stack "$work/logs"
deploy_log "servers up: coordinator $COORD_ADDR, target $TARGET_ADDR, draft $DRAFT_ADDR"

client() { "$PYTHON" "$CLIENT_PY" "$1" --target "$COORD_ADDR" --timeout 120 "${@:2}"; }
fail() { deploy_log "FAIL: $*"; tail -n 20 "$work"/logs/*.log >&2; exit 1; }
prompt=$'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'

# 1. A streamed greedy generation with the draft model: text, tokens, stats.
client generate --prompt "$prompt" --max-tokens 48 --k 4 --drafter model --json >"$work/spec.json"
"$PYTHON" - "$work/spec.json" <<'EOF' || fail "streamed generation"
import json, sys
r = json.load(open(sys.argv[1]))
s = r["stats"]
assert r["text"].strip(), "no text"
assert r["finish_reason"] in ("stop", "length"), r["finish_reason"]
assert len(r["token_ids"]) == s["tokens"] > 0, (len(r["token_ids"]), s["tokens"])
assert s["drafter"] == "model", s["drafter"]
assert s["drafted"] > 0 and 0 <= s["accepted"] <= s["drafted"], s
assert abs(s["acceptance_rate"] - s["accepted"] / s["drafted"]) < 1e-6, s
assert s["rounds"] > 0 and s["time_to_first_token_seconds"] > 0, s
print("streamed: %d tokens in %d rounds, acceptance %.2f" % (s["tokens"], s["rounds"], s["acceptance_rate"]))
EOF

# 2. Greedy speculative output is plain greedy decoding, token for token,
#    whatever the drafter; GenerateUnary returns the same as the stream.
for d in none ngram; do
  client generate --prompt "$prompt" --max-tokens 48 --k 4 --drafter "$d" --json >"$work/$d.json"
done
client generate --prompt "$prompt" --max-tokens 48 --k 4 --drafter model --unary --json >"$work/unary.json"
"$PYTHON" - "$work" <<'EOF' || fail "greedy identity"
import json, sys
load = lambda n: json.load(open("%s/%s.json" % (sys.argv[1], n)))
spec, plain, ngram, unary = load("spec"), load("none"), load("ngram"), load("unary")
assert plain["stats"]["drafted"] == 0, plain["stats"]
for name, r in (("ngram", ngram), ("unary", unary), ("model", spec)):
    assert r["token_ids"] == plain["token_ids"], (name, r["token_ids"], plain["token_ids"])
    assert r["text"] == plain["text"], (name, r["text"], plain["text"])
print("greedy identity: model, ngram, unary == plain decoding")
EOF

# 3. The plain (non-JSON) mode prints the streamed text.
client generate --prompt "$prompt" --max-tokens 48 --k 4 >"$work/plain.txt"
"$PYTHON" - "$work" <<'EOF' || fail "printed text"
import json, sys
printed = open(sys.argv[1] + "/plain.txt").read()
want = json.load(open(sys.argv[1] + "/spec.json"))["text"]
assert printed == want + "\n", (printed, want)
EOF

# 4. Sampling with a seed and a fixed K is reproducible. (With adaptive K it
#    need not be: K follows measured timings, and which random draws decide
#    acceptance depends on K.) Greedy with adaptive K is still plain greedy.
client generate --prompt "$prompt" --max-tokens 32 --temperature 0.8 --seed 7 --k 3 --json >"$work/s1.json"
client generate --prompt "$prompt" --max-tokens 32 --temperature 0.8 --seed 7 --k 3 --json >"$work/s2.json"
client generate --prompt "$prompt" --max-tokens 48 --adaptive-k --json >"$work/adaptive.json"
"$PYTHON" - "$work" <<'EOF' || fail "seeded sampling / adaptive K"
import json, sys
load = lambda n: json.load(open("%s/%s.json" % (sys.argv[1], n)))
a, b = load("s1"), load("s2")
assert a["token_ids"] == b["token_ids"] and a["token_ids"], (a, b)
assert load("adaptive")["token_ids"] == load("none")["token_ids"], "adaptive K greedy != plain greedy"
EOF

# 5. GetModelInfo names the models; a bad request is a clear error.
client info >"$work/info.json"
"$PYTHON" - "$work/info.json" <<'EOF' || fail "model info"
import json, sys
i = json.load(open(sys.argv[1]))
assert i["target_model"] and i["draft_model"] and i["vocab_size"] == 4096, i
EOF
set +e
client generate --prompt "$prompt" --k 99 >/dev/null 2>"$work/bad.err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q INVALID_ARGUMENT "$work/bad.err" || fail "k=99: rc $rc, $(cat "$work/bad.err")"

# 6. specserve-health-probe (where built): SERVING on every server, a failed
#    call on a port nothing listens on.
probe=$SPECSERVE_BIN/specserve-health-probe
if [ -x "$probe" ]; then
  for a in "$COORD_ADDR" "$TARGET_ADDR" "$DRAFT_ADDR"; do
    "$probe" --addr "$a" >/dev/null || fail "health probe on $a"
  done
  SPECSERVE_HEALTH_ADDR=$COORD_ADDR "$probe" --quiet || fail "health probe from \$SPECSERVE_HEALTH_ADDR"
  set +e
  "$probe" --addr "127.0.0.1:$(free_port)" --timeout 0.5 >/dev/null 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "health probe on a closed port: rc $rc, want 2"
else
  deploy_log "specserve-health-probe not built: probe checks skipped"
fi

# 7. The C++ client (`specserve client`): the prompt and the same greedy text
#    on stdout, the request's statistics on stderr; a server-side refusal is
#    exit code 1 with the status.
cli=$SPECSERVE_BIN/specserve
if [ -x "$cli" ]; then
  "$cli" client --coordinator "$COORD_ADDR" --prompt "$prompt" --max-tokens 48 --k 4 >"$work/cli.txt" 2>"$work/cli.err" \
    || fail "specserve client: $(cat "$work/cli.err")"
  "$PYTHON" - "$work" "$prompt" <<'EOF' || fail "specserve client output"
import json, sys
printed = open(sys.argv[1] + "/cli.txt").read()
want = json.load(open(sys.argv[1] + "/spec.json"))["text"]
assert printed == sys.argv[2] + want + "\n", (printed, want)
err = open(sys.argv[1] + "/cli.err").read()
assert "drafter model" in err and "accepted" in err and "network" in err, err
EOF
  set +e
  "$cli" client --coordinator "$COORD_ADDR" --prompt "" >/dev/null 2>"$work/cli-bad.err"
  rc=$?
  set -e
  [ "$rc" -eq 1 ] && grep -q "INVALID_ARGUMENT: empty prompt" "$work/cli-bad.err" \
    || fail "specserve client, empty prompt: rc $rc, $(cat "$work/cli-bad.err")"
else
  deploy_log "specserve CLI not built: client checks skipped"
fi

deploy_log "python client test passed"
