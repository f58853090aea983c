"""Check 1, lint: every YAML file under deploy/ (yamllint where installed,
and always a built-in pass: syntax, duplicate keys, tabs, trailing spaces,
line length, final newline) and the dashboard JSON."""

import json
import os
import shutil
import subprocess

import yaml

from report import DASHBOARD, DEPLOY, MAX_LINE, REPO, rel


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
