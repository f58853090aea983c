"""Check 5, second half: every metric, label, grouping label, legend label
and (for fixed label sets) label value that the dashboard and the rules
read must be among what the running servers exported (live_scrape.py);
what each query reads comes from queries.reads()."""

import re

from queries import (AGGREGATIONS, dashboard_targets, dashboard_variables, load_dashboard, load_rules,
                     metric_names, reads)
from report import ENUM_LABELS, SYNTHETIC_METRICS, TARGET_LABELS


def check_query(where, expr, families, recorded, report, legend=None):
    q = reads(expr)
    labels_here = set(TARGET_LABELS) | q.label_refs
    names = set()
    for name, matchers in q.selectors:
        if name is None:
            report.error(where, "a selector without a metric name")
            continue
        names.add(name)
        if name in recorded:
            known = recorded[name] | TARGET_LABELS
        elif name in SYNTHETIC_METRICS:
            known = TARGET_LABELS
        elif name not in families:
            report.error(where, "%s is not exported by any specserve process" % name)
            continue
        else:
            known = set(families[name]) | TARGET_LABELS
        labels_here |= known
        for label, op, value in matchers:
            if label not in known:
                report.error(where, "%s has no label %s" % (name, label))
            elif op == "=" and label in ENUM_LABELS and name in families and \
                    value not in families[name].get(label, set()):
                report.error(where, "%s{%s=%r}: the processes export %s" %
                             (name, label, value, sorted(families[name].get(label, set()))))
    for label in q.grouping:
        if label == "le":
            if not any(n.endswith("_bucket") for n in names):
                report.error(where, "groups by le without a _bucket series")
        elif label not in labels_here:
            report.error(where, "groups by %s, which none of %s has" % (label, sorted(names)))
    if legend:
        for label in re.findall(r"\{\{\s*([a-zA-Z_]\w*)\s*\}\}", legend):
            aggregated = bool(q.functions & AGGREGATIONS)
            if label not in q.grouping and label not in q.label_refs and (aggregated or label not in labels_here):
                report.error(where, "legend {{%s}}: the query's result has no label %s" % (label, label))
    return names


def check_dashboard_and_rules(families, report, skip=()):
    """SKIP: queries (by where) that promtool refused, not looked at again."""
    print("== dashboard and rules read only exported metrics")
    rules = [r for r in load_rules() if r[0] not in skip]
    recorded = {record: reads(expr).grouping - {"le"} for _, expr, record in rules if record}
    used = set()
    dash = load_dashboard()
    n = 0
    for where, expr, legend in dashboard_targets(dash):
        if where not in skip:
            n += 1
            used |= check_query(where, expr, families, recorded, report, legend=legend)
    for where, expr, label in dashboard_variables(dash):
        if where not in skip:
            n += 1
            used |= check_query(where, expr, families, recorded, report)
            if label not in TARGET_LABELS and not any(label in families.get(x, {}) for x in metric_names(expr)):
                report.error(where, "no label %s" % label)
    report.ok("%d dashboard queries" % n)
    for where, expr, _ in rules:
        used |= check_query(where, expr, families, recorded, report)
    report.ok("%d rules" % len(rules))
    # Coverage, the other way round: an exported family nobody shows.
    shown = {re.sub(r"_(bucket|sum|count)$", "", name) for name in used}
    exported = {re.sub(r"_(bucket|sum|count)$", "", n) for n in families if n.startswith("specserve_")}
    for name in sorted(exported - shown):
        report.warn("dashboard", "%s is exported but no panel or rule reads it" % name)
