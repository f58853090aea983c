"""Shared by the deploy/ checks: paths, constants, the Report that collects
(and prints) failures, warnings and pending items, and find_tool for the
standard tools they run (kubectl, yamllint, promtool, prometheus)."""

import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
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
# In CI (CI=true) a missing tool fails the check; elsewhere it is a warning
# and the checks that need it do not run.
IN_CI = os.environ.get("CI", "").lower() == "true"


class Report:
    def __init__(self):
        self.errors, self.warnings, self.pending = [], [], []
        self.missing_tools = []

    def error(self, where, msg):
        self.errors.append("%s: %s" % (where, msg))
        print("  FAIL %s: %s" % (where, msg))

    def warn(self, where, msg):
        self.warnings.append("%s: %s" % (where, msg))
        print("  warn %s: %s" % (where, msg))

    def missing(self, what, package, skipped):
        msg = "not installed (apt-get install %s): %s" % (package, skipped)
        if package not in self.missing_tools:
            self.missing_tools.append(package)
        if IN_CI:
            self.error(what, msg + " (CI=true: a missing tool is a failure)")
        else:
            self.warn(what, msg)

    def note_pending(self, where, msg):
        self.pending.append("%s: %s" % (where, msg))
        print("  PENDING %s: %s" % (where, msg))

    @staticmethod
    def ok(msg):
        print("  ok   %s" % msg)


def find_tool(report, name, package, skipped):
    """The path of NAME on PATH, or None after reporting it missing."""
    path = shutil.which(name)
    if not path:
        report.missing(name, package, skipped)
    return path


def rel(path):
    return os.path.relpath(path, REPO)
