"""Check 5, first half: start the three servers on loopback, send them
requests, and read what they export: their /metrics, parsed with
prometheus_client's text parser and linted with `promtool check metrics`;
and a real Prometheus scraping them and evaluating rules.yaml, in which
`promtool query instant` runs every query of the dashboard and the rules."""

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

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # reported when the servers are to be scraped
    text_string_to_metric_families = None

from queries import dashboard_targets, dashboard_variables, load_dashboard, load_rules
from report import CLIENT_DIR, REPO, RULES, find_tool, rel

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


def _scrape(port, pod, families, promtool, report):
    """Adds to families (sample name -> {label: set(values)}) what the
    server on PORT exports."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = families.setdefault(s.name, {})
            for k, v in s.labels.items():
                labels.setdefault(k, set()).add(v)
    if promtool:
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        for line in (r.stdout + r.stderr).splitlines():
            if line.strip():  # lint advice (naming, help texts): warnings
                report.warn("promtool check metrics (%s)" % pod, line.strip())


def _start_prometheus(workdir, scrape_ports, report):
    """A real Prometheus scraping the servers every second and evaluating
    rules.yaml, to run every query in a real engine."""
    binary = find_tool(report, "prometheus", "prometheus", "the queries were not evaluated by a real Prometheus")
    if not binary:
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


def _evaluate(promtool, port, skip, report):
    dash = load_dashboard()
    queries = [(w, e) for w, e, _ in dashboard_targets(dash) + dashboard_variables(dash)]
    for where, expr, record in load_rules():
        queries.append((where, expr))
        if record:
            queries.append((where + " (recorded)", record))
    queries = [(w, e) for w, e in queries if w not in skip]
    nonempty = 0
    for where, expr in queries:
        r = subprocess.run([promtool, "query", "instant", "-o", "json", "http://127.0.0.1:%d" % port, expr],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            report.error(where, "Prometheus cannot evaluate it: %s" % (r.stdout + r.stderr).strip())
        elif r.stdout.strip() not in ("", "[]", "null"):
            nonempty += 1
    report.ok("Prometheus evaluated %d queries without error (%d with data; promtool query instant)"
              % (len(queries), nonempty))


def scrape_running_servers(bin_dir, report, skip=()):
    """{sample name: {label: set(values)}} after test traffic, or None. SKIP:
    queries (by where) not to evaluate (promtool refused them already)."""
    print("== metrics from running servers (%s)" % (rel(bin_dir) if bin_dir.startswith(REPO) else bin_dir))
    if text_string_to_metric_families is None:
        report.missing("prometheus_client", "python3-prometheus-client", "no metrics were scraped")
        return None
    promtool = find_tool(report, "promtool", "prometheus", "the scraped metrics were not linted")
    sys.path.insert(0, CLIENT_DIR)
    import grpc
    import specserve_client
    logs = tempfile.mkdtemp(prefix="check-deploy-")
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
            _scrape(ports["dm"], "draft", families, promtool, report)
            # The draft service dies: the next request falls back (and says why).
            procs["draft"].kill()
            procs["draft"].wait()
            resp = client.generate_unary(prompt, max_tokens=24, k=4, drafter="model", timeout=120)
            if resp.stats.fallbacks < 1:
                report.warn("metrics", "no fallback counted after the draft service died (drafter %s)"
                            % resp.stats.drafter)
        time.sleep(0.5)
        _scrape(ports["cm"], "coordinator", families, promtool, report)
        _scrape(ports["tm"], "target", families, promtool, report)
        if prom and promtool:
            time.sleep(3)  # a few more scrapes and rule evaluations
            _evaluate(promtool, prom_port, set(skip), report)
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
