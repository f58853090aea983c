# Shared by the deployment tests and tools/check_deploy.sh: find the binaries
# and a Python with grpc, start the three servers on loopback with the bundled
# models, stop them again. Source it; it sets no shell options of its own.
#
#   SPECSERVE_BIN   folder with specserve-target/-draft/-coordinator (default: build/bin)
#   PYTHON          a python3 that can import grpc and google.protobuf

DEPLOY_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SPECSERVE_BIN=${SPECSERVE_BIN:-$DEPLOY_ROOT/build/bin}
if [ -d "$SPECSERVE_BIN" ]; then SPECSERVE_BIN=$(cd "$SPECSERVE_BIN" && pwd); fi
export SPECSERVE_BIN
CLIENT_PY=$DEPLOY_ROOT/clients/python/specserve_client.py
STACK_PIDS=()

deploy_log() { echo "[$(basename "$0")] $*" >&2; }

# A test that starts the servers from Python: finds both and makes $work
# (the caller removes it in its EXIT trap). $CLIENT_PY uses the installed
# `specserve` package, or builds it into a temporary folder of its own.
init_python_test() {
  find_python
  find_servers
  work=$(mktemp -d)
}

# A python3 with grpcio and protobuf: Debian's python3-grpcio lives in
# /usr/bin/python3's dist-packages, which a pyenv or venv python3 first on
# PATH does not see.
find_python() {
  local c
  for c in ${PYTHON:-} /usr/bin/python3 python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import grpc, google.protobuf' 2>/dev/null; then
      PYTHON=$(command -v "$c")
      export PYTHON
      return 0
    fi
  done
  deploy_log "no python3 with grpc and protobuf (apt-get install python3-grpcio python3-protobuf)"
  return 1
}

# deploy_missing WHAT: an input of the test is missing: skip (exit 77), or
# fail under CI=true, where every input must be there.
deploy_missing() {
  if [ "${CI:-}" = true ]; then deploy_log "FAIL: $* (CI=true: a missing input is a failure)"; exit 1; fi
  deploy_log "SKIP: $*"
  exit 77
}

# What building the Python package needs besides grpc and protobuf: venv,
# setuptools, and protoc with the gRPC Python plugin (or grpcio-tools).
# Exits through deploy_missing.
require_python_package_tools() {
  find_python || deploy_missing "no python3 with grpc and protobuf (tools/setup.sh)"
  "$PYTHON" -c 'import venv, ensurepip, setuptools' 2>/dev/null \
    || deploy_missing "$PYTHON lacks venv/ensurepip or setuptools (apt-get install python3-venv python3-setuptools)"
  if ! { command -v protoc && command -v grpc_python_plugin; } >/dev/null && ! "$PYTHON" -c 'import grpc_tools' 2>/dev/null; then
    deploy_missing "no protoc with grpc_python_plugin (apt-get install protobuf-compiler protobuf-compiler-grpc)"
  fi
}

# install_python_package DIR: pip-installs the `specserve` package
# (clients/python) into a new venv DIR/venv that sees Debian's grpcio and
# protobuf (--system-site-packages), offline: --no-index, and
# --no-build-isolation so the build uses Debian's setuptools. It builds from
# a copy of clients/python and proto/ in DIR/src, leaving the checkout
# untouched. Sets VENV_PYTHON.
install_python_package() {
  local dir=$1
  mkdir -p "$dir/src/clients"
  cp -r "$DEPLOY_ROOT/clients/python" "$dir/src/clients/"
  cp -r "$DEPLOY_ROOT/proto" "$dir/src/"
  rm -rf "$dir/src/clients/python/build" "$dir/src/clients/python/src/"*.egg-info
  "$PYTHON" -m venv --system-site-packages "$dir/venv" || return 1
  VENV_PYTHON=$dir/venv/bin/python
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV_PYTHON" -m pip install --quiet --no-index --no-cache-dir \
    --no-build-isolation "$dir/src/clients/python" || return 1
}

# Fails unless the three servers are built.
find_servers() {
  local b
  for b in specserve-target specserve-draft specserve-coordinator; do
    if [ ! -x "$SPECSERVE_BIN/$b" ]; then
      deploy_log "$SPECSERVE_BIN/$b is missing: build first (tools/build.sh) or set SPECSERVE_BIN"
      return 1
    fi
  done
}

# free_ports N: N distinct free ports, below the ephemeral range (32768+) that
# outgoing connections draw from (a port from bind(0) may become some
# connection's source port before the server listens on it).
free_ports() { "$PYTHON" "$(dirname "${BASH_SOURCE[0]}")/../../tools/free_ports.py" "$1"; }
free_port() { free_ports 1; }

# start_stack LOGDIR: starts target, draft and coordinator on free loopback
# ports, waits until the coordinator is SERVING and uses the draft, and sets COORD_ADDR,
# TARGET_ADDR, DRAFT_ADDR and *_METRICS_PORT. Extra flags per server come
# from the arrays TARGET_EXTRA, DRAFT_EXTRA, COORD_EXTRA (e.g. TLS flags);
# CLIENT_EXTRA is passed to the readiness check.
start_stack() {
  local logs=$1
  mkdir -p "$logs"
  read -r TARGET_PORT DRAFT_PORT COORD_PORT TARGET_METRICS_PORT DRAFT_METRICS_PORT COORD_METRICS_PORT \
    <<<"$(free_ports 6)"
  TARGET_ADDR=127.0.0.1:$TARGET_PORT; DRAFT_ADDR=127.0.0.1:$DRAFT_PORT; COORD_ADDR=127.0.0.1:$COORD_PORT
  "$SPECSERVE_BIN/specserve-target" --listen "$TARGET_ADDR" --model "$DEPLOY_ROOT/models/code-target-7m.gguf" \
    --metrics-port "$TARGET_METRICS_PORT" --threads 1 "${TARGET_EXTRA[@]}" >"$logs/target.log" 2>&1 &
  STACK_PIDS+=($!)
  "$SPECSERVE_BIN/specserve-draft" --listen "$DRAFT_ADDR" --model "$DEPLOY_ROOT/models/code-draft-1m.gguf" \
    --metrics-port "$DRAFT_METRICS_PORT" --threads 1 "${DRAFT_EXTRA[@]}" >"$logs/draft.log" 2>&1 &
  STACK_PIDS+=($!)
  "$SPECSERVE_BIN/specserve-coordinator" --listen "$COORD_ADDR" --target "$TARGET_ADDR" --draft "$DRAFT_ADDR" \
    --metrics-port "$COORD_METRICS_PORT" "${COORD_EXTRA[@]}" >"$logs/coordinator.log" 2>&1 &
  STACK_PIDS+=($!)
  DRAFT_PID=${STACK_PIDS[-2]}
  if ! "$PYTHON" "$CLIENT_PY" health --target "$COORD_ADDR" --wait 90 "${CLIENT_EXTRA[@]}" >/dev/null; then
    deploy_log "the coordinator did not become SERVING; logs:"
    tail -n 20 "$logs"/*.log >&2
    return 1
  fi
  # The coordinator serves before it has reached the draft (it falls back to
  # n-gram drafting meanwhile): wait until it names the draft model.
  local i
  for i in $(seq 300); do
    "$PYTHON" "$CLIENT_PY" info --target "$COORD_ADDR" "${CLIENT_EXTRA[@]}" 2>/dev/null \
      | grep -q '"draft_model": "[^"]' && return 0
    sleep 0.2
  done
  deploy_log "the coordinator never reached the draft; logs:"
  tail -n 20 "$logs"/*.log >&2
  return 1
}

# Stops what start_stack started (only those processes), SIGTERM first.
stop_stack() {
  local p
  for p in "${STACK_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${STACK_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  STACK_PIDS=()
}

TARGET_EXTRA=(); DRAFT_EXTRA=(); COORD_EXTRA=(); CLIENT_EXTRA=()
