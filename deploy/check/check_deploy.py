#!/usr/bin/env python3
"""The deployment checks behind tools/check_deploy.sh. Exits non-zero on any
mismatch between what deploy/ says and what the binaries accept and export.
The standard tools do the generic work (with CI=true a missing one fails):

  1. lint: yamllint over deploy/ (deploy/.yamllint); the dashboard JSON
     parses without duplicate keys;
  2. render: `kubectl kustomize` (Debian's kubernetes-client) on the base,
     every overlay and each component no overlay uses;
  3. objects: every flag in a container's args exists in that binary's
     --help and the binary's own parser accepts the args; $(VARS) resolve
     from the ConfigMap; ports agree between --listen / --metrics-port,
     containerPorts, probes, Services, the coordinator's --target / --draft,
     PodMonitor and ServiceMonitor; probes exist; termination grace outlasts
     preStop + drain; resources are set; GPU pods ask for exactly one GPU and
     run the cuda backend; every Deployment has a PodDisruptionBudget;
  4. rules: the PrometheusRule equals deploy/prometheus/rules.yaml; `promtool
     check rules` and `promtool test rules`; every dashboard query through
     `promtool check rules` as a record rule;
  5. metrics: starts the three servers on loopback, sends requests (model,
     n-gram and plain drafting, a bad request, a request after the draft
     service died), scrapes /metrics (prometheus_client's parser; `promtool
     check metrics` advice as warnings), has a real Prometheus evaluate every
     query (`promtool query instant`), and requires every metric, label and
     (for fixed label sets) label value that the dashboard and the rules
     read to be exported.
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from binaries import Binary  # noqa: E402
from dashboard_layout import check_dashboard_layout  # noqa: E402
from lint import lint  # noqa: E402
from live_scrape import scrape_running_servers  # noqa: E402
from objects import check_compose, check_objects  # noqa: E402
from query_check import check_dashboard_and_rules  # noqa: E402
from render import render_all  # noqa: E402
from report import PROBE, REPO, SERVERS, Report  # noqa: E402
from rules_check import check_rules  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("SPECSERVE_BIN", os.path.join(REPO, "build", "bin")),
                    help="folder with the built binaries (default: $SPECSERVE_BIN or build/bin)")
    ap.add_argument("--static", action="store_true",
                    help="skip starting the servers (no metric-name check)")
    args = ap.parse_args()
    report = Report()

    lint(report)
    rendered = render_all(report)

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

    refused = check_rules(report)
    check_dashboard_layout(report)
    if args.static:
        report.warn("metrics", "--static: the dashboard's and rules' metric names were not checked")
    elif all(b in binaries for b in SERVERS):
        families = scrape_running_servers(args.bin, report, skip=refused)
        if families is not None:
            check_dashboard_and_rules(families, report, skip=refused)

    print()
    if report.pending:
        print("PENDING (not failures):\n  " + "\n  ".join(report.pending))
    if report.warnings:
        print("%d warning(s)" % len(report.warnings))
    if report.errors:
        print("check_deploy: %d FAILED:\n  %s" % (len(report.errors), "\n  ".join(report.errors)))
        return 1
    if report.missing_tools:
        print("check_deploy: the checks that ran passed; not installed, so not all ran: %s (tools/setup.sh)"
              % " ".join(report.missing_tools))
        return 0
    print("check_deploy: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
