#!/usr/bin/env python3
"""Soak test: many clients against the three real servers while the draft and
the target are killed and restarted.

Starts specserve-target, specserve-draft and specserve-coordinator on free
loopback ports with the bundled models, computes the solo (one request at a
time) greedy output of every prompt, then runs --clients threads in a closed
loop for --duration seconds. Each request is greedy with a random max_tokens
(32..96) and drafter / K; --cancel-fraction of them are cancelled after their
first delta. Every completed answer must equal the solo output, token for
token. Meanwhile the draft is SIGKILLed and restarted on the same port every
--draft-restart-every seconds and the target once at --target-restart-at
(requests failing with UNAVAILABLE while the target is away are expected
errors). At the end, once the services are idle, /metrics of the target and
the draft must show no open session and no used or reserved KV block, and no
process may have grown its RSS by more than --max-rss-growth-mb since its
warm-up (restarted processes: since their last start). Prints a table; exits
1 on any mismatch, unexpected error, crash, hang, leak or RSS growth over the
limit (2 on a setup failure).

    /usr/bin/python3 bench/soak.py                        # 10 minutes, 32 clients
    /usr/bin/python3 bench/soak.py --duration 40 --clients 8 \\
        --draft-restart-every 15 --target-restart-at 25    # what CI runs

Needs Debian's python3-grpcio, python3-protobuf and protoc (for the client's
generated messages), and python3-prometheus-client to read /metrics.
"""

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
sys.path.insert(0, os.path.join(REPO, "tools"))

import grpc  # noqa: E402
from specserve_client import SpecserveClient  # noqa: E402
from free_ports import free_ports  # noqa: E402
from soak_processes import LEAK_GAUGES, Service, log, read_rss_kb, scrape  # noqa: E402
from soak_report import report  # noqa: E402
from soak_workload import EXTRA_PROMPTS, SOLO_MAX_TOKENS, STYLES, Stats  # noqa: E402

class Soak:
    def __init__(self, args):
        self.args = args
        self.t0 = time.monotonic()
        self.rng = random.Random(args.seed)
        self.stats = Stats()
        self.stop_load = threading.Event()
        self.failures = []  # (kind, text)
        self.warnings = []
        self.target_window = None  # [kill time, ready time] of the target restart
        self.draft_restart_ready = []  # ready times of the restarted drafts
        self.services = {}
        self.prompts = []
        self.solo = []  # per prompt: dict(ids, text, finish)
        self.peak_sessions = {}  # open sessions seen in the progress scrapes

    def clock(self):
        return time.monotonic() - self.t0

    def fail(self, kind, text):
        self.failures.append((kind, text))
        log("FAILURE (%s): %s" % (kind, text))

    # ------------------------------------------------------------------ setup

    def load_prompts(self):
        prompts = []
        path = self.args.prompts_file
        if path and os.path.exists(path):
            with open(path) as f:
                for line in f:
                    line = line.strip()
                    if line:
                        prompts.append(json.loads(line)["prompt"])
        for p in EXTRA_PROMPTS:
            if p not in prompts:
                prompts.append(p)
        self.prompts = prompts[: self.args.prompts]

    def start_services(self):
        a = self.args
        binp = os.path.abspath(a.bin)
        models = os.path.abspath(a.models)
        for b in ("specserve-target", "specserve-draft", "specserve-coordinator"):
            if not os.access(os.path.join(binp, b), os.X_OK):
                raise RuntimeError("%s/%s is missing (build first or pass --bin)" % (binp, b))
        if a.copy_bin:
            # The restarts run the binaries again: a rebuild meanwhile must not
            # swap them (or catch them half written).
            snap = os.path.join(self.logdir, "bin")
            os.makedirs(snap, exist_ok=True)
            for b in ("specserve-target", "specserve-draft", "specserve-coordinator"):
                shutil.copy2(os.path.join(binp, b), os.path.join(snap, b))
            binp = snap
        tp, dp, cp, tm, dm, cm = free_ports(6)
        idle = ["--session-idle-timeout-s", str(a.session_idle_timeout_s)]
        threads = ["--threads", str(a.threads)] if a.threads else []
        spec = {
            "target": ([os.path.join(binp, "specserve-target"), "--listen", "127.0.0.1:%d" % tp,
                        "--model", os.path.join(models, a.target_model), "--metrics-port", str(tm)] + idle + threads,
                       tp, tm),
            "draft": ([os.path.join(binp, "specserve-draft"), "--listen", "127.0.0.1:%d" % dp,
                       "--model", os.path.join(models, a.draft_model), "--metrics-port", str(dm)] + idle + threads,
                      dp, dm),
            "coordinator": ([os.path.join(binp, "specserve-coordinator"), "--listen", "127.0.0.1:%d" % cp,
                             "--target", "127.0.0.1:%d" % tp, "--draft", "127.0.0.1:%d" % dp,
                             "--metrics-port", str(cm)] + a.coordinator_arg, cp, cm),
        }
        for name in ("target", "draft", "coordinator"):
            argv, port, mport = spec[name]
            self.services[name] = Service(name, argv, "127.0.0.1:%d" % port, mport, self.logdir, self.clock)
        for name in ("target", "draft", "coordinator"):
            self.services[name].start()
        for name in ("target", "draft", "coordinator"):
            self.services[name].wait_ready(90)
        # The coordinator serves before it has reached the draft (n-gram
        # drafting meanwhile): wait until it names the draft model.
        with SpecserveClient(self.services["coordinator"].addr) as c:
            give_up = time.monotonic() + 60
            while True:
                try:
                    if c.model_info(timeout=2).draft_model:
                        break
                except grpc.RpcError:
                    pass
                if time.monotonic() > give_up:
                    raise RuntimeError("the coordinator never reached the draft")
                time.sleep(0.2)
        log("servers up: coordinator %s, target %s, draft %s (logs in %s)" % (
            self.services["coordinator"].addr, self.services["target"].addr, self.services["draft"].addr,
            self.logdir))

    def binary_exports(self, name, metric):
        path = self.services[name].argv[0]
        try:
            with open(path, "rb") as f:
                return metric.encode() in f.read()
        except OSError:
            return True

    # ------------------------------------------------------------- requests

    def run_one(self, client, prompt, max_tokens, kw, cancel_after_first=False, cancel_delay=0.0,
                timeout=None):
        """One streamed request. Returns a dict: outcome ('ok', 'cancelled',
        'error'), ids, text, finish, stats, code, details, t0, t1, ttft."""
        r = {"ids": [], "text": "", "finish": None, "stats": None, "code": None, "details": None,
             "ttft": None, "t0": self.clock()}
        cancelled = False
        call = client.generate(prompt, timeout=timeout or self.args.request_timeout, max_tokens=max_tokens,
                               temperature=0.0, **kw)
        try:
            for ev in call:
                kind = ev.WhichOneof("event")
                if kind == "delta":
                    if r["ttft"] is None:
                        r["ttft"] = self.clock() - r["t0"]
                    r["ids"].extend(ev.delta.token_ids)
                    r["text"] += ev.delta.text
                    if cancel_after_first and not cancelled:
                        if cancel_delay > 0:
                            time.sleep(cancel_delay)
                        cancelled = True
                        call.cancel()
                elif kind == "final":
                    r["finish"] = ev.final.finish_reason
                    r["stats"] = ev.final.stats
            r["outcome"] = "ok" if r["finish"] is not None else "error"
            if r["finish"] is None:
                r["code"], r["details"] = "NO_FINAL", "the stream ended without a Final message"
        except grpc.RpcError as e:
            code = e.code()
            if cancelled and code == grpc.StatusCode.CANCELLED:
                r["outcome"] = "cancelled"
            else:
                r["outcome"] = "error"
                r["code"] = code.name if code is not None else "UNKNOWN"
                r["details"] = e.details()
        r["t1"] = self.clock()
        return r

    def expected(self, prompt_idx, max_tokens):
        """The ids, finish reasons and text a completed greedy answer must have."""
        solo = self.solo[prompt_idx]
        ids = solo["ids"]
        if max_tokens < len(ids):
            return ids[:max_tokens], ("length",), False
        if max_tokens == len(ids):
            return ids, ("length", solo["finish"]), True
        return ids, (solo["finish"],), True

    def check_answer(self, prompt_idx, max_tokens, r):
        """None, or what is wrong with a completed answer."""
        want_ids, finishes, whole = self.expected(prompt_idx, max_tokens)
        solo = self.solo[prompt_idx]
        if r["ids"] != want_ids:
            n = min(len(r["ids"]), len(want_ids))
            first = next((i for i in range(n) if r["ids"][i] != want_ids[i]), n)
            return "token ids differ at %d (got %d tokens, want %d): got %s want %s" % (
                first, len(r["ids"]), len(want_ids), r["ids"][first:first + 8], want_ids[first:first + 8])
        if r["finish"] not in finishes:
            return "finish_reason %r, want %s" % (r["finish"], "/".join(finishes))
        if whole and r["text"] != solo["text"]:
            return "text differs from the solo text: %r vs %r" % (r["text"][:80], solo["text"][:80])
        if not whole and not solo["text"].startswith(r["text"]):
            return "text is not a prefix of the solo text: %r" % r["text"][:80]
        return None

    def compute_solo(self):
        """The reference: each prompt alone, greedy, SOLO_MAX_TOKENS; plain
        decoding (drafter none) must give the same."""
        with SpecserveClient(self.services["coordinator"].addr) as c:
            for i, p in enumerate(self.prompts):
                r = self.run_one(c, p, SOLO_MAX_TOKENS, {}, timeout=120)
                if r["outcome"] != "ok":
                    raise RuntimeError("solo request %d failed: %s %s" % (i, r["code"], r["details"]))
                self.solo.append({"ids": r["ids"], "text": r["text"], "finish": r["finish"]})
                plain = self.run_one(c, p, SOLO_MAX_TOKENS, {"drafter": "none"}, timeout=120)
                if plain["outcome"] != "ok":
                    raise RuntimeError("solo request %d (drafter none) failed: %s %s" % (i, plain["code"],
                                                                                        plain["details"]))
                if plain["ids"] != r["ids"]:
                    self.stats.mismatches.append({"phase": "solo", "prompt": i, "max_tokens": SOLO_MAX_TOKENS,
                                                  "style": "none vs default",
                                                  "what": "plain greedy %s != speculative %s" % (
                                                      plain["ids"][:16], r["ids"][:16])})
                    self.fail("mismatch", "prompt %d: plain greedy differs from speculative greedy" % i)
        lens = [len(s["ids"]) for s in self.solo]
        log("solo outputs of %d prompts: %d..%d tokens" % (len(self.solo), min(lens), max(lens)))

    def client_loop(self, idx):
        a = self.args
        rng = random.Random((a.seed or 0) * 1000 + idx)
        st = self.stats
        with SpecserveClient(self.services["coordinator"].addr) as client:
            while not self.stop_load.is_set():
                p = rng.randrange(len(self.prompts))
                mt = rng.randint(a.min_tokens, a.max_tokens)
                label, kw = rng.choice(STYLES)
                if kw is None:
                    kw = {"drafter": "model", "k": rng.randint(1, 8)}
                cancel = rng.random() < a.cancel_fraction
                try:
                    r = self.run_one(client, self.prompts[p], mt, kw, cancel_after_first=cancel,
                                     cancel_delay=rng.choice((0.0, 0.0, 0.005, 0.02)))
                except Exception as e:  # a bug in this script or the client: counts as a failure
                    with st.lock:
                        st.client_exceptions.append("%s: %r" % (type(e).__name__, e))
                    time.sleep(0.5)
                    continue
                with st.lock:
                    st.streamed_tokens += len(r["ids"])
                    bs = st.by_style.setdefault(label, [0, 0, 0])
                    if r["outcome"] == "cancelled":
                        st.cancelled += 1
                        bs[1] += 1
                    elif r["outcome"] == "error":
                        st.errors.append((r["t0"], r["t1"], r["code"], r["details"], label))
                        bs[2] += 1
                    else:
                        bad = self.check_answer(p, mt, r)
                        if bad:
                            st.mismatches.append({"phase": "load", "t": round(r["t0"], 2), "prompt": p,
                                                  "max_tokens": mt, "style": label, "kw": kw, "what": bad,
                                                  "drafter_used": r["stats"].drafter,
                                                  "fallbacks": r["stats"].fallbacks})
                        else:
                            st.ok += 1
                            bs[0] += 1
                        st.completed_tokens += len(r["ids"])
                        st.latencies.append(r["t1"] - r["t0"])
                        if r["ttft"] is not None:
                            st.ttfts.append(r["ttft"])
                        st.completed.append((r["t0"], r["t1"], label, r["stats"].drafter, r["stats"].fallbacks))
                if r["outcome"] == "error":
                    time.sleep(rng.uniform(0.05, 0.25))  # no hot loop while a server is away

    # ---------------------------------------------------- error classification

    def is_expected_error(self, err):
        t0, t1, code, _, _ = err
        if code != "UNAVAILABLE" or self.target_window is None:
            return False
        kill, ready = self.target_window
        end = (ready if ready is not None else float("inf")) + self.args.target_recovery_grace
        return t1 >= kill and t0 <= end

    def error_counts(self):
        exp = unexp = 0
        for e in self.stats.errors:
            if self.is_expected_error(e):
                exp += 1
            else:
                unexp += 1
        return exp, unexp

    # ------------------------------------------------------------- the soak

    def restart(self, name):
        svc = self.services[name]
        kill_at = self.clock()
        svc.kill()
        if name == "target":
            self.target_window = [kill_at, None]
        if self.args.restart_delay > 0:
            time.sleep(self.args.restart_delay)
        svc.start()
        svc.restarts += 1
        try:
            svc.wait_ready(60)
        except TimeoutError as e:
            self.fail("restart", "%s did not come back after SIGKILL: %s" % (name, e))
            return
        ready = svc.current.ready
        if name == "target":
            self.target_window[1] = ready
        else:
            self.draft_restart_ready.append(ready)
        ls = self.load_start
        log("%s killed at %.1f s, serving again at %.1f s (pid %d)" % (name, kill_at - ls, ready - ls,
                                                                        svc.current.pid))

    def sample_all_rss(self, load_start):
        now = self.clock()
        out = {}
        for name, svc in self.services.items():
            inc = svc.current
            base_at = max(load_start, inc.ready if inc.ready is not None else now) + self.args.warmup
            out[name] = svc.sample_rss(now, base_at)
        return out

    def check_crashes(self):
        for name, svc in self.services.items():
            if svc.proc is not None and not svc.alive():
                svc._reap("exited")
                self.fail("crash", "%s (pid %d) exited with status %s at %.1f s of load; see %s" % (
                    name, svc.current.pid, svc.current.exit, self.clock() - getattr(self, "load_start", 0.0),
                    svc.log_path))
                svc.start()
                svc.restarts += 1
                try:
                    svc.wait_ready(60)
                except TimeoutError:
                    self.fail("crash", "%s did not come back" % name)

    def progress(self, load_start, last):
        st = self.stats
        with st.lock:
            ok, canc, toks, mism = st.ok, st.cancelled, st.streamed_tokens, len(st.mismatches)
        exp, unexp = self.error_counts()
        now = self.clock()
        rate = (toks - last[1]) / max(1e-9, now - last[0])
        rss = " ".join("%s %s" % (n[0], "%.0fM" % (svc.current.rss_peak_kb / 1024.0)) for n, svc in
                       self.services.items())
        sessions = []
        for name in ("target", "draft"):
            try:
                v = scrape(self.services[name].metrics_port, timeout=1).get("specserve_active_sessions")
            except Exception:  # noqa: BLE001 - a restarting server
                v = None
            if v is not None:
                self.peak_sessions[name] = max(self.peak_sessions.get(name, 0), int(v))
            sessions.append("%s %s" % (name[0], "-" if v is None else "%d" % v))
        log("%4.0f s: ok %d, cancelled %d, expected errors %d, unexpected errors %d, mismatches %d | %.0f tok/s "
            "| sessions %s | rss peak %s | restarts draft %d target %d" % (
                now - load_start, ok, canc, exp, unexp, mism, rate, " ".join(sessions), rss,
                self.services["draft"].restarts, self.services["target"].restarts))
        return (now, toks)

    def run_load(self):
        a = self.args
        load_start = self.clock()
        self.load_start = load_start
        end = load_start + a.duration
        threads = [threading.Thread(target=self.client_loop, args=(i,), daemon=True, name="client-%d" % i)
                   for i in range(a.clients)]
        for t in threads:
            t.start()
        next_draft = load_start + a.draft_restart_every if a.draft_restart_every > 0 else float("inf")
        target_at = load_start + a.target_restart_at if a.target_restart_at > 0 else float("inf")
        target_done = False
        next_progress = load_start + a.progress_every
        last = (load_start, 0)
        while True:
            now = self.clock()
            if now >= end:
                break
            self.check_crashes()
            # No restart in the last few seconds: the end measures a settled process.
            if now >= next_draft:
                if now < end - 5:
                    self.restart("draft")
                next_draft += a.draft_restart_every
            if not target_done and now >= target_at:
                target_done = True
                if now < end - 5:
                    self.restart("target")
            self.sample_all_rss(load_start)
            if now >= next_progress:
                last = self.progress(load_start, last)
                next_progress += a.progress_every
            time.sleep(0.1)
        self.load_seconds = self.clock() - load_start
        log("load finished after %.1f s; waiting for the clients" % self.load_seconds)
        self.stop_load.set()
        give_up = time.monotonic() + a.request_timeout + 10
        for t in threads:
            t.join(max(0.1, give_up - time.monotonic()))
        hung = [t.name for t in threads if t.is_alive()]
        if hung:
            self.fail("hang", "%d client threads still inside a request %.0f s after the end: %s" % (
                len(hung), a.request_timeout + 10, ", ".join(hung[:8])))
        self.check_crashes()

    def replay_solo(self):
        """After the storm: every prompt alone again must give the solo output."""
        bad = 0
        with SpecserveClient(self.services["coordinator"].addr) as c:
            for i, p in enumerate(self.prompts):
                r = self.run_one(c, p, SOLO_MAX_TOKENS, {}, timeout=60)
                if r["outcome"] != "ok":
                    self.fail("error", "replay of prompt %d failed: %s %s" % (i, r["code"], r["details"]))
                    bad += 1
                    continue
                what = self.check_answer(i, SOLO_MAX_TOKENS, r)
                if what:
                    self.stats.mismatches.append({"phase": "replay", "prompt": i, "max_tokens": SOLO_MAX_TOKENS,
                                                  "style": "default", "what": what})
                    bad += 1
        log("replay of the %d solo prompts after the load: %s" % (len(self.prompts),
                                                                  "ok" if not bad else "%d bad" % bad))
        return bad

    def wait_idle(self):
        """Polls /metrics of target and draft until nothing is open (or the
        timeout passes); returns {service: {gauge: value or None}}."""
        give_up = time.monotonic() + self.args.idle_wait
        while True:
            out, busy = {}, False
            for name in ("target", "draft"):
                svc = self.services[name]
                try:
                    m = scrape(svc.metrics_port)
                except Exception as e:  # noqa: BLE001
                    out[name] = {"error": str(e)}
                    busy = True
                    continue
                vals = {}
                for g in LEAK_GAUGES:
                    vals[g] = m.get(g)
                    if vals[g] is None and not self.binary_exports(name, g):
                        vals[g] = 0.0
                        vals[g + "_absent"] = True
                    if vals[g] is None or vals[g] != 0:
                        busy = True
                out[name] = vals
            if not busy or time.monotonic() > give_up:
                return out, busy
            time.sleep(0.5)

    # ------------------------------------------------------------- reporting

    def draft_recoveries(self):
        """Seconds from each draft restart's ready time to the first request
        that started after it and was drafted by the model with no fallback."""
        out = []
        comp = sorted(self.stats.completed)
        for ready in self.draft_restart_ready:
            hit = next((t1 - ready for (t0, t1, label, used, fb) in comp
                        if t0 >= ready and used == "model" and fb == 0), None)
            out.append(hit)
        return out

    def target_recovery(self):
        if not self.target_window or self.target_window[1] is None:
            return None
        ready = self.target_window[1]
        return next((t1 - ready for (t0, t1, *_rest) in sorted(self.stats.completed) if t0 >= ready), None)

    # ----------------------------------------------------------------- main

    def run(self):
        a = self.args
        self.logdir = a.logs or tempfile.mkdtemp(prefix="specserve-soak-")
        os.makedirs(self.logdir, exist_ok=True)
        self.load_prompts()
        if len(self.prompts) < 1:
            raise RuntimeError("no prompts")
        try:
            self.start_services()
            self.compute_solo()
            self.run_load()
            self.replay_solo()
            leaks, busy = self.wait_idle()
            for name, svc in self.services.items():
                if svc.alive():
                    svc.current.rss_end_kb = read_rss_kb(svc.current.pid)
            return report(self, leaks, busy)
        finally:
            self.stop_load.set()
            for name in ("coordinator", "draft", "target"):
                svc = self.services.get(name)
                if svc is not None:
                    svc.stop()
            if a.copy_bin:
                shutil.rmtree(os.path.join(self.logdir, "bin"), ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--duration", type=float, default=600, help="seconds of load")
    p.add_argument("--clients", type=int, default=32, help="concurrent client threads (closed loop)")
    p.add_argument("--cancel-fraction", type=float, default=0.1, help="requests cancelled after their first delta")
    p.add_argument("--draft-restart-every", type=float, default=120, help="SIGKILL + restart the draft every S s (0: never)")
    p.add_argument("--target-restart-at", type=float, default=300, help="SIGKILL + restart the target once at S s (0: never)")
    p.add_argument("--restart-delay", type=float, default=1.0, help="seconds a killed server stays down")
    p.add_argument("--bin", default=os.path.join(REPO, "build", "bin"), help="folder with the three servers")
    p.add_argument("--no-copy-bin", dest="copy_bin", action="store_false",
                   help="run the servers from --bin itself instead of copies in the log folder")
    p.add_argument("--models", default=os.path.join(REPO, "models"))
    p.add_argument("--target-model", default="code-target-7m.gguf")
    p.add_argument("--draft-model", default="code-draft-1m.gguf")
    p.add_argument("--threads", type=int, default=0, help="--threads for target and draft (0: their default)")
    p.add_argument("--coordinator-arg", action="append", default=[], help="extra coordinator flag (repeatable)")
    p.add_argument("--prompts-file", default=os.path.join(REPO, "bench", "prompts.jsonl"))
    p.add_argument("--prompts", type=int, default=20, help="how many prompts (the file's, then built-in ones)")
    p.add_argument("--min-tokens", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--session-idle-timeout-s", type=float, default=5, help="passed to target and draft")
    p.add_argument("--request-timeout", type=float, default=90, help="deadline of each request")
    p.add_argument("--target-recovery-grace", type=float, default=20,
                   help="UNAVAILABLE up to this long after the restarted target serves is expected")
    p.add_argument("--warmup", type=float, default=10,
                   help="RSS baseline: this long after the load starts (restarted processes: after they serve)")
    p.add_argument("--max-rss-growth-mb", type=float, default=50)
    p.add_argument("--idle-wait", type=float, default=30, help="at the end, wait this long for 0 sessions/blocks")
    p.add_argument("--progress-every", type=float, default=10)
    p.add_argument("--seed", type=int, default=None, help="client randomness (default: random)")
    p.add_argument("--logs", help="folder for the server logs (default: a new temporary folder, kept)")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    if args.max_tokens > SOLO_MAX_TOKENS or args.min_tokens < 1 or args.min_tokens > args.max_tokens:
        p.error("need 1 <= --min-tokens <= --max-tokens <= %d" % SOLO_MAX_TOKENS)
    log("seed %d" % args.seed)
    soak = Soak(args)
    # SIGTERM (e.g. a test timeout) ends the run through the finally that stops the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    try:
        ok = soak.run()
    except (RuntimeError, TimeoutError, OSError) as e:
        log("setup failed: %s" % e)
        if getattr(soak, "logdir", None):
            for name in ("target", "draft", "coordinator"):
                path = os.path.join(soak.logdir, name + ".log")
                if os.path.exists(path):
                    with open(path, errors="replace") as f:
                        tail = f.read().splitlines()[-15:]
                    print("---- %s\n%s" % (path, "\n".join(tail)), file=sys.stderr)
        return 2
    log("server logs: %s" % soak.logdir)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
