"""Check 1, lint: yamllint over deploy/ with deploy/.yamllint (syntax,
duplicate keys, indentation, trailing spaces, line length, final newline,
...), and the dashboard JSON parses without duplicate keys."""

import json
import re
import subprocess

from report import DASHBOARD, DEPLOY, REPO, find_tool, rel

# yamllint -f parsable: FILE:LINE:COL: [LEVEL] MESSAGE (RULE)
_PARSABLE = re.compile(r"^(.*?):(\d+):(\d+): \[(error|warning)\] (.*?)(?: \(([\w-]+)\))?$")


def lint(report):
    print("== lint")
    yamllint = find_tool(report, "yamllint", "yamllint", "the YAML under deploy/ was not linted")
    if yamllint:
        r = subprocess.run([yamllint, "-f", "parsable", "-c", rel(DEPLOY) + "/.yamllint", rel(DEPLOY)],
                           capture_output=True, text=True, cwd=REPO)
        problems = 0
        for line in r.stdout.splitlines():
            m = _PARSABLE.match(line)
            if m:
                problems += 1
                (report.error if m.group(4) == "error" else report.warn)(
                    "%s:%s" % (m.group(1), m.group(2)), "%s (yamllint %s)" % (m.group(5), m.group(6) or ""))
        if r.returncode != 0 and not problems:
            report.error("yamllint", "exited %d: %s" % (r.returncode, (r.stdout + r.stderr).strip()))
        elif not problems:
            report.ok("yamllint %s/: clean (%s/.yamllint)" % (rel(DEPLOY), rel(DEPLOY)))
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
