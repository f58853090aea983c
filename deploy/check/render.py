"""Check 2, render: every overlay (and base, and each component no overlay
uses) with kustomize_lite; where kubectl exists also with `kubectl
kustomize`, and the two must give the same objects."""

import os
import shutil
import subprocess
import tempfile

import yaml

import kustomize_lite
from report import K8S


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
