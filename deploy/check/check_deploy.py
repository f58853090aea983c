#!/usr/bin/env python3
"""The deployment checks behind tools/check_deploy.sh. Exits non-zero on any
mismatch between what deploy/ says and what the binaries accept and export.

  1. lint: every YAML file under deploy/ (yamllint where installed, and
     always a built-in pass: syntax, duplicate keys, tabs, trailing spaces,
     line length, final newline) and the dashboard JSON;
  2. render: every overlay (and base, and each component no overlay uses)
     with kustomize_lite; where kubectl exists also with `kubectl kustomize`,
     and the two must give the same objects;
  3. objects: every flag in a container's args exists in that binary's
     --help and the binary's own parser accepts the args; $(VARS) resolve
     from the ConfigMap; ports agree between --listen / --metrics-port,
     containerPorts, probes, Services, the coordinator's --target / --draft,
     PodMonitor and ServiceMonitor; probes exist; termination grace outlasts
     preStop + drain; resources are set; GPU pods ask for exactly one GPU and
     run the cuda backend; every Deployment has a PodDisruptionBudget;
  4. rules: the PrometheusRule equals deploy/prometheus/rules.yaml; promtool
     check / test where installed;
  5. metrics: starts the three servers on loopback, sends requests (model,
     n-gram and plain drafting, a bad request, a request after the draft
     service died), scrapes /metrics, and requires every metric, label and
     (for fixed label sets) label value that the dashboard and the rules read
     to be exported.
"""

import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from binaries import Binary  # noqa: E402
from metrics_check import (check_dashboard_and_rules, check_dashboard_layout, check_rules,  # noqa: E402
                           scrape_running_servers)
from objects import check_compose, check_objects  # noqa: E402
from render import render_all  # noqa: E402
from report import PROBE, REPO, SERVERS, Report  # noqa: E402
from yaml_lint import lint  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("SPECSERVE_BIN", os.path.join(REPO, "build", "bin")),
                    help="folder with the built binaries (default: $SPECSERVE_BIN or build/bin)")
    ap.add_argument("--static", action="store_true",
                    help="skip starting the servers (no metric-name check)")
    ap.add_argument("--no-kubectl", action="store_true",
                    help="render with kustomize_lite only, even where kubectl is installed")
    args = ap.parse_args()
    report = Report()

    lint(report)
    kubectl = None if args.no_kubectl else shutil.which("kubectl")
    if kubectl and subprocess.run([kubectl, "kustomize", "--help"], capture_output=True).returncode != 0:
        kubectl = None
    rendered = render_all(report, kubectl)

    binaries = {}
    for b in SERVERS + (PROBE,):
        path = os.path.join(args.bin, b)
        if os.access(path, os.X_OK):
            try:
                binaries[b] = Binary(path)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                report.error(b, str(e))
        elif b in SERVERS:
            report.error(b, "not found in %s: build first (tools/build.sh) or pass --bin" % args.bin)
        else:
            report.warn(b, "not found in %s: exec probe flags not checked" % args.bin)
    for name, objs in rendered.items():
        check_objects(name, objs, binaries, report)
    if all(b in binaries for b in SERVERS):
        check_compose(binaries, report)

    check_rules(report)
    check_dashboard_layout(report)
    if args.static:
        report.warn("metrics", "--static: the dashboard's and rules' metric names were not checked")
    elif all(b in binaries for b in SERVERS):
        families = scrape_running_servers(args.bin, report)
        if families is not None:
            check_dashboard_and_rules(families, report)

    print()
    if report.pending:
        print("PENDING (not failures):\n  " + "\n  ".join(report.pending))
    if report.warnings:
        print("%d warning(s)" % len(report.warnings))
    if report.errors:
        print("check_deploy: %d FAILED:\n  %s" % (len(report.errors), "\n  ".join(report.errors)))
        return 1
    print("check_deploy: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
