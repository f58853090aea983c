"""The soak test's final table and JSON (bench/soak.py)."""

import json

from soak_processes import LEAK_GAUGES, pct


def report(soak, leaks, still_busy):
    a, st = soak.args, soak.stats
    exp, unexp = soak.error_counts()
    limit_kb = a.max_rss_growth_mb * 1024
    rows = []
    for name in ("target", "draft", "coordinator"):
        svc = soak.services[name]
        inc = svc.current
        base = inc.rss_base_kb
        note = ""
        if base is None:
            base, note = inc.rss_first_kb, " (no warm-up sample: first sample)"
        growth = (inc.rss_end_kb - base) if (inc.rss_end_kb is not None and base is not None) else None
        rows.append((name, inc, base, growth, note))
        if growth is not None and growth > limit_kb:
            soak.fail("rss", "%s grew %.1f MB since %s (limit %d MB)" % (
                name, growth / 1024.0, "its warm-up" if not note else "its first sample", a.max_rss_growth_mb))
        if growth is None:
            soak.fail("rss", "%s: no RSS measurement" % name)
    for name in ("target", "draft"):
        vals = leaks.get(name, {})
        if "error" in vals:
            soak.fail("leak", "%s /metrics: %s" % (name, vals["error"]))
            continue
        for g in LEAK_GAUGES:
            v = vals.get(g)
            if v is None:
                soak.fail("leak", "%s exports no %s" % (name, g))
            elif v != 0:
                soak.fail("leak", "%s: %s = %g after %.0f s idle wait" % (name, g, v, a.idle_wait))
    if st.mismatches:
        soak.fail("mismatch", "%d completed answers differ from the solo output" % len(st.mismatches))
    if unexp:
        soak.fail("error", "%d unexpected errors" % unexp)
    if st.client_exceptions:
        soak.fail("client", "%d exceptions in client threads, first: %s" % (len(st.client_exceptions),
                                                                            st.client_exceptions[0]))
    if st.ok == 0:
        soak.fail("no-progress", "no request completed")

    lat, ttft = st.latencies, st.ttfts
    toks_per_s = st.completed_tokens / max(1e-9, soak.load_seconds)
    dr = soak.draft_recoveries()
    tr = soak.target_recovery()
    for i, r in enumerate(dr):
        if r is None:
            soak.warnings.append("draft restart %d: the coordinator never drafted with the model again" % (i + 1))
    fmt_rec = lambda v: "never" if v is None else "%.1f s" % v  # noqa: E731

    def fmt_recs(vals):
        if len(vals) <= 4 or None in vals:
            return ", ".join(fmt_rec(v) for v in vals) or "-"
        return "%d restarts, %.1f..%.1f s" % (len(vals), min(vals), max(vals))

    lines = []
    lines.append("")
    lines.append("soak: %.0f s, %d clients, cancel %.0f%%, draft restarts %d (every %g s), target restarts %d "
                 "(at %g s), %d prompts" % (soak.load_seconds, a.clients, a.cancel_fraction * 100,
                                            soak.services["draft"].restarts, a.draft_restart_every,
                                            soak.services["target"].restarts, a.target_restart_at,
                                            len(soak.prompts)))
    lines.append("+----------------------------------------------+----------------------------+")
    def row(k, v):  # noqa: E306
        lines.append("| %-44s | %26s |" % (k, v))
    row("requests completed, equal to solo", st.ok)
    row("requests cancelled after first delta", st.cancelled)
    row("expected errors (target restart)", exp)
    row("unexpected errors", unexp)
    row("mismatches (vs solo output)", len(st.mismatches))
    row("tokens/s (completed requests)", "%.0f" % toks_per_s)
    row("latency p50 / p99 (completed)", "%.3f / %.3f s" % (pct(lat, 0.5), pct(lat, 0.99)))
    row("first token p50 / p99", "%.3f / %.3f s" % (pct(ttft, 0.5), pct(ttft, 0.99)))
    row("target recovery (ready -> first ok)", fmt_rec(tr))
    row("draft recovery (ready -> model drafts)", fmt_recs(dr))
    row("peak open sessions seen: target / draft", "%s / %s" % (soak.peak_sessions.get("target", "-"),
                                                              soak.peak_sessions.get("draft", "-")))
    for name in ("target", "draft"):
        vals = leaks.get(name, {})
        if "error" in vals:
            row("left open on %s" % name, "metrics error")
            continue
        def show(g):  # noqa: E306
            v = vals.get(g)
            if v is None:
                return "?"
            return ("%g" % v) + ("*" if vals.get(g + "_absent") else "")
        row("left open on %s: sessions/kv used/resv" % name,
            "%s / %s / %s" % (show("specserve_active_sessions"), show("specserve_kv_blocks_used"),
                              show("specserve_kv_blocks_reserved")))
    lines.append("+----------------------------------------------+----------------------------+")
    lines.append("%-12s %8s %9s %9s %8s %8s %9s %9s" % ("process", "pid", "started*", "restarts", "rss base",
                                                        "rss end", "rss peak", "growth"))
    for name, inc, base, growth, note in rows:
        mb = lambda kb: "-" if kb is None else "%.1fM" % (kb / 1024.0)  # noqa: E731
        lines.append("%-12s %8d %+8.1fs %9d %8s %8s %9s %9s%s" % (
            name, inc.pid, inc.started - soak.load_start, soak.services[name].restarts, mb(base), mb(inc.rss_end_kb),
            mb(inc.rss_peak_kb), ("%+.1fM" % (growth / 1024.0)) if growth is not None else "-", note))
    codes = {}
    lines.append("(* seconds since the load started: the last start of each process)")
    for e in st.errors:
        key = ("expected " if soak.is_expected_error(e) else "UNEXPECTED ") + e[2]
        codes[key] = codes.get(key, 0) + 1
    if codes:
        lines.append("errors by status: " + ", ".join("%s %d" % kv for kv in sorted(codes.items())))
    shown = 0
    for e in st.errors:
        if not soak.is_expected_error(e) and shown < 10:
            lines.append("  unexpected: t=%.2f..%.2f %s (%s): %s" % (e[0], e[1], e[2], e[4], e[3]))
            shown += 1
    for m in st.mismatches[:10]:
        lines.append("  mismatch: %s" % json.dumps(m, default=str))
    for w in soak.warnings:
        lines.append("WARNING: " + w)
    if still_busy:
        lines.append("(the services were still busy when the idle wait of %.0f s ran out)" % a.idle_wait)
    verdict = "PASS" if not soak.failures else "FAIL: " + "; ".join("%s: %s" % f for f in soak.failures)
    lines.append("RESULT: " + verdict)
    print("\n".join(lines), flush=True)

    if a.json:
        out = {
            "duration_s": soak.load_seconds, "clients": a.clients, "cancel_fraction": a.cancel_fraction,
            "ok": st.ok, "cancelled": st.cancelled, "expected_errors": exp, "unexpected_errors": unexp,
            "mismatches": st.mismatches, "tokens_per_second": toks_per_s,
            "latency_p50_s": pct(lat, 0.5), "latency_p99_s": pct(lat, 0.99),
            "ttft_p50_s": pct(ttft, 0.5), "ttft_p99_s": pct(ttft, 0.99),
            "target_recovery_s": tr, "draft_recoveries_s": dr, "peak_sessions": soak.peak_sessions,
            "errors": [{"t0": e[0], "t1": e[1], "code": e[2], "details": e[3], "style": e[4],
                        "expected": soak.is_expected_error(e)} for e in st.errors],
            "by_style": {k: {"ok": v[0], "cancelled": v[1], "errors": v[2]} for k, v in st.by_style.items()},
            "leaks": leaks,
            "processes": {name: {"pid": inc.pid, "started_s": inc.started, "restarts": soak.services[name].restarts,
                                 "rss_base_kb": base, "rss_end_kb": inc.rss_end_kb, "rss_peak_kb": inc.rss_peak_kb,
                                 "rss_growth_kb": growth} for name, inc, base, growth, _ in rows},
            "incarnations": {name: [dict(vars(i)) for i in svc.incarnations]
                             for name, svc in soak.services.items()},
            "times_relative_to": "the script's start; the load started at %.1f s" % soak.load_start,
            "failures": [{"kind": k, "what": w} for k, w in soak.failures],
            "warnings": soak.warnings, "logs": soak.logdir,
        }
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return not soak.failures
