"""Check 2, render: `kubectl kustomize` on the base, every overlay, and each
folder under components/ that no overlay uses (CI has Debian 12's
kubernetes-client, kubectl 1.20, whose kustomize v2 has no Components,
`patches` or folders in `resources`: the kustomizations use `bases`,
`patchesStrategicMerge` and `patchesJson6902`, which newer kustomize reads
too)."""

import os
import re
import shutil
import subprocess

import yaml

from report import K8S


def _kustomization(folder):
    with open(os.path.join(folder, "kustomization.yaml")) as f:
        return yaml.safe_load(f) or {}


def _uses(folder, acc):
    """Adds to acc every folder FOLDER's kustomization builds on, recursively."""
    k = _kustomization(folder)
    for entry in (k.get("bases") or []) + (k.get("resources") or []):
        path = os.path.realpath(os.path.join(folder, entry))
        if os.path.isdir(path) and path not in acc:
            acc.add(path)
            _uses(path, acc)
    return acc


def kustomizations():
    """[(name, folder)]: base, overlays/*, and components/* no overlay uses."""
    out = [("base", os.path.join(K8S, "base"))]
    for top in ("overlays", "components"):
        root = os.path.join(K8S, top)
        out += [(top + "/" + d, os.path.join(root, d)) for d in sorted(os.listdir(root))
                if os.path.isfile(os.path.join(root, d, "kustomization.yaml"))]
    used = set()
    for name, folder in out:
        if name.startswith("overlays/"):
            _uses(folder, used)
    return [(n, f) for n, f in out if not (n.startswith("components/") and os.path.realpath(f) in used)]


def render_all(report):
    kubectl = shutil.which("kubectl")
    version = ""
    if kubectl:
        r = subprocess.run([kubectl, "version", "--client"], capture_output=True, text=True)
        m = re.search(r"v\d+\.\d+\.\d+", r.stdout)
        version = " " + m.group() if m else ""
    print("== render (kubectl%s kustomize)" % version)
    if not kubectl:
        report.missing("kubectl", "kubernetes-client", "no overlay was rendered or checked")
    elif subprocess.run([kubectl, "kustomize", "--help"], capture_output=True).returncode != 0:
        report.missing("kubectl kustomize", "kubernetes-client", "this kubectl has no `kustomize`")
        kubectl = None
    elif version and tuple(map(int, version[2:].split(".")[:2])) > (1, 20):
        report.warn("kubectl", "%s is newer than CI's (Debian 12's kubernetes-client, 1.20, kustomize v2): "
                               "what renders here may not render there" % version.strip())
    rendered = {}
    if not kubectl:
        return rendered
    for name, folder in kustomizations():
        r = subprocess.run([kubectl, "kustomize", folder], capture_output=True, text=True)
        if r.returncode != 0:
            report.error(name, "kubectl kustomize: %s" % r.stderr.strip())
            continue
        try:
            objs = [o for o in yaml.safe_load_all(r.stdout) if o]
        except yaml.YAMLError as e:
            report.error(name, "kubectl kustomize printed YAML that does not parse: %s" % e)
            continue
        rendered[name] = objs
        report.ok("%s: %d objects" % (name, len(objs)))
    return rendered
