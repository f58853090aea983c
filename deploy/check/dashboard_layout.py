"""The Grafana dashboard's layout: the acceptance rate comes first, panel
ids are unique, panels stay on the 24-column grid without overlapping, and
every panel uses the $datasource variable."""

from queries import load_dashboard


def check_dashboard_layout(report):
    print("== dashboard layout")
    dash = load_dashboard()
    panels = dash.get("panels", [])
    if not panels:
        report.error("dashboard", "no panels")
        return
    first = min(panels, key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"]))
    exprs = " ".join(t.get("expr", "") for t in first.get("targets", []))
    if first is not panels[0] or "acceptance" not in first.get("title", "").lower() or \
            not all(m in exprs for m in ("specserve_draft_tokens_accepted_total",
                                         "specserve_draft_tokens_proposed_total")):
        report.error("dashboard", "the first panel must be the acceptance rate (accepted / proposed)")
    ids = [p.get("id") for p in panels]
    if len(set(ids)) != len(ids):
        report.error("dashboard", "panel ids repeat")
    cells = {}
    for p in panels:
        g = p["gridPos"]
        if g["x"] + g["w"] > 24:
            report.error("dashboard", "panel %r sticks out of the 24-column grid" % p.get("title"))
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    report.error("dashboard", "panels %r and %r overlap" % (cells[(x, y)], p.get("title")))
                    break
                cells[(x, y)] = p.get("title")
        if p.get("type") != "row" and (p.get("datasource") or {}).get("uid") != "${datasource}":
            report.error("dashboard", "panel %r does not use the $datasource variable" % p.get("title"))
    if not dash.get("uid"):
        report.error("dashboard", "no uid")
    report.ok("%d panels; the first is %r" % (len(panels), first.get("title")))
