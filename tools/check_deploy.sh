#!/usr/bin/env bash
# Checks deploy/ against the binaries (CI runs it), with the standard tools
# doing the generic work: yamllint (with deploy/.yamllint) over deploy/;
# `kubectl kustomize` renders the base, every overlay and each unused
# component; every flag in the manifests exists in the binaries' --help and
# their parser accepts the args; ports agree between containers, probes,
# Services, the coordinator's upstream addresses and the Prometheus monitors;
# the PrometheusRule matches deploy/prometheus/rules.yaml, which passes
# `promtool check rules` and `promtool test rules`, as does every dashboard
# query (as a record rule); and the dashboard's and the rules' queries read
# only metrics, labels and label values that the three servers export,
# scraped from a running demo on loopback (prometheus_client's parser) while
# a real Prometheus evaluates every query (`promtool query instant`).
#
#   bash tools/check_deploy.sh            # binaries from build/bin (or $SPECSERVE_BIN)
#   bash tools/check_deploy.sh --static   # no servers: skip the metric-name check
#   bash tools/check_deploy.sh --bin DIR
# Needs python3-yaml, python3-grpcio, python3-protobuf, protoc, and the tools:
# yamllint, kubernetes-client (kubectl), prometheus (promtool, prometheus),
# python3-prometheus-client (tools/setup.sh installs them). A missing tool is
# a warning and skips what needs it; with CI=true it is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/deploy/lib.sh
find_python
if ! "$PYTHON" -c 'import yaml' 2>/dev/null; then
  echo "check_deploy: $PYTHON cannot import yaml (apt-get install python3-yaml)" >&2
  exit 1
fi
exec "$PYTHON" deploy/check/check_deploy.py "$@"
