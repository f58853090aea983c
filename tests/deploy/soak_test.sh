#!/usr/bin/env bash
# The soak test, CI size (bench/soak.py): 40 s of 8 concurrent greedy clients
# against the three real servers, 10% of the requests cancelled after their
# first delta, the draft SIGKILLed and restarted every 15 s and the target
# once at 25 s. Fails on any answer that differs from its solo output, any
# error other than UNAVAILABLE while the target is away, a crash or hang,
# sessions or KV blocks left open once idle, or RSS growth over 50 MB.
# SOAK_SECONDS / SOAK_CLIENTS override the size; extra arguments go to soak.py.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
init_python_test
trap 'rm -rf "$work"' EXIT

set +e
"$PYTHON" "$DEPLOY_ROOT/bench/soak.py" --duration "${SOAK_SECONDS:-40}" --clients "${SOAK_CLIENTS:-8}" \
  --cancel-fraction 0.1 --draft-restart-every 15 --target-restart-at 25 \
  --bin "$SPECSERVE_BIN" --models "$DEPLOY_ROOT/models" --logs "$work/logs" --json "$work/soak.json" "$@"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  deploy_log "FAIL: soak.py exited with $rc; server logs:"
  for f in "$work"/logs/*.log; do
    [ -f "$f" ] && { echo "---- $f" >&2; tail -n 30 "$f" >&2; }
  done
  exit 1
fi
deploy_log "soak test passed"
