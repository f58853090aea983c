"""Just enough PromQL to find what a query reads: the metric selectors (name
and label matchers), the grouping labels (by / without / on / ignoring /
group_left / group_right) and the functions called. Not a full parser: where
promtool is installed, tools/check_deploy.sh also has it check the syntax.
"""

import re

FUNCTIONS = {
    # aggregations
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile",
    # functions
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "day_of_month",
    "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp", "floor", "histogram_count",
    "histogram_sum", "histogram_fraction", "histogram_quantile", "holt_winters", "hour", "idelta", "increase",
    "irate", "label_join", "label_replace", "ln", "log2", "log10", "minute", "month", "predict_linear", "rate",
    "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "time", "timestamp", "vector", "year",
    "avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time", "quantile_over_time",
    "stddev_over_time", "stdvar_over_time", "last_over_time", "present_over_time", "acos", "acosh", "asin",
    "asinh", "atan", "atanh", "cos", "cosh", "sin", "sinh", "tan", "tanh", "deg", "rad", "pi",
}
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
                "topk", "quantile"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"and", "or", "unless", "offset", "bool", "atan2", "inf", "nan"} | GROUPING

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<var>\$\{[^}]*\}|\$\w+|\[\[\w+\]\])
  | (?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?[a-zA-Z]*(?:\d+[a-zA-Z]+)*)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^=<>,(){}\[\]@:])
""", re.X)


class PromQLError(Exception):
    pass


def tokenize(expr):
    pos, out = 0, []
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            raise PromQLError("cannot read %r at %d" % (expr[pos:pos + 20], pos))
        pos = m.end()
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
    return out


def _unquote(s):
    if s[0] == "`":
        return s[1:-1]
    return bytes(s[1:-1], "utf-8").decode("unicode_escape")


class Query:
    def __init__(self):
        self.selectors = []      # (metric name or None, [(label, op, value)])
        self.grouping = set()    # label names in by(...), on(...), ...
        self.functions = set()
        self.label_refs = set()  # label names other functions name (label_replace's src / dst)


def parse(expr):
    toks = tokenize(expr)
    q = Query()
    depth = {"(": 0, "[": 0, "{": 0}
    closing = {")": "(", "]": "[", "}": "{"}
    for _, t in toks:
        if t in depth:
            depth[t] += 1
        elif t in closing:
            depth[closing[t]] -= 1
            if depth[closing[t]] < 0:
                raise PromQLError("unbalanced %r in %r" % (t, expr))
    if any(depth.values()):
        raise PromQLError("unbalanced brackets in %r" % expr)

    i = 0
    while i < len(toks):
        kind, t = toks[i]
        nxt = toks[i + 1][1] if i + 1 < len(toks) else None
        if t == "[":  # range or subquery: durations and variables only
            while toks[i][1] != "]":
                i += 1
            i += 1
            continue
        if kind == "ident":
            low = t.lower()
            if low in GROUPING and nxt == "(":
                j = i + 2
                while toks[j][1] != ")":
                    if toks[j][0] == "ident":
                        q.grouping.add(toks[j][1])
                    j += 1
                i = j + 1
                continue
            if low in KEYWORDS:
                i += 1
                continue
            if nxt == "(" or (t in AGGREGATIONS and nxt in ("by", "without")):
                if t not in FUNCTIONS:
                    raise PromQLError("unknown function %s() in %r" % (t, expr))
                q.functions.add(t)
                if t == "label_replace":
                    # label_replace(v, "dst", "replacement", "src", "regex")
                    strs = [_unquote(v) for k, v in toks[i + 2:] if k == "str"][:4]
                    if len(strs) >= 3:
                        q.label_refs.add(strs[2])
                i += 1
                continue
            # a metric name, maybe with matchers
            matchers, i = _matchers(toks, i + 1)
            q.selectors.append((t, matchers))
            continue
        if t == "{":  # a selector with no name before it
            matchers, i = _matchers(toks, i)
            q.selectors.append((None, matchers))
            continue
        i += 1
    return q


def _matchers(toks, i):
    out = []
    if i >= len(toks) or toks[i][1] != "{":
        return out, i
    i += 1
    while toks[i][1] != "}":
        if toks[i][1] == ",":
            i += 1
            continue
        label, op, value = toks[i], toks[i + 1], toks[i + 2]
        if label[0] != "ident" or op[1] not in ("=", "!=", "=~", "!~") or value[0] not in ("str", "var"):
            raise PromQLError("bad label matcher near %r" % (label[1],))
        out.append((label[1], op[1], _unquote(value[1]) if value[0] == "str" else value[1]))
        i += 3
    return out, i + 1


def metric_names(expr):
    return {name for name, _ in parse(expr).selectors if name}
