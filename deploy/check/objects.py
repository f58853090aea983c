"""Check 3, objects against the binaries: flags, $(VARS), ports, probes,
Services, the coordinator's upstreams, monitors, grace periods, resources,
GPUs and disruption budgets of every rendered overlay, and the same for
deploy/docker/compose.yaml."""

import collections
import math
import os
import re

import yaml

from binaries import _env_for, _expand, _name, _ns, _port_of, _quantity, _sleep_seconds, selector_matches
from report import DEPLOY, PENDING_FLAGS, PROBE, SERVERS, Report, rel


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
    _check_network_policy(name, kinds, pods, report)


def _check_network_policy(name, kinds, pods, report):
    """The model services' gRPC ports admit only the coordinator's pods."""
    coordinators = [labels for d, pod, labels in pods if _binary_of(pod) == "specserve-coordinator"]
    for d, pod, labels in pods:
        if _binary_of(pod) not in ("specserve-target", "specserve-draft"):
            continue
        where = "%s/Deployment/%s" % (name, _name(d))
        grpc = _container_port(pod, "grpc")
        rules = [r for p in kinds["NetworkPolicy"]
                 if _ns(p) == _ns(d) and selector_matches(p["spec"].get("podSelector"), labels)
                 and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
                 for r in p["spec"].get("ingress") or []]
        if not rules:
            report.error(where, "no NetworkPolicy restricts who reaches its gRPC port %s" % grpc)
            continue
        for r in rules:
            ports = [p.get("port") for p in r.get("ports") or []]
            if ports and grpc not in ports:
                continue
            peers = r.get("from") or []
            if not peers or any("podSelector" not in f or not any(
                    selector_matches(f["podSelector"], c) for c in coordinators) for f in peers):
                report.error(where, "a NetworkPolicy lets other than the coordinator reach gRPC port %s" % grpc)
    if kinds["NetworkPolicy"]:
        report.ok("only the coordinator reaches the model services' gRPC ports")


def _binary_of(pod):
    cmd = (pod.get("containers") or [{}])[0].get("command") or [""]
    return os.path.basename(cmd[0])


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
    hlisten = flags.get("http-listen") or binary.default("http-listen")
    if hlisten:
        _, hport = _port_of(hlisten)
        if "http" not in ports:
            report.error(where, "--http-listen %s, but no containerPort named http" % hlisten)
        elif hport != ports["http"]:
            report.error(where, "--http-listen %s, but containerPort http is %d" % (hlisten, ports["http"]))
    elif "http" in ports:
        report.error(where, "containerPort http, but no --http-listen")
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
        elif "httpGet" in p:
            # The coordinator's HTTP API: GET /ready or /health on its --http-listen port.
            hp = p["httpGet"].get("port")
            if "http" not in ports or hp not in ("http", ports["http"]):
                report.error(where, "%s httpGet port %r is not the --http-listen port (containerPort http)" % (probe, hp))
            if p["httpGet"].get("path") not in ("/ready", "/health"):
                report.error(where, "%s httpGet path %r: the servers answer /ready and /health" %
                             (probe, p["httpGet"].get("path")))
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
            report.error(where, "%s is neither a grpc or httpGet probe nor %s" % (probe, PROBE))
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
