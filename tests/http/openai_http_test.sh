#!/usr/bin/env bash
# The OpenAI-compatible HTTP API end to end (docs/http_api.md): starts
# specserve-target, specserve-draft and specserve-coordinator (with
# --http-listen and an API key) on loopback with the bundled models, records
# the gRPC API's greedy answers with the Python client, then
#   - curl checks the raw protocol: SSE framing ("data: " lines, [DONE]),
#     /health, /ready, /v1/models, X-Request-Id echo and its log line, error
#     bodies for bad JSON and unknown routes, 401 without the key;
#   - the official `openai` JavaScript client (tests/http/package.json,
#     installed by tools/setup.sh) drives completions and chat
#     (openai_client_test.mjs): same text as gRPC, usage, 400 / 401, n, stop
#     strings, and a client abort that leaves no session open on the services;
#   - a coordinator at --max-sessions answers 429, a draining one 503, and
#     a stream running at SIGTERM still ends with [DONE];
#   - /health turns 503 once the target is gone.
# Exit 77 (skipped) when node, the npm package or curl is missing, except
# under CI=true, where that is a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../deploy/lib.sh"

missing() {
  if [ "${CI:-}" = "true" ]; then deploy_log "FAIL: $* (CI=true: a missing input is a failure)"; exit 1; fi
  deploy_log "SKIP: $*"; exit 77
}
command -v curl >/dev/null || missing "curl is not installed"
command -v node >/dev/null || missing "node is not installed (apt-get install nodejs)"
[ -f "$here/node_modules/openai/package.json" ] || missing "the openai npm package is not installed (bash tools/setup.sh)"

init_python_test
trap 'stop_stack; rm -rf "$work"' EXIT
key=sk-test-$RANDOM$RANDOM
printf '%s\n' "$key" >"$work/api_key"
HTTP_PORT=$(free_port)
COORD_EXTRA=(--http-listen "127.0.0.1:$HTTP_PORT" --api-key-file "$work/api_key")
start_stack "$work/logs"
BASE=http://127.0.0.1:$HTTP_PORT
deploy_log "servers up: coordinator $COORD_ADDR (HTTP $BASE), target $TARGET_ADDR, draft $DRAFT_ADDR"
fail() { kill -CONT "${STACK_PIDS[@]}" 2>/dev/null || true; deploy_log "FAIL: $*"; tail -n 30 "$work"/logs/*.log >&2; exit 1; }
auth=(-H "Authorization: Bearer $key")

# 1. The gRPC API's greedy answers, and the tokenizer's prompt count.
prompt=$'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
chat_prompt=$'<|im_start|>system\nYou complete Python code.<|im_end|>\n<|im_start|>user\ndef add(a, b):\n    return<|im_end|>\n<|im_start|>assistant\n'
grpc() { "$PYTHON" "$CLIENT_PY" generate --target "$COORD_ADDR" --timeout 120 --json --max-tokens 48 --k 4 "$@"; }
grpc --prompt "$prompt" --drafter model >"$work/grpc_completion.json"
grpc --prompt "$chat_prompt" --drafter model --stop '<|im_end|>' >"$work/grpc_chat.json"
grpc --prompt "$prompt" --drafter none --max-tokens 900 >"$work/grpc_long.json"
prompt_tokens=$(printf '%s' "$prompt" | "$SPECSERVE_BIN/specserve" tokenize --model "$DEPLOY_ROOT/models/code-target-7m.gguf" | wc -w)

# 2. Raw protocol with curl.
curl -sS -o "$work/health" -w '%{http_code}' "$BASE/health" | grep -qx 200 || fail "/health not 200"
curl -sS -o /dev/null -w '%{http_code}' "$BASE/ready" | grep -qx 200 || fail "/ready not 200"
curl -sS "${auth[@]}" "$BASE/v1/models" >"$work/models.json"
curl -sS -o /dev/null -w '%{http_code}' "$BASE/v1/models" | grep -qx 401 || fail "/v1/models without the key not 401"
body=$("$PYTHON" -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 24, "temperature": 0,
        "stream": True, "stream_options": {"include_usage": True}}))' "$prompt")
curl -sS -N -D "$work/sse.headers" "${auth[@]}" -H 'Content-Type: application/json' -H 'X-Request-Id: curl-sse-1' \
  -d "$body" "$BASE/v1/completions" >"$work/sse.txt" || fail "streamed completion"
body=$("$PYTHON" -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 24, "temperature": 0,
        "stream": True, "logprobs": 2, "stream_options": {"include_usage": True}}))' "$prompt")
curl -sS -N "${auth[@]}" -H 'Content-Type: application/json' -d "$body" "$BASE/v1/completions" >"$work/sse_logprobs.txt" \
  || fail "streamed completion with logprobs"
curl -sS -D "$work/gen.headers" "${auth[@]}" -H 'Content-Type: application/json' -d '{"prompt": "x = ", "max_tokens": 4}' \
  "$BASE/v1/completions" >"$work/gen.json" || fail "completion without a request id"
curl -sS -o "$work/badjson.json" -w '%{http_code}' "${auth[@]}" -H 'Content-Type: application/json' -d '{"prompt": ' \
  "$BASE/v1/completions" >"$work/badjson.code"
curl -sS -o "$work/noroute.json" -w '%{http_code}' "${auth[@]}" "$BASE/v1/nothing" >"$work/noroute.code"
curl -sS -o "$work/nokey.json" -w '%{http_code}' -H 'Authorization: Bearer wrong' -H 'Content-Type: application/json' \
  -d '{"prompt": "x"}' "$BASE/v1/completions" >"$work/nokey.code"
"$PYTHON" - "$work" <<'EOF' || fail "curl checks"
import json, re, sys
w = sys.argv[1]
read = lambda n: open(f"{w}/{n}", encoding="utf-8").read()
assert json.loads(read("health"))["status"] == "ok"
models = json.loads(read("models.json"))
assert models["object"] == "list" and models["data"][0]["object"] == "model" and models["data"][0]["id"], models
# SSE framing: every event is one "data: " line and a blank line; [DONE] last.
sse = read("sse.txt")
headers = read("sse.headers").lower()
assert "content-type: text/event-stream" in headers, headers
assert "x-request-id: curl-sse-1" in headers, headers
assert sse.endswith("data: [DONE]\n\n"), sse[-200:]
events = sse.split("\n\n")[:-1]
assert all(e.startswith("data: ") and "\n" not in e for e in events if not e.startswith(":")), events
chunks = [json.loads(e[6:]) for e in events if e.startswith("data: {")]
assert all(c["id"] == "cmpl-curl-sse-1" and c["object"] == "text_completion" for c in chunks), chunks[0]
assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0, chunks[-1]
finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
assert len(finish) == 1 and finish[0]["specserve"]["choices"][0]["rounds"] > 0, finish
text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
want = json.loads(read("grpc_completion.json"))["text"]
assert want.startswith(text) and text, (text, want)
# Logprobs in a raw stream: each chunk carries its own tokens' entries, text
# offsets continue across chunks, and together they spell the text.
lp_chunks = [json.loads(e[6:]) for e in read("sse_logprobs.txt").split("\n\n")[:-1] if e.startswith("data: {")]
tokens, offsets, lp_text = [], [], ""
for c in lp_chunks:
    for ch in c["choices"]:
        lp_text += ch["text"]
        lp = ch["logprobs"]
        if lp is None:
            continue
        assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]), lp
        assert all(len(t) in (2, 3) for t in lp["top_logprobs"]), lp["top_logprobs"]
        tokens += lp["tokens"]
        offsets += lp["text_offset"]
assert "".join(tokens) == lp_text == text, (tokens, lp_text, text)
assert len(tokens) == lp_chunks[-1]["usage"]["completion_tokens"], (len(tokens), lp_chunks[-1])
assert offsets == [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))], offsets
# A generated request id: in the header and the body's id.
gen_id = re.search(r"x-request-id: ([0-9a-f]{32})\r?\n", read("gen.headers").lower())
assert gen_id and json.loads(read("gen.json"))["id"] == "cmpl-" + gen_id.group(1), read("gen.headers")
# Errors are OpenAI error objects.
for name, code in (("badjson", 400), ("noroute", 404), ("nokey", 401)):
    assert read(name + ".code") == str(code), (name, read(name + ".code"))
    err = json.loads(read(name + ".json"))["error"]
    assert err["message"] and err["type"] and "param" in err and "code" in err, err
print("curl checks passed")
EOF
grep -q 'http request_id=curl-sse-1 /v1/completions 200' "$work/logs/coordinator.log" || fail "no log line for curl-sse-1"
# A second coordinator on the same HTTP port fails to start (no port sharing).
set +e
"$SPECSERVE_BIN/specserve-coordinator" --listen "127.0.0.1:$(free_port)" --metrics-port 0 --target "$TARGET_ADDR" \
  --http-listen "127.0.0.1:$HTTP_PORT" >/dev/null 2>"$work/busy_port.err"
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q 'cannot bind' "$work/busy_port.err" || fail "a second coordinator on the HTTP port: rc $rc"

# 3. The openai JavaScript client: the API (openai_client_test.mjs), then
#    structured output and tool calls (openai_structured_test.mjs), one file
#    at a time (the first counts the services' open sessions).
SPECSERVE_BASE_URL=$BASE/v1 SPECSERVE_API_KEY=$key SPECSERVE_WORK=$work SPECSERVE_PROMPT_TOKENS=$prompt_tokens \
SPECSERVE_PROMPT=$prompt SPECSERVE_METRICS="http://127.0.0.1:$TARGET_METRICS_PORT/metrics http://127.0.0.1:$DRAFT_METRICS_PORT/metrics" \
SPECSERVE_COORD_LOG=$work/logs/coordinator.log \
  node --test --test-concurrency=1 "$here/openai_client_test.mjs" "$here/openai_structured_test.mjs" \
  || fail "openai client tests"

# 4. A second coordinator with room for one running request and one waiting:
#    while a long stream runs, a second request waits in line and a third
#    gets 429 at once; after SIGTERM the waiting one and new requests get 503
#    and /ready says 503, the running stream still ends with its finish and
#    [DONE], and the process exits 0.
#    It renders chats with --chat-template: the text equals the gRPC API's
#    for the prompt that template renders.
read -r C2_PORT C2_HTTP C2_METRICS <<<"$(free_ports 3)"
printf '%s' $'{% for m in messages %}### {{ m[\'role\'] }}:\n{{ m[\'content\'] }}\n{% endfor %}{% if add_generation_prompt %}### assistant:\n{% endif %}' \
  >"$work/template.jinja"
"$SPECSERVE_BIN/specserve-coordinator" --listen "127.0.0.1:$C2_PORT" --target "$TARGET_ADDR" --draft "$DRAFT_ADDR" \
  --metrics-port "$C2_METRICS" --http-listen "127.0.0.1:$C2_HTTP" --max-sessions 1 --max-waiting 1 --chat-template "$work/template.jinja" \
  >"$work/logs/coordinator2.log" 2>&1 &
c2=$!
STACK_PIDS+=("$c2")
for i in $(seq 100); do
  [ "$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$C2_HTTP/ready" 2>/dev/null || true)" = 200 ] && break
  sleep 0.1
done
grpc --prompt $'### user:\ndef add(a, b):\n    return\n### assistant:\n' >"$work/grpc_template.json"
curl -sS -H 'Content-Type: application/json' -d '{"messages": [{"role": "user", "content": "def add(a, b):\n    return"}],
  "max_tokens": 48, "temperature": 0, "speculative": {"k": 4}}' "http://127.0.0.1:$C2_HTTP/v1/chat/completions" \
  >"$work/template_chat.json"
"$PYTHON" - "$work" <<'EOF' || fail "chat with --chat-template"
import json, sys
want = json.load(open(sys.argv[1] + "/grpc_template.json"))
got = json.load(open(sys.argv[1] + "/template_chat.json"))
assert got["choices"][0]["message"]["content"] == want["text"], (got, want["text"])
assert got["usage"]["prompt_tokens"] == want["stats"]["prompt_tokens"], (got["usage"], want["stats"])
EOF
grep -q 'chat requests render with Jinja template' "$work/logs/coordinator2.log" || fail "--chat-template not used"
long_tokens=$("$PYTHON" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["token_ids"]))' "$work/grpc_long.json")
body=$("$PYTHON" -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": int(sys.argv[2]),
        "temperature": 0, "stream": True, "speculative": {"drafter": "none"}}))' "$prompt" "$long_tokens")
# The target paused first: the stream holds its slot for as long as this
# takes.
kill -STOP "${STACK_PIDS[0]}"
curl -sS -N -H 'Content-Type: application/json' -H 'X-Request-Id: drain-1' -d "$body" \
  "http://127.0.0.1:$C2_HTTP/v1/completions" >"$work/drain.txt" &
drain_curl=$!
# Requests the coordinator holds: running, or waiting (in its queue, or
# before their first round).
held() {
  curl -sS "http://127.0.0.1:$C2_METRICS/metrics" |
    awk '/^specserve_requests_(running|waiting) /{n += $2} END {print n + 0}'
}
for i in $(seq 100); do [ "$(held)" = 1 ] && break; sleep 0.05; done
small() {
  curl -sS -o "$work/$1.json" -w '%{http_code}' -H 'Content-Type: application/json' -d '{"prompt": "x", "max_tokens": 2}' \
    "http://127.0.0.1:$C2_HTTP/v1/completions"
}
small queued >"$work/queued.code" &
queued_curl=$!
for i in $(seq 100); do [ "$(held)" = 2 ] && break; sleep 0.05; done
[ "$(held)" = 2 ] || fail "no request waiting: $(curl -sS "http://127.0.0.1:$C2_METRICS/metrics" | grep -E '^specserve_requests_(waiting|running)')"
[ "$(small busy)" = 429 ] && grep -q '"type":"rate_limit_error"' "$work/busy.json" && grep -q -- '--max-waiting' "$work/busy.json" \
  || fail "a request past the waiting line: $(cat "$work/busy.json")"
kill -TERM "$c2"
wait "$queued_curl" || true
[ "$(cat "$work/queued.code")" = 503 ] && grep -q '"type":"service_unavailable_error"' "$work/queued.json" \
  || fail "a waiting request when the drain began: $(cat "$work/queued.code") $(cat "$work/queued.json")"
for i in $(seq 40); do
  [ "$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$C2_HTTP/ready")" = 503 ] && break
  sleep 0.02
done
[ "$(small draining)" = 503 ] && grep -q '"type":"service_unavailable_error"' "$work/draining.json" \
  || fail "a request while draining: $(cat "$work/draining.json")"
kill -CONT "${STACK_PIDS[0]}"
wait "$drain_curl" || fail "the draining stream failed"
wait "$c2" || fail "the draining coordinator exited $?"
grep -q '"finish_reason":"length"' "$work/drain.txt" || fail "the draining stream has no finish"
tail -c 14 "$work/drain.txt" | cmp -s - <(printf 'data: [DONE]\n\n') || fail "the draining stream did not end with [DONE]"
grep -A100 'draining' "$work/logs/coordinator2.log" | grep -q 'request_id=drain-1 /v1/completions 200' \
  || fail "the stream was not running when the drain began: $(cat "$work/logs/coordinator2.log")"

# 5. The target gone: /health says so.
kill "${STACK_PIDS[0]}"
for i in $(seq 50); do
  code=$(curl -sS -o /dev/null -w '%{http_code}' "$BASE/health" || true)
  [ "$code" = 503 ] && break
  sleep 0.2
done
[ "$code" = 503 ] || fail "/health with the target gone: $code, want 503"
curl -sS -o /dev/null -w '%{http_code}' "$BASE/ready" | grep -qx 503 || fail "/ready with the target gone not 503"
deploy_log "openai http test passed"
