"""The PromQL the dashboard and the rules hold, and what each expression
reads.

Syntax and types are promtool's job (rules_check.py runs `promtool check
rules` on rules.yaml and on every dashboard query as a record rule), and a
real Prometheus evaluates them all (live_scrape.py). Neither says which
metrics and labels an expression reads, so reads() finds them by where
they stand in an expression promtool has accepted, without parsing it:
  - a string literal is skipped (after label_replace / label_join /
    count_values, the first one is the label the function writes);
  - [range], [range:step] and `offset DURATION` are skipped;
  - by / without / on / ignoring / group_left / group_right (LABELS): the
    grouping labels;
  - NAME{MATCHERS} or {MATCHERS}: a selector and its label matchers;
  - NAME( or NAME by|without (: a function or an aggregation;
  - any other name that is not a keyword: a metric.
"""

import json
import re

import yaml

from report import DASHBOARD, RULES

AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
                "topk", "quantile"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "by", "without", "on", "ignoring",
            "group_left", "group_right"}
LABEL_WRITERS = {"label_replace", "label_join", "count_values"}

_STR = r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`'
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_PIECE = re.compile(r"""
    (?P<str>{str})
  | (?P<range>\[[^\]]*\]|\boffset\s+-?\w+)
  | \b(?:by|without|on|ignoring|group_left|group_right)\s*\((?P<grouping>[^)]*)\)
  | (?<![\w.:])(?P<selector>{name})?\s*\{{(?P<matchers>(?:{str}|[^}}])*)\}}
  | (?<![\w.:])(?P<call>[a-zA-Z_]\w*)(?=\s*\(|\s+(?:by|without)\s*\()
  | (?<![\w.:])(?P<name>{name})
""".format(str=_STR, name=_NAME), re.X)
_MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*(%s)" % _STR)


class Reads:
    def __init__(self):
        self.selectors = []      # (metric name or None, [(label, op, value)])
        self.grouping = set()    # labels in by (...), on (...), ...
        self.functions = set()   # functions and aggregations called
        self.label_refs = set()  # labels that label_replace & co. write


def _unquote(s):
    return s[1:-1] if s[0] == "`" else bytes(s[1:-1], "utf-8").decode("unicode_escape")


def reads(expr):
    r, writer = Reads(), False
    for m in _PIECE.finditer(expr):
        if m.group("str"):
            if writer:
                r.label_refs.add(_unquote(m.group("str")))
                writer = False
        elif m.group("grouping") is not None:
            r.grouping |= {x.strip() for x in m.group("grouping").split(",") if x.strip()}
        elif m.group("matchers") is not None:
            r.selectors.append((m.group("selector"), [(label, op, _unquote(v)) for label, op, v in
                                                      _MATCHER.findall(m.group("matchers"))]))
        elif m.group("call"):
            r.functions.add(m.group("call"))
            writer = writer or m.group("call") in LABEL_WRITERS
        elif m.group("name") and m.group("name").lower() not in KEYWORDS:
            r.selectors.append((m.group("name"), []))
    return r


def metric_names(expr):
    return {name for name, _ in reads(expr).selectors if name}


def from_grafana(expr, dash):
    """The PromQL Grafana sends: $__rate_interval, $__interval and $__range
    become 1m, the dashboard's own variables (in label matchers here) .*"""
    expr = re.sub(r"\$(__rate_interval|__interval|__range)\b|\$\{(__rate_interval|__interval|__range)\}", "1m", expr)
    for v in dash.get("templating", {}).get("list", []):
        expr = re.sub(r"\$%s\b|\$\{%s\}" % (v["name"], v["name"]), ".*", expr)
    return expr


def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def dashboard_panels(dash):
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])  # collapsed rows


def dashboard_targets(dash):
    """[(where, PromQL, legend)] for every panel query."""
    return [("dashboard/%s/%s" % (p.get("title"), t.get("refId")), from_grafana(t["expr"], dash), t.get("legendFormat"))
            for p in dashboard_panels(dash) for t in p.get("targets", []) if t.get("expr")]


def dashboard_variables(dash):
    """[(where, PromQL, label)] for every label_values(EXPR, LABEL) variable."""
    out = []
    for v in dash.get("templating", {}).get("list", []):
        query = v.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        m = re.match(r"^\s*label_values\((.*),\s*([a-zA-Z_]\w*)\s*\)\s*$", query or "")
        if v.get("type") == "query" and m:
            out.append(("dashboard/variable %s" % v.get("name"), from_grafana(m.group(1), dash), m.group(2)))
    return out


def load_rules():
    """[(where, expr, record name or None)] of deploy/prometheus/rules.yaml."""
    with open(RULES) as f:
        groups = yaml.safe_load(f)["groups"]
    return [("rules/%s" % (r.get("record") or r.get("alert")), r["expr"], r.get("record"))
            for g in groups for r in g["rules"]]
