#!/usr/bin/python3
"""torch_report.py - the table and plot of perf/compare/torch_run.sh.

  torch_report.py DIR

Reads DIR/meta.txt and DIR/logs/ (B_COLL_rK.log from torch_bench.py for
backend B, B_ddpN_rK.log for DDP steps with batch N, B_tpT_rK.log for
tensor-parallel steps on T tokens, weftc_allreduce_rK.log from weft's
all_reduce_perf) and writes DIR/results.md, titled with the torch version:
medians over the repetitions, weft's throughput over Gloo's per collective
and size, the DDP and tensor-parallel step times, and next to all_reduce
weft's C time per call and the difference, the Python-side overhead of a
call through torch. Writes DIR/allreduce.png (gnuplot) when gnuplot is
installed.
"""
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import bus_factor, human, parse_kv, parse_nccl_tests  # noqa: E402  (run.sh's report)

COLLS = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall")
TITLES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
          "broadcast": "broadcast", "alltoall": "all_to_all_single"}
LOG = re.compile(r"^(weft|gloo|weftc|nosync)_([a-z]+?)(\d*)_r(\d+)\.log$")


def collect(logdir):
    """{(series, coll): {size: [time_us per repetition]}}, and wrong results seen."""
    data, wrong = {}, []
    for name in sorted(os.listdir(logdir)):
        m = LOG.match(name)
        if not m:
            continue
        series, coll, batch = m.group(1), m.group(2), m.group(3)
        with open(os.path.join(logdir, name), errors="replace") as f:
            text = f.read()
        if series == "weftc":
            rows = [{"size": r["size"], "time_us": r["time_ip_us"], "wrong": r.get("wrong_ip", "0")}
                    for r in parse_nccl_tests(text) if "time_ip_us" in r]
        else:
            rows = [r for r in parse_kv(text) if "time_us" in r]
        key = (series, coll + batch)
        for r in rows:
            data.setdefault(key, {}).setdefault(r["size"], []).append(r["time_us"])
            if str(r.get("wrong", "0")) not in ("0", "", "N/A"):
                wrong.append("%s: size %d wrong=%s" % (name, r["size"], r["wrong"]))
    return data, wrong


def med(data, series, coll, size):
    v = data.get((series, coll), {}).get(size)
    return statistics.median(v) if v else None


def fmt_us(t):
    return "—" if t is None else "%.0f" % t if t >= 100 else "%.1f" % t


def busbw(coll, size, t_us, n=2):
    return size / (t_us * 1e-6) / 1e9 * bus_factor(coll, n)


def allreduce_table(data):
    lines = ["| size | weft µs | Gloo µs | weft GB/s | Gloo GB/s | weft / Gloo | weft in C µs | Python-side µs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for size in sorted(data.get(("weft", "allreduce"), {})):
        w, g, c = (med(data, s, "allreduce", size) for s in ("weft", "gloo", "weftc"))
        ratio = "%.1fx" % (g / w) if w and g else "—"
        over = "%.1f" % (w - c) if w is not None and c is not None else "—"
        lines.append("| %s | %s | %s | %.2f | %s | %s | %s | %s |" % (
            human(size), fmt_us(w), fmt_us(g), busbw("allreduce", size, w),
            "%.2f" % busbw("allreduce", size, g) if g else "—", ratio, fmt_us(c), over))
    return lines


def ratio_table(data):
    sizes = sorted(set().union(*(data.get(("weft", c), {}).keys() for c in COLLS)))
    lines = ["| size | " + " | ".join(TITLES[c] for c in COLLS) + " |",
             "|---|" + "---:|" * len(COLLS)]
    for size in sizes:
        cells = []
        for c in COLLS:
            w, g = med(data, "weft", c, size), med(data, "gloo", c, size)
            cells.append("%.1fx" % (g / w) if w and g else "n/a in Gloo" if w else "—")
        lines.append("| %s | %s |" % (human(size), " | ".join(cells)))
    return lines


def ddp_table(data):
    lines = ["| sequences of 64 tokens per rank | weft ms | Gloo ms | Gloo / weft | no all_reduce ms | "
             "Gloo / no all_reduce (the bound) |", "|---:|---:|---:|---:|---:|---:|"]
    for key in sorted(k for k in data if k[0] == "weft" and k[1].startswith("ddp")):
        batch = key[1][3:]
        for size in data[key]:
            w, g, c = (med(data, s, key[1], size) for s in ("weft", "gloo", "nosync"))
            lines.append("| %s | %.1f | %s | %s | %s | %s |" % (
                batch, w / 1e3, "%.1f" % (g / 1e3) if g else "—", "%.2fx" % (g / w) if g else "—",
                "%.1f" % (c / 1e3) if c else "—", "%.2fx" % (g / c) if g and c else "—"))
    return lines


def tp_table(data):
    lines = ["| tokens | weft ms | Gloo ms | Gloo / weft |", "|---:|---:|---:|---:|"]
    keys = [k for k in data if k[0] == "weft" and k[1].startswith("tp")]
    for key in sorted(keys, key=lambda k: int(k[1][2:] or 0)):
        for size in data[key]:
            w, g = (med(data, s, key[1], size) for s in ("weft", "gloo"))
            lines.append("| %s | %.1f | %s | %s |" % (
                key[1][2:], w / 1e3, "%.1f" % (g / 1e3) if g else "—", "%.2fx" % (g / w) if g else "—"))
    return lines if len(lines) > 2 else []


def torch_version(meta, logdir):
    """torch's version from meta.txt, else from a torch_bench log's header."""
    for m in meta:
        if m.startswith("torch: "):
            return m[7:].strip()
    for name in sorted(os.listdir(logdir)):
        with open(os.path.join(logdir, name), errors="replace") as f:
            m = re.search(r"^# library: torch (\S+),", f.read(), re.M)
        if m:
            return m.group(1)
    return "?"


def plot(data, path):
    series = [("weft", "weft through torch.distributed"), ("gloo", "Gloo through torch.distributed"),
              ("weftc", "weft in C (all\\_reduce\\_perf -z 2)")]
    blocks, plots = [], []
    for s, title in series:
        pts = sorted(data.get((s, "allreduce"), {}))
        if not pts:
            continue
        blocks.append("\n".join("%d %.6g" % (z, busbw("allreduce", z, med(data, s, "allreduce", z))) for z in pts))
        plots.append("'-' using 1:2 with linespoints title '%s'" % title)
    if not plots:
        return False
    sizes = sorted(data.get(("weft", "allreduce"), {}))
    xtics = "set xtics (" + ", ".join("'%s' %d" % (human(z), z) for z in sizes) + ")"
    script = "\n".join([
        "set terminal png size 900,560", "set output '%s'" % path, "set logscale x 2", "set logscale y 10",
        xtics, "set xrange [%g:%g]" % (sizes[0] / 1.5, sizes[-1] * 1.5), "set xlabel 'message size'", "set ylabel 'busbw (GB/s)'", "set key right bottom",
        "set title 'all\\_reduce, 2 ranks on one host (medians)'", "set grid",
        "plot " + ", ".join(plots)] + [b + "\ne" for b in blocks]) + "\n"
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print("torch_report.py: no plot: %s" % e, file=sys.stderr)
        return False
    return True


def main():
    if len(sys.argv) != 2:
        print("usage: torch_report.py DIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    data, wrong = collect(os.path.join(out, "logs"))
    if not data:
        print("torch_report.py: no results in %s/logs" % out, file=sys.stderr)
        return 1
    meta = open(os.path.join(out, "meta.txt")).read().strip().splitlines() if os.path.exists(
        os.path.join(out, "meta.txt")) else []
    md = ["# torch.distributed on CPUs (torch %s): backend weft against gloo, 2 ranks"
          % torch_version(meta, os.path.join(out, "logs")), ""]
    md += ["- " + m for m in meta] + [""]
    if wrong:
        md += ["**Wrong results:** " + "; ".join(wrong), ""]
    md += ["## all_reduce (float32, sum, in place; time per blocking call)", ""] + allreduce_table(data)
    md += ["", "## Throughput, weft over Gloo (Gloo's time / weft's)", ""] + ratio_table(data)
    md += ["", "## DDP training step (small transformer, median step)", ""] + ddp_table(data)
    tp = tp_table(data)
    if tp:
        md += ["", "## Tensor-parallel step (one transformer block over both ranks, DTensor; median step)", ""] + tp
    png = os.path.join(out, "allreduce.png")
    if plot(data, png):
        md += ["", "![all_reduce busbw](allreduce.png)"]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
