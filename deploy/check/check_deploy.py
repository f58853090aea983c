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
import collections
import json
import math
import os
import re
import shutil
import signal
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kustomize_lite  # noqa: E402
import promql  # noqa: E402

DEPLOY = os.path.dirname(HERE)
REPO = os.path.dirname(DEPLOY)
K8S = os.path.join(DEPLOY, "k8s")
DASHBOARD = os.path.join(DEPLOY, "grafana", "specserve-dashboard.json")
RULES = os.path.join(DEPLOY, "prometheus", "rules.yaml")
RULES_TEST = os.path.join(DEPLOY, "prometheus", "rules_test.yaml")
CLIENT_DIR = os.path.join(REPO, "clients", "python")

SERVERS = ("specserve-target", "specserve-draft", "specserve-coordinator")
PROBE = "specserve-health-probe"
# Flags the manifests may use before the binaries have them (reported as
# PENDING, not as a failure). None now: the --tls-* flags of the mtls
# component exist, so a binary without them is an error.
PENDING_FLAGS = set()
# Labels Prometheus (and the operator's monitors) attach to every series.
TARGET_LABELS = {"namespace", "pod", "instance", "job", "container", "service", "endpoint", "node"}
# Labels whose whole value set is known once the servers run.
ENUM_LABELS = {"phase", "role", "position"}
SYNTHETIC_METRICS = {"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_series_added",
                     "scrape_samples_post_metric_relabeling"}
MAX_LINE = 120


class Report:
    def __init__(self):
        self.errors, self.warnings, self.pending = [], [], []

    def error(self, where, msg):
        self.errors.append("%s: %s" % (where, msg))
        print("  FAIL %s: %s" % (where, msg))

    def warn(self, where, msg):
        self.warnings.append("%s: %s" % (where, msg))
        print("  warn %s: %s" % (where, msg))

    def note_pending(self, where, msg):
        self.pending.append("%s: %s" % (where, msg))
        print("  PENDING %s: %s" % (where, msg))

    @staticmethod
    def ok(msg):
        print("  ok   %s" % msg)


def rel(path):
    return os.path.relpath(path, REPO)


# --------------------------------------------------------------------------
# 1. Lint


class _UniqueKeyLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)  # YAML merge keys (<<) first, as SafeLoader does
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen and key != "<<":
            raise yaml.constructor.ConstructorError(None, None, "duplicate key %r" % (key,), key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def yaml_files():
    out = []
    for root, dirs, files in os.walk(DEPLOY):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for f in sorted(files):
            if f.endswith((".yaml", ".yml")) or f == ".yamllint":
                out.append(os.path.join(root, f))
    return out


def lint(report):
    print("== lint")
    files = yaml_files()
    for path in files:
        with open(path, "rb") as f:
            raw = f.read()
        where = rel(path)
        text = raw.decode("utf-8", errors="replace")
        if b"\r" in raw:
            report.error(where, "CR line endings")
        if raw and not raw.endswith(b"\n"):
            report.error(where, "no newline at the end")
        for n, line in enumerate(text.split("\n"), 1):
            if "\t" in line:
                report.error("%s:%d" % (where, n), "tab character")
            if line != line.rstrip():
                report.error("%s:%d" % (where, n), "trailing whitespace")
            if len(line) > MAX_LINE:
                report.error("%s:%d" % (where, n), "line longer than %d" % MAX_LINE)
        try:
            list(yaml.load_all(text, Loader=_UniqueKeyLoader))
        except yaml.YAMLError as e:
            report.error(where, "YAML: %s" % str(e).replace("\n", " "))
    report.ok("%d YAML files parse (duplicate keys, tabs, whitespace, line length checked)" % len(files))
    if shutil.which("yamllint"):
        r = subprocess.run(["yamllint", "-f", "parsable", "-c", os.path.join(DEPLOY, ".yamllint")] + files,
                           capture_output=True, text=True)
        problems = [l for l in r.stdout.splitlines() if l.strip()]
        for l in problems:
            (report.error if "[error]" in l else report.warn)("yamllint", l.replace(REPO + "/", ""))
        if r.returncode != 0 and not problems:
            report.error("yamllint", "exited %d: %s" % (r.returncode, r.stderr.strip()))
        elif not problems:
            report.ok("yamllint: %d files clean" % len(files))
    else:
        report.warn("yamllint", "not installed (apt-get install yamllint); the built-in checks above ran instead")
    try:
        with open(DASHBOARD) as f:
            json.load(f, object_pairs_hook=_unique_json_pairs)
        report.ok("%s parses" % rel(DASHBOARD))
    except (ValueError, KeyError) as e:
        report.error(rel(DASHBOARD), "JSON: %s" % e)


def _unique_json_pairs(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise KeyError("duplicate key %r" % k)
        d[k] = v
    return d


# --------------------------------------------------------------------------
# 2. Render


def overlay_dirs():
    base = os.path.join(K8S, "base")
    ov = os.path.join(K8S, "overlays")
    return [base] + [os.path.join(ov, d) for d in sorted(os.listdir(ov))
                     if os.path.isdir(os.path.join(ov, d)) and not d.startswith(".")]


def _components_used(folder, acc):
    k = yaml.safe_load(open(kustomize_lite._kustomization_file(folder)))
    for c in k.get("components", []) or []:
        acc.add(os.path.realpath(os.path.join(folder, c)))
    for r in k.get("resources", []) or []:
        p = os.path.join(folder, r)
        if os.path.isdir(p):
            _components_used(p, acc)
    return acc


def render_all(report, kubectl):
    print("== render (%s)" % ("kustomize_lite and " + kubectl if kubectl else
                              "kustomize_lite; no kubectl, so no `kubectl kustomize` comparison"))
    rendered = {}
    dirs = overlay_dirs()
    used = set()
    for d in dirs:
        _components_used(d, used)
    comp_root = os.path.join(K8S, "components")
    scratch = None
    unused = [os.path.join(comp_root, c) for c in sorted(os.listdir(comp_root))
              if os.path.realpath(os.path.join(comp_root, c)) not in used]
    if unused:
        # An overlay of our own for each component no overlay includes, on
        # top of gpu: it must live under deploy/k8s (kustomize's load rules).
        scratch = tempfile.mkdtemp(prefix=".check-", dir=K8S)
        for c in unused:
            d = os.path.join(scratch, "gpu+" + os.path.basename(c))
            os.makedirs(d)
            with open(os.path.join(d, "kustomization.yaml"), "w") as f:
                yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                "resources": [os.path.relpath(os.path.join(K8S, "overlays", "gpu"), d)],
                                "components": [os.path.relpath(c, d)]}, f)
            dirs.append(d)
    try:
        for d in dirs:
            name = os.path.basename(d) if not d.startswith(K8S + "/overlays") else "overlays/" + os.path.basename(d)
            name = "base" if d.endswith("/base") else name
            try:
                objs = kustomize_lite.render(d)
            except (kustomize_lite.KustomizeError, OSError, yaml.YAMLError) as e:
                report.error(name, "render: %s" % e)
                continue
            if kubectl:
                r = subprocess.run([kubectl, "kustomize", d], capture_output=True, text=True)
                if r.returncode != 0:
                    report.error(name, "kubectl kustomize: %s" % r.stderr.strip())
                else:
                    theirs = {kustomize_lite._key(o): o for o in yaml.safe_load_all(r.stdout) if o}
                    mine = {kustomize_lite._key(o): o for o in objs}
                    if theirs.keys() != mine.keys():
                        report.error(name, "kubectl kustomize and kustomize_lite disagree on the objects: %s vs %s"
                                     % (sorted(map(str, theirs.keys() - mine.keys())),
                                        sorted(map(str, mine.keys() - theirs.keys()))))
                    for key in theirs.keys() & mine.keys():
                        if theirs[key] != mine[key]:
                            report.error(name, "kubectl kustomize and kustomize_lite render %s differently" % (key,))
            rendered[name] = objs
            report.ok("%s: %d objects" % (name, len(objs)))
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    return rendered


# --------------------------------------------------------------------------
# 3. Objects against the binaries


class Binary:
    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError("%s --help exited %d" % (path, out.returncode))
        self.flags = {}      # name -> (takes a value, default)
        for line in out.stdout.splitlines():
            m = re.match(r"^\s+--([a-z0-9][a-z0-9-]*)( VALUE)?\s+(.*)$", line)
            if m:
                d = re.search(r"\(default: (.*)\)\s*$", m.group(3))
                self.flags[m.group(1)] = (bool(m.group(2)), d.group(1) if d else None)

    def parse(self, args):
        """{flag: value} from --name=value / --name value / --name; unknown
        flags are returned as well (the caller reports them)."""
        out, i = {}, 0
        while i < len(args):
            a = args[i]
            if not a.startswith("--"):
                out.setdefault("", []).append(a)
                i += 1
                continue
            name, eq, value = a[2:].partition("=")
            if not eq and self.flags.get(name, (False,))[0] and i + 1 < len(args):
                value = args[i + 1]
                i += 1
            out[name] = value if (eq or self.flags.get(name, (False,))[0]) else "true"
            i += 1
        return out

    def accepts(self, args):
        """The binary's own parser on these args (with --help: parse, print, exit 0)."""
        r = subprocess.run([self.path] + list(args) + ["--help"], capture_output=True, text=True, timeout=30)
        return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[0]

    def default(self, flag):
        return self.flags.get(flag, (None, None))[1]


def selector_matches(selector, labels):
    if not selector:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and labels.get(k) in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def _ns(o):
    return o.get("metadata", {}).get("namespace")


def _name(o):
    return o["metadata"]["name"]


def _quantity(q):
    """CPU quantity in cores."""
    q = str(q)
    if q.endswith("m"):
        return float(q[:-1]) / 1000
    return float(q)


def _port_of(addr):
    m = re.match(r"^(?:dns:///|dns:|ipv4:|ipv6:)?(?:\[([^\]]+)\]|([^:/]+)):(\d+)$", addr)
    if not m:
        return None, None
    return (m.group(1) or m.group(2)), int(m.group(3))


def _env_for(container, configmaps, ns, where, report):
    env = {}
    for src in container.get("envFrom") or []:
        ref = src.get("configMapRef")
        if ref:
            cm = configmaps.get((ns, ref["name"]))
            if cm is None:
                if not ref.get("optional"):
                    report.error(where, "envFrom ConfigMap %s does not exist" % ref["name"])
                continue
            env.update({src.get("prefix", "") + k: str(v) for k, v in (cm.get("data") or {}).items()})
        elif src.get("secretRef"):
            report.warn(where, "envFrom Secret %s: values not checked" % src["secretRef"]["name"])
    for e in container.get("env") or []:
        if "value" in e:
            env[e["name"]] = str(e["value"])
        elif "valueFrom" in e and "configMapKeyRef" in e["valueFrom"]:
            ref = e["valueFrom"]["configMapKeyRef"]
            cm = configmaps.get((ns, ref["name"]))
            if cm is None or ref["key"] not in (cm.get("data") or {}):
                report.error(where, "env %s: ConfigMap %s has no key %s" % (e["name"], ref["name"], ref["key"]))
            else:
                env[e["name"]] = str(cm["data"][ref["key"]])
        else:
            env[e["name"]] = None  # from the downward API or a Secret: known to exist, value unknown
    return env


def _expand(arg, env, where, report):
    def sub(m):
        var = m.group(1)
        if var not in env:
            report.error(where, "arg %r: $(%s) is not defined (env / envFrom)" % (arg, var))
            return m.group(0)
        if env[var] is None:
            return "UNKNOWN"
        return env[var]
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, arg)


def _sleep_seconds(container):
    pre = (container.get("lifecycle") or {}).get("preStop") or {}
    if "sleep" in pre:
        return float(pre["sleep"].get("seconds", 0))
    cmd = (pre.get("exec") or {}).get("command") or []
    if len(cmd) >= 2 and os.path.basename(cmd[0]) == "sleep":
        return float(cmd[1])
    return 0.0


def check_objects(name, objs, binaries, report):
    print("== objects: %s" % name)
    kinds = collections.defaultdict(list)
    for o in objs:
        for field in ("apiVersion", "kind"):
            if field not in o:
                report.error(name, "an object without %s" % field)
        if not o.get("metadata", {}).get("name"):
            report.error(name, "a %s without a name" % o.get("kind"))
            continue
        kinds[o["kind"]].append(o)
    configmaps = {(_ns(o), _name(o)): o for o in kinds["ConfigMap"]}
    namespaces = {_name(o) for o in kinds["Namespace"]}
    for o in objs:
        if _ns(o) and name != "base" and _ns(o) not in namespaces:
            report.warn(name, "%s %s is in namespace %s, which the overlay does not create" % (o["kind"], _name(o), _ns(o)))
            break

    pods = []  # (deployment, pod spec, labels)
    n_checked = 0
    for d in kinds["Deployment"]:
        where = "%s/Deployment/%s" % (name, _name(d))
        tmpl = d["spec"]["template"]
        labels = tmpl.get("metadata", {}).get("labels", {})
        if not selector_matches(d["spec"].get("selector"), labels):
            report.error(where, "spec.selector does not match the pod template's labels")
        pod = tmpl["spec"]
        pods.append((d, pod, labels))
        if not (pod.get("securityContext") or {}).get("runAsNonRoot"):
            report.error(where, "pod securityContext.runAsNonRoot is not true")
        grace = pod.get("terminationGracePeriodSeconds", 30)
        for c in pod.get("containers", []):
            cwhere = "%s[%s]" % (where, c["name"])
            cmd = c.get("command") or []
            binary = binaries.get(os.path.basename(cmd[0])) if cmd else None
            if not cmd or os.path.basename(cmd[0]) not in SERVERS:
                report.warn(cwhere, "command %r is not a specserve server: not checked" % cmd)
                continue
            if binary is None:
                report.error(cwhere, "%s is not built: cannot check its flags" % os.path.basename(cmd[0]))
                continue
            n_checked += 1
            env = _env_for(c, configmaps, _ns(d), cwhere, report)
            args = [_expand(a, env, cwhere, report) for a in (cmd[1:] + (c.get("args") or []))]
            flags = binary.parse(args)
            if "" in flags:
                report.error(cwhere, "positional arguments %r" % flags[""])
            unknown = sorted(set(flags) - set(binary.flags) - {""})
            pending = [f for f in unknown if f in PENDING_FLAGS]
            unknown = [f for f in unknown if f not in PENDING_FLAGS]
            for f in unknown:
                report.error(cwhere, "--%s is not a flag of %s (see its --help)" % (f, binary.name))
            if pending:
                report.note_pending(cwhere, "%s does not have %s yet" %
                                    (binary.name, ", ".join("--" + f for f in pending)))
            elif not unknown:
                ok, msg = binary.accepts([a for a in args if "UNKNOWN" not in a])
                if not ok:
                    report.error(cwhere, "%s refuses these args: %s" % (binary.name, msg))
            _check_server_container(cwhere, binary, flags, c, grace, binaries, report)
    report.ok("%d server containers' flags and ports checked" % n_checked)

    services = kinds["Service"]
    svc_pods = {}
    for s in services:
        where = "%s/Service/%s" % (name, _name(s))
        sel = s["spec"].get("selector") or {}
        matched = [(d, pod, labels) for d, pod, labels in pods if _ns(d) == _ns(s) and
                   all(labels.get(k) == v for k, v in sel.items())]
        svc_pods[(_ns(s), _name(s))] = matched
        if not matched:
            report.error(where, "selects no pods")
        headless = s["spec"].get("clusterIP") == "None"
        for p in s["spec"].get("ports", []):
            tp = p.get("targetPort", p["port"])
            for d, pod, _ in matched:
                cport = _container_port(pod, tp)
                if cport is None:
                    report.error(where, "port %s: targetPort %r is not a containerPort of %s" %
                                 (p.get("name"), tp, _name(d)))
                elif headless and cport != p["port"]:
                    # Clients of a headless Service dial pod IP:port directly.
                    report.error(where, "headless, so port %d must equal the containerPort %d" % (p["port"], cport))
    report.ok("%d Services match their pods' ports" % len(services))

    # Coordinators dial the headless Services of the right servers.
    for d, pod, _ in pods:
        for c in pod.get("containers", []):
            cmd = c.get("command") or []
            if not cmd or os.path.basename(cmd[0]) != "specserve-coordinator" or "specserve-coordinator" not in binaries:
                continue
            env = _env_for(c, configmaps, _ns(d), name, Report())
            flags = binaries["specserve-coordinator"].parse(
                [_expand(a, env, name, Report()) for a in cmd[1:] + (c.get("args") or [])])
            for flag, server in (("target", "specserve-target"), ("draft", "specserve-draft")):
                where = "%s/Deployment/%s --%s" % (name, _name(d), flag)
                if not flags.get(flag):
                    if flag == "target":
                        report.error(where, "missing")
                    continue
                host, port = _port_of(flags[flag])
                svc = next((s for s in services if _ns(s) == _ns(d) and host and
                            host.split(".")[0] == _name(s)), None)
                if svc is None:
                    report.error(where, "%s names no Service of this overlay" % flags[flag])
                    continue
                if svc["spec"].get("clusterIP") != "None":
                    report.warn(where, "Service %s is not headless: every session goes to one pod" % _name(svc))
                sp = next((p for p in svc["spec"]["ports"] if p["port"] == port), None)
                if sp is None:
                    report.error(where, "Service %s has no port %s" % (_name(svc), port))
                    continue
                for sd, spod, _ in svc_pods.get((_ns(svc), _name(svc)), []):
                    bins = {os.path.basename((x.get("command") or [""])[0]) for x in spod["containers"]}
                    if server not in bins:
                        report.error(where, "Service %s selects %s, which does not run %s" %
                                     (_name(svc), _name(sd), server))
                    if _container_port(spod, sp.get("targetPort", port)) != _container_port(spod, "grpc"):
                        report.error(where, "port %s does not reach %s's grpc port" % (port, _name(sd)))
            report.ok("%s: --target / --draft reach the right headless Services" % _name(d))

    # Disruption budgets.
    for d, _, labels in pods:
        budgets = [p for p in kinds["PodDisruptionBudget"]
                   if _ns(p) == _ns(d) and selector_matches(p["spec"].get("selector"), labels)]
        if len(budgets) != 1:
            report.error("%s/Deployment/%s" % (name, _name(d)), "%d PodDisruptionBudgets select it, want 1" % len(budgets))
    if kinds["PodDisruptionBudget"]:
        report.ok("every Deployment has one PodDisruptionBudget")

    _check_monitors(name, kinds, pods, services, svc_pods, report)


def _container_port(pod, port):
    for c in pod.get("containers", []):
        for p in c.get("ports", []) or []:
            if (isinstance(port, int) and p["containerPort"] == port) or p.get("name") == port:
                return p["containerPort"]
    return None


def _check_server_container(where, binary, flags, c, grace, binaries, report):
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports") or []}
    listen = flags.get("listen") or binary.default("listen")
    _, lport = _port_of(listen or "")
    if "grpc" not in ports:
        report.error(where, "no containerPort named grpc")
    elif lport != ports["grpc"]:
        report.error(where, "--listen %s, but containerPort grpc is %d" % (listen, ports["grpc"]))
    mport = flags.get("metrics-port") or binary.default("metrics-port")
    if mport and mport != "0":
        if "metrics" not in ports:
            report.error(where, "no containerPort named metrics")
        elif str(ports["metrics"]) != mport:
            report.error(where, "--metrics-port %s, but containerPort metrics is %d" % (mport, ports["metrics"]))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        if not p:
            report.error(where, "no %s" % probe)
            continue
        if "grpc" in p:
            if p["grpc"].get("port") != ports.get("grpc"):
                report.error(where, "%s grpc port %s is not the service port %s" %
                             (probe, p["grpc"].get("port"), ports.get("grpc")))
            if p["grpc"].get("service"):
                report.warn(where, "%s asks about service %r (the servers report the whole server under '')"
                            % (probe, p["grpc"]["service"]))
        elif "exec" in p:
            cmd = p["exec"].get("command") or []
            if not cmd or os.path.basename(cmd[0]) != PROBE:
                report.error(where, "%s runs %r, not %s" % (probe, cmd[:1], PROBE))
                continue
            probe_bin = binaries.get(PROBE)
            if probe_bin is None:
                report.warn(where, "%s not built: exec probe flags not checked" % PROBE)
                continue
            pf = probe_bin.parse(cmd[1:])
            for f in sorted(set(pf) - set(probe_bin.flags)):
                report.error(where, "%s: --%s is not a flag of %s" % (probe, f, PROBE))
            _, pport = _port_of(pf.get("addr") or "")
            if pport != ports.get("grpc"):
                report.error(where, "%s checks port %s, not the service port %s" % (probe, pport, ports.get("grpc")))
        else:
            report.error(where, "%s is neither a grpc probe nor %s" % (probe, PROBE))
    drain = float(flags.get("drain-seconds") or binary.default("drain-seconds") or 0)
    pre = _sleep_seconds(c)
    if grace < drain + pre + 5:
        report.error(where, "terminationGracePeriodSeconds %s < preStop %gs + --drain-seconds %gs + 5s" %
                     (grace, pre, drain))
    res = c.get("resources") or {}
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            if r not in (res.get(kind) or {}):
                report.error(where, "no resources.%s.%s" % (kind, r))
    threads = flags.get("threads")
    cpu_limit = (res.get("limits") or {}).get("cpu")
    if threads and threads.isdigit() and cpu_limit and int(threads) > math.ceil(_quantity(cpu_limit)):
        report.error(where, "--threads %s above the CPU limit %s" % (threads, cpu_limit))
    gpu_req = (res.get("requests") or {}).get("nvidia.com/gpu")
    gpu_lim = (res.get("limits") or {}).get("nvidia.com/gpu")
    backend = flags.get("backend") or binary.default("backend")
    if binary.name in ("specserve-target", "specserve-draft"):
        if gpu_req is not None or gpu_lim is not None:
            if str(gpu_req) != "1" or str(gpu_lim) != "1":
                report.error(where, "nvidia.com/gpu requests %s / limits %s, want 1 / 1" % (gpu_req, gpu_lim))
            if backend != "cuda":
                report.error(where, "holds a GPU but runs --backend %s" % backend)
        elif backend == "cuda":
            report.error(where, "--backend cuda without an nvidia.com/gpu")
        if not flags.get("model"):
            report.error(where, "no --model")


def _check_monitors(name, kinds, pods, services, svc_pods, report):
    monitors = kinds["PodMonitor"] + kinds["ServiceMonitor"]
    if not monitors:
        return
    scraped = collections.Counter()
    for m in kinds["PodMonitor"]:
        where = "%s/PodMonitor/%s" % (name, _name(m))
        sel = [(d, pod) for d, pod, labels in pods if _ns(d) == _ns(m) and selector_matches(m["spec"].get("selector"), labels)]
        if not sel:
            report.error(where, "selects no pods")
        for ep in m["spec"].get("podMetricsEndpoints", []):
            for d, pod in sel:
                if _container_port(pod, ep.get("port")) is None:
                    report.error(where, "port %r is not a containerPort of %s" % (ep.get("port"), _name(d)))
                elif _container_port(pod, ep.get("port")) != _container_port(pod, "metrics"):
                    report.error(where, "port %r of %s is not its metrics port" % (ep.get("port"), _name(d)))
                scraped[_name(d)] += 1
    for m in kinds["ServiceMonitor"]:
        where = "%s/ServiceMonitor/%s" % (name, _name(m))
        sel = [s for s in services if _ns(s) == _ns(m) and
               selector_matches(m["spec"].get("selector"), s.get("metadata", {}).get("labels", {}))]
        if not sel:
            report.error(where, "selects no Services")
        for ep in m["spec"].get("endpoints", []):
            hits = 0
            for s in sel:
                sp = next((p for p in s["spec"].get("ports", []) if p.get("name") == ep.get("port")), None)
                if sp is None:
                    continue  # the operator keeps only endpoints with this port name
                hits += 1
                for d, pod, _ in svc_pods.get((_ns(s), _name(s)), []):
                    if _container_port(pod, sp.get("targetPort", sp["port"])) != _container_port(pod, "metrics"):
                        report.error(where, "Service %s port %s does not reach %s's metrics port" %
                                     (_name(s), ep.get("port"), _name(d)))
                    scraped[_name(d)] += 1
            if not hits:
                report.error(where, "no selected Service has a port named %r" % ep.get("port"))
    for d, _, _ in pods:
        if scraped[_name(d)] != 1:
            report.error("%s/Deployment/%s" % (name, _name(d)), "scraped by %d monitors, want 1" % scraped[_name(d)])
    report.ok("%d monitors: each server pod scraped once, on its metrics port" % len(monitors))


def check_compose(binaries, report):
    """deploy/docker/compose.yaml: flags, health addresses, upstream addresses."""
    path = os.path.join(DEPLOY, "docker", "compose.yaml")
    print("== %s" % rel(path))
    with open(path) as f:
        compose = yaml.safe_load(f)
    services = compose.get("services", {})
    listen = {}
    for name, svc in services.items():
        where = "compose/%s" % name
        cmd = svc.get("command") or []
        binary = binaries.get(os.path.basename(cmd[0])) if cmd else None
        if binary is None:
            report.error(where, "command %r is not a built specserve server" % cmd[:1])
            continue
        flags = binary.parse(cmd[1:])
        for f in sorted(set(flags) - set(binary.flags)):
            report.error(where, "--%s is not a flag of %s" % (f, binary.name))
        ok, msg = binary.accepts(cmd[1:])
        if not ok:
            report.error(where, "%s refuses these args: %s" % (binary.name, msg))
        _, port = _port_of(flags.get("listen") or binary.default("listen"))
        listen[name] = port
        _, hport = _port_of((svc.get("environment") or {}).get("SPECSERVE_HEALTH_ADDR", ""))
        if hport != port:
            report.error(where, "SPECSERVE_HEALTH_ADDR port %s is not the --listen port %s" % (hport, port))
        drain = float(flags.get("drain-seconds") or binary.default("drain-seconds") or 0)
        grace = str(svc.get("stop_grace_period", "10s"))
        m = re.match(r"^(\d+)s$", grace)
        if not m or int(m.group(1)) <= drain:
            report.error(where, "stop_grace_period %s does not outlast --drain-seconds %g" % (grace, drain))
    for name, svc in services.items():
        cmd = svc.get("command") or []
        if not cmd or os.path.basename(cmd[0]) != "specserve-coordinator" or "specserve-coordinator" not in binaries:
            continue
        flags = binaries["specserve-coordinator"].parse(cmd[1:])
        for flag in ("target", "draft"):
            host, port = _port_of(flags.get(flag, ""))
            if host not in services or listen.get(host) != port:
                report.error("compose/%s" % name, "--%s %s is not a compose service's --listen port" %
                             (flag, flags.get(flag)))
    report.ok("%d compose services checked" % len(services))


# --------------------------------------------------------------------------
# 4. Rules


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


# --------------------------------------------------------------------------
# 5. Metrics from running servers


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


# --------------------------------------------------------------------------


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
