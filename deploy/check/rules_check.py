"""Check 4, rules: the PrometheusRule equals deploy/prometheus/rules.yaml;
`promtool check rules` and `promtool test rules` on rules.yaml; and every
dashboard query, written into a temporary rules file as a record rule,
through `promtool check rules` (Prometheus' own parser and type checks)."""

import os
import re
import subprocess
import tempfile

import yaml

import sync_prometheusrule
from queries import dashboard_targets, dashboard_variables, load_dashboard
from report import RULES, RULES_TEST, find_tool, rel


def check_rules(report):
    """Returns the dashboard queries promtool refuses ({where}), so that the
    later checks leave them out."""
    print("== rules")
    with open(sync_prometheusrule.OUT) as f:
        if f.read() != sync_prometheusrule.render():
            report.error(rel(sync_prometheusrule.OUT), "differs from deploy/prometheus/rules.yaml: "
                         "run python3 deploy/check/sync_prometheusrule.py")
        else:
            report.ok("PrometheusRule matches rules.yaml")
    promtool = find_tool(report, "promtool", "prometheus", "rules.yaml and the dashboard's queries were not "
                                                          "parsed, and rules_test.yaml did not run")
    if not promtool:
        return set()
    for cmd in (["check", "rules", RULES], ["test", "rules", RULES_TEST]):
        r = subprocess.run([promtool] + cmd, capture_output=True, text=True, cwd=os.path.dirname(RULES))
        if r.returncode != 0:
            report.error("promtool " + " ".join(cmd[:2]), (r.stdout + r.stderr).strip())
        else:
            report.ok("promtool %s %s" % (" ".join(cmd[:2]), rel(cmd[2])))
    return _check_dashboard_queries(promtool, report)


def _check_dashboard_queries(promtool, report):
    dash = load_dashboard()
    queries = [(where, expr) for where, expr, _ in dashboard_targets(dash) + dashboard_variables(dash)]
    rules = [{"record": "dashboard_query_%d" % i, "expr": expr} for i, (_, expr) in enumerate(queries)]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="dashboard-rules-") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
        f.flush()
        r = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True)
    refused = set()
    # promtool names a bad rule: FILE: L:C: group "dashboard", rule N, "NAME": MESSAGE
    for m in re.finditer(r'rule (\d+), "dashboard_query_\d+": (.*)', r.stdout + r.stderr):
        where = queries[int(m.group(1)) - 1][0]
        refused.add(where)
        report.error(where, "promtool check rules: %s" % m.group(2))
    if r.returncode != 0 and not refused:
        report.error("promtool check rules (dashboard)", (r.stdout + r.stderr).strip())
    elif r.returncode == 0:
        report.ok("promtool check rules: the dashboard's %d queries, as record rules" % len(queries))
    return refused
