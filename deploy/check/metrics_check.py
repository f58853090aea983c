"""Checks 4 and 5: the PrometheusRule against rules.yaml (promtool where
installed), the dashboard's layout, and every metric, label and label value
that the dashboard and the rules read against what running servers export
(evaluated by a real Prometheus where installed)."""

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

import promql
from report import CLIENT_DIR, DASHBOARD, ENUM_LABELS, REPO, RULES, RULES_TEST, SYNTHETIC_METRICS, TARGET_LABELS, rel


def check_rules(report):
    print("== rules")
    import sync_prometheusrule
    with open(sync_prometheusrule.OUT) as f:
        if f.read() != sync_prometheusrule.render():
            report.error(rel(sync_prometheusrule.OUT), "differs from deploy/prometheus/rules.yaml: "
                         "run python3 deploy/check/sync_prometheusrule.py")
        else:
            report.ok("PrometheusRule matches rules.yaml")
    promtool = shutil.which("promtool")
    if not promtool:
        report.warn("promtool", "not installed: rule syntax and rules_test.yaml not run (apt-get install prometheus)")
        return
    for cmd in (["check", "rules", RULES], ["test", "rules", RULES_TEST]):
        r = subprocess.run([promtool] + cmd, capture_output=True, text=True, cwd=os.path.dirname(RULES))
        if r.returncode != 0:
            report.error("promtool " + " ".join(cmd[:2]), (r.stdout + r.stderr).strip())
        else:
            report.ok("promtool %s %s" % (" ".join(cmd[:2]), rel(cmd[2])))


_TAKEN = set()


def _free_port():
    # Below the ephemeral range (32768+): a port from bind(0) may become the
    # source port of an outgoing connection before the server listens on it.
    for port in random.sample(range(20000, 32000), 12000):
        if port in _TAKEN:
            continue
        s = socket.socket()
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            continue
        finally:
            s.close()
        _TAKEN.add(port)
        return port
    raise RuntimeError("no free port in 20000..32000")


def _scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        return r.read().decode()


def parse_exposition(text, families):
    """families: name -> {label: set(values)}, for every sample name."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            m = re.match(r"# TYPE (\S+) (\S+)", line)
            if m:
                families.setdefault(m.group(1), {})
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
        if not m:
            continue
        labels = families.setdefault(m.group(1), {})
        for lm in re.finditer(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:\\.|[^"\\])*)"', m.group(3) or ""):
            labels.setdefault(lm.group(1), set()).add(lm.group(2))


def all_queries():
    """Every PromQL expression of the dashboard and the rules, with Grafana's
    variables replaced as a dashboard would: [(where, expr)]."""
    out = []
    with open(DASHBOARD) as f:
        dash = json.load(f)
    for p in dash.get("panels", []):
        for sub in [p] + p.get("panels", []):
            for t in sub.get("targets", []):
                if t.get("expr"):
                    e = t["expr"].replace("$namespace", ".*").replace("$__rate_interval", "1m")
                    out.append(("dashboard/%s/%s" % (sub.get("title"), t.get("refId")), e))
    with open(RULES) as f:
        for g in yaml.safe_load(f)["groups"]:
            for r in g["rules"]:
                out.append(("rules/%s" % (r.get("record") or r.get("alert")), r["expr"]))
                if "record" in r:
                    out.append(("rules/%s (recorded)" % r["record"], r["record"]))
    return out


def _start_prometheus(workdir, scrape_ports, report):
    """A real Prometheus (where installed) scraping the servers every second
    and evaluating rules.yaml, to run every query in a real engine."""
    binary = shutil.which("prometheus")
    if not binary:
        report.warn("prometheus", "not installed: queries were checked by name only, not evaluated "
                                  "(apt-get install prometheus to evaluate them)")
        return None, None
    with open(RULES) as f:
        rules = re.sub(r"interval: \d+[smh]", "interval: 1s", f.read())
    with open(os.path.join(workdir, "rules.yaml"), "w") as f:
        f.write(rules)
    targets = [{"targets": ["127.0.0.1:%d" % port], "labels": {"namespace": "check", "pod": pod}}
               for pod, port in scrape_ports.items()]
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "rule_files": [os.path.join(workdir, "rules.yaml")],
              "scrape_configs": [{"job_name": "specserve", "static_configs": targets}]}
    with open(os.path.join(workdir, "prometheus.yml"), "w") as f:
        yaml.safe_dump(config, f)
    port = _free_port()
    log = open(os.path.join(workdir, "prometheus.log"), "w")
    proc = subprocess.Popen([binary, "--config.file=" + os.path.join(workdir, "prometheus.yml"),
                             "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
                             "--web.listen-address=127.0.0.1:%d" % port], stdout=log, stderr=subprocess.STDOUT)
    return proc, port


def _evaluate(port, queries, report):
    import urllib.error
    import urllib.parse
    nonempty = 0
    for where, expr in queries:
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expr}))
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                result = json.load(r)
        except urllib.error.HTTPError as e:
            result = json.load(e)
        if result.get("status") != "success":
            report.error(where, "Prometheus cannot evaluate it: %s" % result.get("error"))
        elif result["data"]["result"]:
            nonempty += 1
    report.ok("Prometheus evaluated %d queries without error (%d with data)" % (len(queries), nonempty))


def scrape_running_servers(bin_dir, report):
    print("== metrics from running servers (%s)" % (rel(bin_dir) if bin_dir.startswith(REPO) else bin_dir))
    sys.path.insert(0, CLIENT_DIR)
    import grpc
    import specserve_client
    logs = tempfile.mkdtemp(prefix="check-deploy-")
    os.environ.setdefault("SPECSERVE_PY_GEN", os.path.join(logs, "gen"))
    ports = {k: _free_port() for k in ("t", "tm", "d", "dm", "c", "cm")}
    procs = {}

    def start(name, args):
        log = open(os.path.join(logs, name + ".log"), "w")
        procs[name] = subprocess.Popen([os.path.join(bin_dir, "specserve-" + name)] + args,
                                       stdout=log, stderr=subprocess.STDOUT)

    families = {}
    try:
        start("target", ["--listen", "127.0.0.1:%d" % ports["t"], "--metrics-port", str(ports["tm"]),
                         "--model", os.path.join(REPO, "models", "code-target-7m.gguf")])
        start("draft", ["--listen", "127.0.0.1:%d" % ports["d"], "--metrics-port", str(ports["dm"]),
                        "--model", os.path.join(REPO, "models", "code-draft-1m.gguf")])
        start("coordinator", ["--listen", "127.0.0.1:%d" % ports["c"], "--metrics-port", str(ports["cm"]),
                              "--target", "127.0.0.1:%d" % ports["t"], "--draft", "127.0.0.1:%d" % ports["d"]])
        prom, prom_port = _start_prometheus(logs, {"coordinator": ports["cm"], "target": ports["tm"],
                                                   "draft": ports["dm"]}, report)
        if prom:
            procs["prometheus"] = prom
        with specserve_client.SpecserveClient("127.0.0.1:%d" % ports["c"]) as client:
            client.wait_ready(90)
            prompt = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
            # With Prometheus watching, keep the traffic up for a few scrapes.
            until = time.monotonic() + (8 if prom else 0)
            while True:
                for drafter in ("model", "ngram", "none"):
                    client.generate_unary(prompt, max_tokens=24, k=4, drafter=drafter, timeout=120)
                client.generate_unary(prompt, max_tokens=24, adaptive_k=True, timeout=120)
                if time.monotonic() >= until:
                    break
            try:
                client.generate_unary(prompt, k=99, timeout=60)
                report.error("metrics", "a request with k=99 was not refused")
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                    report.error("metrics", "k=99 answered %s, want INVALID_ARGUMENT" % e.code())
            time.sleep(0.5)  # let the services count the closed sessions
            parse_exposition(_scrape(ports["dm"]), families)
            # The draft service dies: the next request falls back (and says why).
            procs["draft"].kill()
            procs["draft"].wait()
            resp = client.generate_unary(prompt, max_tokens=24, k=4, drafter="model", timeout=120)
            if resp.stats.fallbacks < 1:
                report.warn("metrics", "no fallback counted after the draft service died (drafter %s)"
                            % resp.stats.drafter)
        time.sleep(0.5)
        parse_exposition(_scrape(ports["cm"]), families)
        parse_exposition(_scrape(ports["tm"]), families)
        if prom:
            time.sleep(3)  # a few more scrapes and rule evaluations
            _evaluate(prom_port, all_queries(), report)
    except Exception as e:  # noqa: BLE001 (any failure here is a failed check)
        report.error("metrics", "running the servers: %s: %s (logs in %s)" % (type(e).__name__, e, logs))
        return None
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(timeout=40)
            except subprocess.TimeoutExpired:
                p.kill()
    shutil.rmtree(logs, ignore_errors=True)
    names = sorted(n for n in families if n.startswith("specserve_"))
    report.ok("%d specserve_ series names exported after the test traffic" % len(names))
    return families


def _recorded_rules():
    with open(RULES) as f:
        rules = yaml.safe_load(f)
    recorded = {}
    for g in rules["groups"]:
        for r in g["rules"]:
            if "record" in r:
                recorded[r["record"]] = promql.parse(r["expr"]).grouping - {"le"}
    return rules, recorded


def check_query(where, expr, families, recorded, report, legend=None):
    try:
        q = promql.parse(expr)
    except promql.PromQLError as e:
        report.error(where, str(e))
        return set()
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
            aggregated = bool(q.functions & promql.AGGREGATIONS)
            if label not in q.grouping and label not in q.label_refs and (aggregated or label not in labels_here):
                report.error(where, "legend {{%s}}: the query's result has no label %s" % (label, label))
    return names


def check_dashboard_and_rules(families, report):
    print("== dashboard and rules read only exported metrics")
    rules, recorded = _recorded_rules()
    used = set()
    with open(DASHBOARD) as f:
        dash = json.load(f)
    panels = []
    for p in dash.get("panels", []):
        panels.append(p)
        panels.extend(p.get("panels", []))  # collapsed rows
    n = 0
    for p in panels:
        for t in p.get("targets", []):
            if t.get("expr"):
                n += 1
                used |= check_query("dashboard/%s/%s" % (p.get("title"), t.get("refId")), t["expr"], families,
                                    recorded, report, legend=t.get("legendFormat"))
    for v in dash.get("templating", {}).get("list", []):
        query = v.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        m = re.match(r"^\s*label_values\((.*),\s*([a-zA-Z_]\w*)\s*\)\s*$", query or "")
        if v.get("type") == "query" and m:
            n += 1
            used |= check_query("dashboard/variable %s" % v.get("name"), m.group(1), families, recorded, report)
            label = m.group(2)
            if label not in TARGET_LABELS and not any(label in families.get(x, {}) for x in promql.metric_names(m.group(1))):
                report.error("dashboard/variable %s" % v.get("name"), "no label %s" % label)
    report.ok("%d dashboard queries" % n)
    n = 0
    for g in rules["groups"]:
        for r in g["rules"]:
            n += 1
            used |= check_query("rules/%s" % (r.get("record") or r.get("alert")), r["expr"], families, recorded, report)
    report.ok("%d rules" % n)
    # Coverage, the other way round: an exported family nobody shows.
    shown = set()
    for name in used:
        shown.add(re.sub(r"_(bucket|sum|count)$", "", name))
    exported = {re.sub(r"_(bucket|sum|count)$", "", n) for n in families if n.startswith("specserve_")}
    for name in sorted(exported - shown):
        report.warn("dashboard", "%s is exported but no panel or rule reads it" % name)


def check_dashboard_layout(report):
    print("== dashboard layout")
    with open(DASHBOARD) as f:
        dash = json.load(f)
    panels = dash.get("panels", [])
    if not panels:
        report.error("dashboard", "no panels")
        return
    first = min(panels, key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"]))
    exprs = " ".join(t.get("expr", "") for t in first.get("targets", []))
    if first is not panels[0] or "acceptance" not in first.get("title", "").lower() or \
            "specserve_draft_tokens_accepted_total" not in exprs or "specserve_draft_tokens_proposed_total" not in exprs:
        report.error("dashboard", "the first panel must be the acceptance rate (accepted / proposed)")
    ids = [p.get("id") for p in panels]
    if len(set(ids)) != len(ids):
        report.error("dashboard", "panel ids repeat")
    cells = {}
    for p in panels:
        g = p["gridPos"]
        if g["x"] + g["w"] > 24:
            report.error("dashboard", "panel %r sticks out of the 24-column grid" % p.get("title"))
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    report.error("dashboard", "panels %r and %r overlap" % (cells[(x, y)], p.get("title")))
                    break
                cells[(x, y)] = p.get("title")
        if p.get("type") != "row" and (p.get("datasource") or {}).get("uid") != "${datasource}":
            report.error("dashboard", "panel %r does not use the $datasource variable" % p.get("title"))
    if not dash.get("uid"):
        report.error("dashboard", "no uid")
    report.ok("%d panels; the first is %r" % (len(panels), first.get("title")))
