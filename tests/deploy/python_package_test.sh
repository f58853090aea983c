#!/usr/bin/env bash
# The `specserve` Python package end to end: pip-installs clients/python into
# a fresh venv (tests/deploy/lib.sh, install_python_package), starts
# specserve-target, specserve-draft and specserve-coordinator on loopback with
# the bundled models and runs python_package_e2e.py with the venv's python:
# sync generate and stream, asyncio generate and stream, model_info, health,
# request ids and the exception classes; then the installed
# `specserve-client` command line. Exit 77 (skipped) when a build input is
# missing, except under CI=true, where that is a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
require_python_package_tools
find_servers
work=$(mktemp -d)
trap 'stop_stack; rm -rf "$work"' EXIT
fail() { deploy_log "FAIL: $*"; tail -n 20 "$work"/logs/*.log >&2 2>/dev/null; exit 1; }

install_python_package "$work/pkg" || fail "pip install clients/python"
start_stack "$work/logs"
deploy_log "servers up: coordinator $COORD_ADDR, target $TARGET_ADDR, draft $DRAFT_ADDR"

(cd "$work" && "$VENV_PYTHON" "$here/python_package_e2e.py" "$COORD_ADDR" "127.0.0.1:$(free_port)") \
  || fail "python_package_e2e.py"

# The installed command line prints the same greedy text as the library.
cli=$work/pkg/venv/bin/specserve-client
"$cli" generate --target "$COORD_ADDR" --timeout 120 --prompt 'def add(a, b):' --max-tokens 24 --k 4 --json \
  >"$work/cli.json" || fail "specserve-client generate"
"$VENV_PYTHON" - "$COORD_ADDR" "$work/cli.json" <<'EOF' || fail "specserve-client output"
import json, sys
import specserve
printed = json.load(open(sys.argv[2]))
with specserve.Client(sys.argv[1]) as c:
    want = c.generate("def add(a, b):", max_tokens=24, k=4, timeout=120)
assert printed["text"] == want.text and printed["token_ids"] == want.token_ids, (printed, want)
assert printed["stats"]["tokens"] == want.stats.tokens and printed["request_id"], printed
EOF

deploy_log "python package test passed"
