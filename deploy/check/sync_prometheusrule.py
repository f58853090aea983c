#!/usr/bin/env python3
"""Writes deploy/k8s/components/monitoring/prometheusrule.yaml from
deploy/prometheus/rules.yaml (the rules file stays the one source; the
PrometheusRule is its groups under `spec`). tools/check_deploy.sh fails when
the two differ; run this after editing rules.yaml:

    python3 deploy/check/sync_prometheusrule.py
"""
import os
import sys

DEPLOY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(DEPLOY, "prometheus", "rules.yaml")
OUT = os.path.join(DEPLOY, "k8s", "components", "monitoring", "prometheusrule.yaml")

HEADER = """\
# GENERATED from deploy/prometheus/rules.yaml by deploy/check/sync_prometheusrule.py:
# edit rules.yaml, then run that script (tools/check_deploy.sh checks they agree).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: specserve
  labels:
    app.kubernetes.io/name: specserve
    app.kubernetes.io/part-of: specserve
spec:
"""


def render():
    with open(RULES) as f:
        lines = f.read().splitlines()
    # Drop the leading comment block; indent the rest under `spec:`.
    start = next(i for i, l in enumerate(lines) if l.startswith("groups:"))
    body = ["  " + l if l.strip() else "" for l in lines[start:]]
    return HEADER + "\n".join(body).rstrip("\n") + "\n"


def main():
    text = render()
    if "--check" in sys.argv:
        with open(OUT) as f:
            return 0 if f.read() == text else 1
    with open(OUT, "w") as f:
        f.write(text)
    print("wrote", os.path.relpath(OUT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
