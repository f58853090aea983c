"""Plots serve-bench load rows (JSON from `specserve serve-bench --concurrency
... --json FILE` or bench/load_sweep.sh) with gnuplot (Debian's gnuplot-nox):
throughput, p99 inter-token latency and (where the rows have it) p99 time per
output token against concurrency, one line per drafter, as a PNG.

    python3 bench/plot_load.py rows.json plot.png [--title TEXT]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile


def series(rows):
    """{drafter label: [(concurrency, tokens/s, itl p99 ms, tpot p99 ms or None)]}, temperature 0 first."""
    out = {}
    for r in rows:
        if r["drafter"] == "none":
            label = "plain"
        elif r.get("k") is None:
            label = r["drafter"]
        else:
            label = "%s (k %s)" % (r["drafter"], r["k"])
        if r.get("temperature", 0):
            label += ", T=%g" % r["temperature"]
        out.setdefault(label, []).append(
            (r["concurrency"], r["throughput_tokens_per_s"], r["itl_p99_ms"], r.get("tpot_p99_ms")))
    return {k: sorted(v) for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rows")
    ap.add_argument("png")
    ap.add_argument("--title", default="serve-bench")
    a = ap.parse_args()
    if shutil.which("gnuplot") is None:
        sys.exit("plot_load.py: gnuplot is missing (apt-get install gnuplot-nox)")
    with open(a.rows) as f:
        rows = json.load(f)
    data = series(rows)
    if not data:
        sys.exit("plot_load.py: no rows in " + a.rows)
    # Rows from before serve-bench reported TPOT have no third panel.
    tpot = all(p[3] is not None for pts in data.values() for p in pts)
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, (label, pts) in enumerate(data.items()):
            path = os.path.join(tmp, "s%d.dat" % i)
            with open(path, "w") as f:
                for c, tput, itl, per_token in pts:
                    f.write("%d %f %f %f\n" % (c, tput, itl, per_token or 0))
            files.append((label, path))
        def plots(col):
            return ", ".join("'%s' using 1:%d with linespoints lw 2 pt 7 title '%s'" % (p, col, l.replace("'", ""))
                             for l, p in files)
        script = "\n".join([
            "set terminal %s size %d,480 noenhanced" % ("pngcairo" if "cairo" in gnuplot_terminals() else "png",
                                                        1650 if tpot else 1200),
            "set output '%s'" % a.png,
            "set multiplot layout 1,%d title '%s'" % (3 if tpot else 2, a.title.replace("'", "")),
            "set logscale x 2", "set grid", "set key top left", "set xlabel 'concurrent clients'",
            "set ylabel 'tokens/s'", "set title 'throughput'", "set yrange [0:*]",
            "plot " + plots(2),
            "set ylabel 'ms'", "set title 'p99 inter-token latency'",
            "plot " + plots(3)] + ([
            "set title 'p99 time per output token'",
            "plot " + plots(4)] if tpot else []) + [
            "unset multiplot", ""])
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print("wrote", a.png)


def gnuplot_terminals():
    r = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
    return r.stdout + r.stderr


if __name__ == "__main__":
    main()
