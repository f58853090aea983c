#!/usr/bin/env bash
# Checks deploy/ against the binaries (CI runs it): YAML lint; every overlay
# renders (`kubectl kustomize` where installed, and deploy/check/kustomize_lite.py
# always); every flag in the manifests exists in the binaries' --help and
# their parser accepts the args; ports agree between containers, probes,
# Services, the coordinator's upstream addresses and the Prometheus monitors;
# the PrometheusRule matches deploy/prometheus/rules.yaml (promtool checks
# and unit tests where installed); and the Grafana dashboard's and the
# rules' queries read only metrics, labels and label values that the three
# servers export, scraped from a running demo on loopback.
#
#   bash tools/check_deploy.sh            # binaries from build/bin (or $SPECSERVE_BIN)
#   bash tools/check_deploy.sh --static   # no servers: skip the metric-name check
#   bash tools/check_deploy.sh --bin DIR
# Needs python3-yaml, python3-grpcio, python3-protobuf and protoc.
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/deploy/lib.sh
find_python
if ! "$PYTHON" -c 'import yaml' 2>/dev/null; then
  echo "check_deploy: $PYTHON cannot import yaml (apt-get install python3-yaml)" >&2
  exit 1
fi
exec "$PYTHON" deploy/check/check_deploy.py "$@"
