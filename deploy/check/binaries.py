"""A server binary as its --help describes it (flags, defaults, its own
parser), and small helpers for reading Kubernetes objects, shared by the
object and compose checks."""

import os
import re
import subprocess


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
