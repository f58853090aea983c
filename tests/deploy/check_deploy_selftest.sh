#!/usr/bin/env bash
# Tests the deployment check itself: on a copy of deploy/ with known
# mistakes planted (a wrong probe port, an unknown flag, a misspelt metric,
# ...), tools/check_deploy.sh must fail and name every one of them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
find_python
find_servers

# The check leaves the generic work to standard tools: without them it
# cannot catch what it delegates to them (tools/setup.sh installs them).
missing=()
for t in yamllint kubectl promtool; do command -v "$t" >/dev/null || missing+=("$t"); done
"$PYTHON" -c 'import prometheus_client' 2>/dev/null || missing+=(python3-prometheus-client)
if ((${#missing[@]})); then
  if [ "${CI:-}" = true ]; then
    deploy_log "FAIL: not installed: ${missing[*]} (tools/setup.sh)"
    exit 1
  fi
  deploy_log "SKIP: not installed: ${missing[*]} (tools/setup.sh)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
copy=$work/repo
mkdir -p "$copy/tests" "$copy/tools"
cp -r "$DEPLOY_ROOT/deploy" "$DEPLOY_ROOT/models" "$DEPLOY_ROOT/proto" "$copy/"
mkdir -p "$copy/clients"
cp -r "$DEPLOY_ROOT/clients/python" "$copy/clients/"
cp -r "$DEPLOY_ROOT/tests/deploy" "$copy/tests/"
cp "$DEPLOY_ROOT/tools/check_deploy.sh" "$copy/tools/"

# edit FILE OLD NEW: replace the first OLD (must exist) in FILE.
edit() {
  "$PYTHON" - "$copy/$1" "$2" "$3" <<'EOF'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if old not in text:
    sys.exit("selftest: %r not in %s" % (old, path))
open(path, "w").write(text.replace(old, new, 1))
EOF
}

# expect LOG MESSAGE...: every message appears in the check's output.
expect() {
  local log=$1 m missing=0
  shift
  for m in "$@"; do
    if ! grep -qF -- "$m" "$log"; then
      deploy_log "FAIL: check_deploy did not report: $m"
      missing=1
    fi
  done
  return $missing
}

# must_fail LOG WHAT [ARGS...]: check_deploy on the mutated copy fails.
must_fail() {
  local log=$1 what=$2 rc
  shift 2
  set +e
  (cd "$copy" && SPECSERVE_BIN=$SPECSERVE_BIN bash tools/check_deploy.sh "$@") >"$log" 2>&1
  rc=$?
  set -e
  [ "$rc" -ne 0 ] || { cat "$log"; deploy_log "FAIL: check_deploy passed $what"; exit 1; }
}

# 1. Manifest mistakes (no servers needed).
edit deploy/k8s/base/target.yaml $'grpc:\n              port: 50052\n            periodSeconds: 5\n            timeoutSeconds: 3\n            failureThreshold: 2' \
  $'grpc:\n              port: 50053\n            periodSeconds: 5\n            timeoutSeconds: 3\n            failureThreshold: 2'
edit deploy/k8s/base/draft.yaml '- --threads=$(DRAFT_THREADS)' '- --thread=$(DRAFT_THREADS)'
edit deploy/k8s/base/coordinator.yaml '--metrics-port=9101' '--metrics-port=9111'
edit deploy/k8s/base/coordinator.yaml '--draft=dns:///specserve-draft:50053' '--draft=dns:///specserve-drafts:50053'
edit deploy/k8s/base/coordinator.yaml '--http-listen=0.0.0.0:8000' '--http-listen=0.0.0.0:8001'
edit deploy/k8s/base/coordinator.yaml 'path: /ready' 'path: /readyz'
edit deploy/k8s/base/draft.yaml '- --model=$(DRAFT_MODEL)' '- --model=$(DRAFT_MODLE)'
edit deploy/k8s/overlays/cpu-demo/quick-drain.yaml 'terminationGracePeriodSeconds: 30' 'terminationGracePeriodSeconds: 12'
edit deploy/k8s/base/target.yaml 'targetPort: metrics' 'targetPort: metric'
edit deploy/k8s/components/monitoring/podmonitor.yaml '- port: metrics' '- port: grpc'
edit deploy/k8s/overlays/gpu/gpu-services.yaml $'limits:\n              cpu: "4"\n              memory: 16Gi\n              nvidia.com/gpu: 1' \
  $'limits:\n              cpu: "4"\n              memory: 16Gi\n              nvidia.com/gpu: 2'
edit deploy/prometheus/rules.yaml 'humanizePercentage }} full' 'humanizePercentage }} full!'
edit deploy/k8s/base/config.yaml 'DRAFT_KV_BLOCKS: "0"' 'DRAFT_KV_BLOCKS: "0"   '
edit deploy/docker/compose.yaml 'SPECSERVE_HEALTH_ADDR: 127.0.0.1:50053' 'SPECSERVE_HEALTH_ADDR: 127.0.0.1:50052'
edit deploy/k8s/base/networkpolicy.yaml $'              app.kubernetes.io/component: coordinator' $'              app.kubernetes.io/component: draft'
must_fail "$work/static.log" "a broken deploy/" --static
expect "$work/static.log" \
  "readinessProbe grpc port 50053 is not the service port 50052" \
  "a NetworkPolicy lets other than the coordinator reach gRPC port 50052" \
  "--thread is not a flag of specserve-draft" \
  "--metrics-port 9111, but containerPort metrics is 9101" \
  "--http-listen 0.0.0.0:8001, but containerPort http is 8000" \
  "readinessProbe httpGet path '/readyz'" \
  "dns:///specserve-drafts:50053 names no Service" \
  "\$(DRAFT_MODLE) is not defined" \
  "terminationGracePeriodSeconds 12 < preStop 5s + --drain-seconds 10s + 5s" \
  "targetPort 'metric' is not a containerPort" \
  "port 'grpc' of specserve-draft is not its metrics port" \
  "nvidia.com/gpu requests 1 / limits 2, want 1 / 1" \
  "differs from deploy/prometheus/rules.yaml" \
  "trailing spaces (yamllint trailing-spaces)" \
  "compose/draft: SPECSERVE_HEALTH_ADDR port 50052 is not the --listen port 50053" || { cat "$work/static.log"; exit 1; }
deploy_log "static mistakes: all reported"

# 2. Queries that read what the servers do not export.
rm -rf "$copy/deploy" && cp -r "$DEPLOY_ROOT/deploy" "$copy/"
edit deploy/grafana/specserve-dashboard.json 'specserve_accepted_length_sum' 'specserve_accepted_lenght_sum'
edit deploy/grafana/specserve-dashboard.json 'sum by (phase)' 'sum by (stage)'
edit deploy/grafana/specserve-dashboard.json '"legendFormat": "{{reason}}"' '"legendFormat": "{{cause}}"'
edit deploy/prometheus/rules.yaml 'sum by (namespace, drafter)' 'sum by (namespace, draft_model)'
edit deploy/prometheus/rules.yaml 'status="resource_exhausted"' 'state="resource_exhausted"'
edit deploy/grafana/specserve-dashboard.json 'rate(specserve_generated_tokens_total{' 'rate(specserve_generated_tokens_total{role=\"draft\",'
# Well-formed names but a type error: promtool's parser sees it.
edit deploy/grafana/specserve-dashboard.json 'min(specserve_speculation_k{namespace=~\"$namespace\"})' \
  'min(rate(specserve_speculation_k{namespace=~\"$namespace\"}))'
"$PYTHON" "$copy/deploy/check/sync_prometheusrule.py" >/dev/null
must_fail "$work/live.log" "misspelt queries"
expect "$work/live.log" \
  "specserve_accepted_lenght_sum is not exported" \
  "groups by stage, which none of" \
  "legend {{cause}}: the query's result has no label cause" \
  "groups by draft_model, which none of" \
  "specserve_requests_total has no label state" \
  "specserve_generated_tokens_total has no label role" || { cat "$work/live.log"; exit 1; }
expect "$work/live.log" "Speculation length K/B: promtool check rules: could not parse expression" \
  'expected type range vector in call to function "rate", got instant vector' || { cat "$work/live.log"; exit 1; }
deploy_log "query mistakes: all reported"
deploy_log "check_deploy selftest passed"
