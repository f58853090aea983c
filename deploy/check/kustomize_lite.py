"""A small Kustomize renderer: exactly the features deploy/k8s uses, so that
tools/check_deploy.sh can render every overlay where `kubectl kustomize` is
not installed (Debian 12's kubectl 1.20 embeds a kustomize too old for
components). Where kubectl is present the check renders with both and
requires the same objects, which keeps this file honest.

Supported kustomization fields: resources (files and folders), components,
namespace, images (newName, newTag, digest), patches (a strategic-merge patch
file, or an RFC 6902 JSON patch file with a `target`), patchesStrategicMerge.
Anything else is an error, not silently ignored.
"""

import copy
import os

import yaml

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED_FIELDS = {"apiVersion", "kind", "resources", "components", "namespace", "images", "patches",
                    "patchesStrategicMerge"}
# Kinds that have no namespace (the subset that could appear here).
CLUSTER_KINDS = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                 "PersistentVolume", "StorageClass", "PriorityClass", "RuntimeClass", "IngressClass",
                 "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}


class KustomizeError(Exception):
    pass


def load_yaml_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def _kustomization_file(folder):
    for name in KUSTOMIZATION_FILES:
        p = os.path.join(folder, name)
        if os.path.isfile(p):
            return p
    raise KustomizeError("no kustomization file in %s" % folder)


def _key(obj):
    md = obj.get("metadata", {})
    return (obj.get("kind"), md.get("namespace"), md.get("name"))


# --------------------------------------------------------------------------
# Strategic merge patch (the list merge keys Kubernetes declares for the
# fields used here; lists without a merge key are replaced whole).

def _merge_key(field, items):
    if field in ("containers", "initContainers", "ephemeralContainers", "env", "volumes", "imagePullSecrets",
                 "hostAliases"):
        return "name" if field != "hostAliases" else "ip"
    if field == "volumeMounts":
        return "mountPath"
    if field == "ports":
        sample = next((i for i in items if isinstance(i, dict)), {})
        return "containerPort" if "containerPort" in sample else "port"
    return None


def strategic_merge(base, patch, field=None):
    if isinstance(patch, dict) and isinstance(base, dict):
        directive = patch.get("$patch")
        if directive == "replace":
            return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
        if directive == "delete":
            return None
        out = copy.deepcopy(base)
        for k, v in patch.items():
            if k == "$patch":
                continue
            if v is None:
                out.pop(k, None)
            elif k in out:
                merged = strategic_merge(out[k], v, k)
                if merged is None:
                    out.pop(k)
                else:
                    out[k] = merged
            else:
                out[k] = _strip_directives(copy.deepcopy(v))
        return out
    if isinstance(patch, list) and isinstance(base, list):
        key = _merge_key(field, base + patch)
        if key is None:
            return _strip_directives(copy.deepcopy(patch))
        # As kustomize (kyaml) orders them: the patch's items first, in the
        # patch's order (merged into the originals they name), then the
        # originals no patch item names.
        out, named = [], set()
        for item in patch:
            if not isinstance(item, dict) or key not in item:
                raise KustomizeError("list %s: patch item without merge key %s" % (field, key))
            named.add(item[key])
            orig = next((b for b in base if isinstance(b, dict) and b.get(key) == item[key]), None)
            if item.get("$patch") == "delete":
                continue
            out.append(_strip_directives(copy.deepcopy(item)) if orig is None else strategic_merge(orig, item, None))
        out.extend(copy.deepcopy(b) for b in base if not (isinstance(b, dict) and b.get(key) in named))
        return out
    return _strip_directives(copy.deepcopy(patch))


def _strip_directives(v):
    if isinstance(v, dict):
        return {k: _strip_directives(x) for k, x in v.items() if k != "$patch"}
    if isinstance(v, list):
        return [_strip_directives(x) for x in v]
    return v


# --------------------------------------------------------------------------
# RFC 6902 JSON patch

def _pointer(path):
    if not path.startswith("/"):
        raise KustomizeError("JSON patch path must start with /: %r" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts):
    cur = doc
    for p in parts:
        if isinstance(cur, list):
            cur = cur[int(p)]
        elif isinstance(cur, dict):
            if p not in cur:
                raise KustomizeError("JSON patch: no %r" % p)
            cur = cur[p]
        else:
            raise KustomizeError("JSON patch: cannot descend into %r" % (cur,))
    return cur


def json_patch(doc, ops):
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = _pointer(op["path"])
        parent = _walk(doc, parts[:-1])
        last = parts[-1]
        kind = op["op"]
        if kind == "add":
            if isinstance(parent, list):
                if last == "-":
                    parent.append(copy.deepcopy(op["value"]))
                else:
                    parent.insert(int(last), copy.deepcopy(op["value"]))
            else:
                parent[last] = copy.deepcopy(op["value"])
        elif kind == "replace":
            if isinstance(parent, list):
                parent[int(last)] = copy.deepcopy(op["value"])
            else:
                if last not in parent:
                    raise KustomizeError("JSON patch replace: no %s" % op["path"])
                parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            if isinstance(parent, list):
                parent.pop(int(last))
            else:
                if last not in parent:
                    raise KustomizeError("JSON patch remove: no %s" % op["path"])
                del parent[last]
        elif kind == "test":
            if _walk(doc, parts) != op["value"]:
                raise KustomizeError("JSON patch test failed at %s" % op["path"])
        else:
            raise KustomizeError("JSON patch op %r not supported" % kind)
    return doc


# --------------------------------------------------------------------------
# Transformers

def _matches(obj, target):
    md = obj.get("metadata", {})
    if "kind" in target and obj.get("kind") != target["kind"]:
        return False
    if "name" in target and md.get("name") != target["name"]:
        return False
    if "namespace" in target and md.get("namespace") != target["namespace"]:
        return False
    if "version" in target and obj.get("apiVersion", "").split("/")[-1] != target["version"]:
        return False
    if "group" in target:
        api = obj.get("apiVersion", "")
        group = api.split("/")[0] if "/" in api else ""
        if group != target["group"]:
            return False
    for field in ("labelSelector", "annotationSelector"):
        if field in target:
            raise KustomizeError("patch target %s not supported" % field)
    return True


def _apply_patch(objects, patch_docs, target, where):
    if len(patch_docs) == 1 and isinstance(patch_docs[0], list):  # RFC 6902
        if not target:
            raise KustomizeError("%s: a JSON patch needs a target" % where)
        hits = [i for i, o in enumerate(objects) if _matches(o, target)]
        if not hits:
            raise KustomizeError("%s: target %s matches nothing" % (where, target))
        for i in hits:
            objects[i] = json_patch(objects[i], patch_docs[0])
        return
    for patch in patch_docs:
        if target:
            hits = [i for i, o in enumerate(objects) if _matches(o, target)]
        else:
            md = patch.get("metadata", {})
            t = {"kind": patch.get("kind"), "name": md.get("name")}
            if md.get("namespace"):
                t["namespace"] = md["namespace"]
            hits = [i for i, o in enumerate(objects) if _matches(o, t)]
        if not hits:
            raise KustomizeError("%s: patch for %s %s matches nothing" %
                                 (where, patch.get("kind"), patch.get("metadata", {}).get("name")))
        for i in hits:
            merged = strategic_merge(objects[i], patch)
            # A patch never renames or re-kinds its target.
            merged["metadata"]["name"] = objects[i]["metadata"]["name"]
            if "namespace" in objects[i].get("metadata", {}):
                merged["metadata"]["namespace"] = objects[i]["metadata"]["namespace"]
            objects[i] = merged


def _pod_specs(obj):
    spec = obj.get("spec", {})
    if obj.get("kind") == "Pod":
        yield spec
    if "template" in spec:
        yield spec["template"].get("spec", {})
    if "jobTemplate" in spec:
        yield spec["jobTemplate"].get("spec", {}).get("template", {}).get("spec", {})


def _split_image(image):
    digest = None
    if "@" in image:
        image, digest = image.split("@", 1)
    name, tag = image, None
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        name, tag = image[:colon], image[colon + 1:]
    return name, tag, digest


def _apply_images(objects, images):
    for obj in objects:
        for pod in _pod_specs(obj):
            for field in ("containers", "initContainers"):
                for c in pod.get(field, []) or []:
                    name, tag, digest = _split_image(c.get("image", ""))
                    for img in images:
                        if img["name"] != name:
                            continue
                        new_name = img.get("newName", name)
                        if "digest" in img:
                            c["image"] = "%s@%s" % (new_name, img["digest"])
                        elif "newTag" in img:
                            c["image"] = "%s:%s" % (new_name, img["newTag"])
                        elif digest:
                            c["image"] = "%s@%s" % (new_name, digest)
                        elif tag:
                            c["image"] = "%s:%s" % (new_name, tag)
                        else:
                            c["image"] = new_name


def _apply_namespace(objects, namespace):
    for obj in objects:
        if obj.get("kind") not in CLUSTER_KINDS:
            obj.setdefault("metadata", {})["namespace"] = namespace


# --------------------------------------------------------------------------

def _read_patch(folder, entry):
    if isinstance(entry, str):
        return load_yaml_docs(os.path.join(folder, entry)), None, entry
    if "patch" in entry:
        docs = [d for d in yaml.safe_load_all(entry["patch"]) if d is not None]
        return docs, entry.get("target"), "inline patch"
    return load_yaml_docs(os.path.join(folder, entry["path"])), entry.get("target"), entry["path"]


def _check_inside(root, path):
    """Kustomize's default load restriction: files stay under the root."""
    if not os.path.realpath(path).startswith(os.path.realpath(root) + os.sep):
        raise KustomizeError("%s is outside %s (kustomize refuses it)" % (path, root))


def build(folder, expect_kind="Kustomization", objects=None):
    folder = os.path.abspath(folder)
    kfile = _kustomization_file(folder)
    with open(kfile) as f:
        k = yaml.safe_load(f) or {}
    kind = k.get("kind", "Kustomization")
    if kind != expect_kind:
        raise KustomizeError("%s: kind %s, expected %s" % (kfile, kind, expect_kind))
    unknown = set(k) - SUPPORTED_FIELDS
    if unknown:
        raise KustomizeError("%s: fields not supported by kustomize_lite: %s" % (kfile, sorted(unknown)))

    # A Component works on what its parent has accumulated so far.
    objects = objects if objects is not None else []
    for res in k.get("resources", []) or []:
        path = os.path.join(folder, res)
        if os.path.isdir(path):
            objects.extend(build(path))
        else:
            _check_inside(folder, path)
            objects.extend(load_yaml_docs(path))
    for comp in k.get("components", []) or []:
        objects = build(os.path.join(folder, comp), expect_kind="Component", objects=objects)
    seen = {}
    for o in objects:
        if _key(o) in seen:
            raise KustomizeError("%s: duplicate object %s" % (kfile, _key(o)))
        seen[_key(o)] = True

    for entry in k.get("patchesStrategicMerge", []) or []:
        docs, _, where = _read_patch(folder, entry)
        _apply_patch(objects, docs, None, where)
    for entry in k.get("patches", []) or []:
        if isinstance(entry, dict) and "path" in entry:
            _check_inside(folder, os.path.join(folder, entry["path"]))
        docs, target, where = _read_patch(folder, entry)
        _apply_patch(objects, docs, target, where)
    if k.get("namespace"):
        _apply_namespace(objects, k["namespace"])
    if k.get("images"):
        _apply_images(objects, k["images"])
    return objects


def render(folder):
    """The objects `kubectl kustomize FOLDER` would print."""
    return build(folder)
