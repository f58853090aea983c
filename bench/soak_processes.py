"""The soak test's server processes: starting, killing and restarting them,
their readiness, RSS samples and /metrics (bench/soak.py)."""

import os
import shutil
import signal
import subprocess
import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from specserve_client import SpecserveClient

LEAK_GAUGES = ("specserve_active_sessions", "specserve_kv_blocks_used", "specserve_kv_blocks_reserved")


def log(msg):
    print("[soak] " + msg, flush=True)


def pct(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))]


def read_rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def scrape(port, timeout=3.0):
    """{metric name: summed value} from http://127.0.0.1:port/metrics."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=timeout) as r:
        body = r.read().decode("utf-8", "replace")
    values = {}
    for fam in text_string_to_metric_families(body):
        for sample in fam.samples:
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


class Incarnation:
    """One run of a server process: its pid, when it started and was ready,
    and its RSS after warm-up, at its peak and at the end."""

    def __init__(self, pid, started):
        self.pid, self.started, self.ready = pid, started, None
        self.rss_base_kb = self.rss_base_at = None
        self.rss_first_kb = None  # first sample once ready (the baseline if warm-up never came)
        self.rss_peak_kb = 0
        self.rss_end_kb = None
        self.ended = None
        self.exit = None


class Service:
    def __init__(self, name, argv, addr, metrics_port, logdir, clock):
        self.name, self.argv, self.addr, self.metrics_port = name, argv, addr, metrics_port
        self.log_path = os.path.join(logdir, name + ".log")
        self.clock = clock
        self.proc = None
        self.incarnations = []
        self.restarts = 0
        # Parent death kills the servers even if this script is SIGKILLed (ctest timeout).
        self.wrapper = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []

    @property
    def current(self):
        return self.incarnations[-1] if self.incarnations else None

    def start(self):
        with open(self.log_path, "ab") as logf:
            logf.write(b"==== soak: start at t=%.1f s\n" % self.clock())
            logf.flush()
            self.proc = subprocess.Popen(self.wrapper + self.argv, stdin=subprocess.DEVNULL, stdout=logf,
                                         stderr=subprocess.STDOUT)
        self.incarnations.append(Incarnation(self.proc.pid, self.clock()))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _reap(self, how):
        inc = self.current
        inc.exit = self.proc.returncode
        inc.ended = self.clock()
        with open(self.log_path, "ab") as logf:
            logf.write(b"==== soak: %s at t=%.1f s (exit %s)\n" % (how.encode(), inc.ended, str(inc.exit).encode()))

    def kill(self):
        """SIGKILL and reap (the restarts)."""
        if self.alive():
            inc = self.current
            inc.rss_end_kb = read_rss_kb(inc.pid)
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self._reap("SIGKILL")

    def stop(self, grace=15):
        """SIGTERM, then SIGKILL after `grace` seconds (the end)."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait()
            self._reap("stopped")

    def wait_ready(self, seconds):
        """Waits until the server answers grpc.health.v1 SERVING."""
        with SpecserveClient(self.addr, round_robin=False) as c:
            c.wait_ready(seconds)
        self.current.ready = self.clock()

    def sample_rss(self, now, baseline_at):
        inc = self.current
        if inc is None or inc.ready is None or not self.alive():
            return None
        rss = read_rss_kb(inc.pid)
        if rss is None:
            return None
        if inc.rss_first_kb is None:
            inc.rss_first_kb = rss
        inc.rss_peak_kb = max(inc.rss_peak_kb, rss)
        if inc.rss_base_kb is None and now >= baseline_at:
            inc.rss_base_kb, inc.rss_base_at = rss, now
        return rss
