#!/usr/bin/env python3
"""fit.py -- calibrates weft-plan's fitted constants on the fit set of
docs/planner.md's accuracy table and reports the error on both sets.

The table declares every published run's set (`fit`, `validation`, or
`outside` for runs the model cannot represent) before any fitting. This
script fits only the constants that name physical things and that no data
sheet or benchmark gives:

  clock    the SM clock a Hopper GPU holds under a training load, as a
           fraction of the kernel benchmarks' (--clock-sustain, Hopper rows)
  jitter   the relative spread of one GPU's step time (--jitter)
  overhead seconds per step outside the pipeline (--step-overhead)
  engine   seconds per micro-batch slot DeepSpeed's engine adds (--engine-overhead)
  gap      microseconds a kernel costs beyond its FLOPs and bytes: launch,
           prologue and tail (--kernel-gap-us)

by least squares on log(predicted / published) over the fit rows only
(Nelder-Mead inside bounds), prints each constant with its standard error
(from the Jacobian at the optimum), and the error of every row of both
sets with the constants applied. With --check it fits nothing: it runs the
table's commands as they stand (the code's defaults) and prints the same
report, which is what the table must show.

    python3 planner/fit.py                  # fit, report
    python3 planner/fit.py --check          # the code's defaults, report
    python3 planner/fit.py --write          # rewrite the table's predicted/error cells
    python3 planner/fit.py --ranks          # where a free search ranks each published layout
"""
import argparse
import json
import math
import re
import shlex
import subprocess
import sys

HOPPER = ("h100-80g", "h200", "h800")
NAMES = ("clock", "jitter", "overhead", "engine", "gap")
FLAGS = ("--clock-sustain", "--jitter", "--step-overhead", "--engine-overhead", "--kernel-gap-us")
BOUNDS = ((0.5, 1.0), (0.0, 0.1), (0.0, 5.0), (0.0, 1.0), (0.0, 50.0))
START = (0.9, 0.01, 0.1, 0.02, 5.0)


def table_rows(doc):
    """The accuracy table's rows as dicts keyed by the header's names."""
    text = open(doc, encoding="utf-8").read()
    section = text.index("\n## Accuracy against published runs")
    lines = text[section:].split("\n")
    head = next(i for i, l in enumerate(lines) if l.startswith("| run |"))
    keys = [c.strip() for c in lines[head].strip("|").split("|")]
    rows = []
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append(dict(zip(keys, cells), line=line))
    return text, rows


def backticked(cell):
    m = re.search(r"`([^`]*)`", cell)
    return m.group(1) if m else ""


def predict(binary, row, consts):
    """weft-plan's prediction of the row's metric, or None when refused."""
    args = shlex.split(backticked(row["command"]))[1:]
    if consts is not None:
        hopper = any(h in args for h in HOPPER)
        for name, flag, value in zip(NAMES, FLAGS, consts):
            if name == "clock" and not hopper:
                continue
            args += [flag, repr(value)]
    out = subprocess.run([binary] + args + ["--json", "--top", "1"], capture_output=True,
                         text=True).stdout
    layouts = json.loads(out)["layouts"]
    if not layouts:
        return None
    metric = backticked(row["metric"])
    value = layouts[0][metric]
    return value * 100 if metric.startswith("mfu") else value


def published(row):
    return float(row["published"])


def log_errors(binary, rows, consts):
    errs = []
    for row in rows:
        got = predict(binary, row, consts)
        errs.append(math.log(got / published(row)) if got else 1.0)
    return errs


def clamp(x):
    return [min(max(v, lo), hi) for v, (lo, hi) in zip(x, BOUNDS)]


def nelder_mead(f, x0, steps, iters=300):
    pts = [clamp(x0)]
    for i, s in enumerate(steps):
        p = list(x0)
        p[i] += s
        pts.append(clamp(p))
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = sorted(range(len(pts)), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if vals[-1] - vals[0] < 1e-10:
            break
        n = len(x0)
        centre = [sum(p[k] for p in pts[:-1]) / n for k in range(n)]
        refl = clamp([c + (c - w) for c, w in zip(centre, pts[-1])])
        fr = f(refl)
        if fr < vals[0]:
            exp = clamp([c + 2 * (c - w) for c, w in zip(centre, pts[-1])])
            fe = f(exp)
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = clamp([c + 0.5 * (w - c) for c, w in zip(centre, pts[-1])])
            fc = f(con)
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:
                for i in range(1, len(pts)):
                    pts[i] = clamp([b + 0.5 * (p - b) for b, p in zip(pts[0], pts[i])])
                    vals[i] = f(pts[i])
    best = min(range(len(pts)), key=lambda i: vals[i])
    return pts[best]


def invert(a):
    n = len(a)
    m = [row[:] + [float(i == j) for j in range(n)] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[p][c]) < 1e-300:
            return None
        m[c], m[p] = m[p], m[c]
        d = m[c][c]
        m[c] = [v / d for v in m[c]]
        for r in range(n):
            if r != c:
                k = m[r][c]
                m[r] = [v - k * w for v, w in zip(m[r], m[c])]
    return [row[n:] for row in m]


def standard_errors(binary, rows, x):
    """sigma^2 (J^T J)^-1 at the optimum; None for a constant the fit set
    does not determine (its column of J is zero)."""
    base = log_errors(binary, rows, x)
    cols, free = [], []
    for k in range(len(x)):
        h = max(1e-4, 0.01 * abs(x[k]))
        p = list(x)
        p[k] += h
        col = [(a - b) / h for a, b in zip(log_errors(binary, rows, p), base)]
        if any(abs(v) > 1e-9 for v in col):
            cols.append(col)
            free.append(k)
    dof = max(1, len(rows) - len(free))
    s2 = sum(e * e for e in base) / dof
    jtj = [[sum(a * b for a, b in zip(ci, cj)) for cj in cols] for ci in cols]
    inv = invert(jtj)
    se = [None] * len(x)
    if inv:
        for i, k in enumerate(free):
            se[k] = math.sqrt(max(0.0, s2 * inv[i][i]))
    return se


def report(binary, rows, consts):
    by_set = {}
    for row in rows:
        got = predict(binary, row, consts)
        err = 100 * (got / published(row) - 1) if got else None
        row["got"], row["err"] = got, err
        by_set.setdefault(row["set"], []).append(row)
        shown = "refused" if got is None else f"{got:.4g} ({err:+.1f} %)"
        print(f"  {row['set']:<10} {row['run']:<40} published {row['published']:>8}  predicted {shown}")
    for name, members in by_set.items():
        errs = [abs(r["err"]) for r in members if r["err"] is not None]
        if errs:
            rms = math.sqrt(sum(e * e for e in errs) / len(errs))
            print(f"  {name}: {len(errs)} rows, mean |error| {sum(errs) / len(errs):.1f} %, "
                  f"RMS {rms:.1f} %, max {max(errs):.1f} %")


def write_table(doc, text, rows):
    for row in rows:
        cells = [c for c in row["line"].strip("|").split("|")]
        keys = list(row.keys())
        ip, ie = keys.index("predicted"), keys.index("error")
        if row["got"] is None:
            continue
        shown = f"{row['got']:.0f}" if row["got"] >= 1000 else f"{row['got']:.1f}"
        cells[ip] = f" {shown} "
        cells[ie] = f" {100 * (float(shown) / published(row) - 1):+.1f} % "
        text = text.replace(row["line"], "|" + "|".join(cells) + "|")
    open(doc, "w", encoding="utf-8").write(text)


def published_ranks(binary, rows):
    """Where a free search (the layout flags lifted, the run's other
    settings kept) ranks each row's published tp x cp x pp (x ep)."""
    for row in rows:
        args, want, i = shlex.split(backticked(row["command"]))[1:], {}, 0
        kept = []
        while i < len(args):
            if args[i] in ("--tp", "--cp", "--pp", "--ep"):
                want[args[i][2:]] = int(args[i + 1])
                i += 2
                continue
            kept.append(args[i])
            i += 1
        out = subprocess.run([binary] + kept + ["--json", "--top", "0"], capture_output=True,
                             text=True).stdout
        layouts = json.loads(out)["layouts"]
        rank = next((k + 1 for k, l in enumerate(layouts)
                     if all(l[d] == v for d, v in want.items())), None)
        print(f"  {row['run']:<40} {'x'.join(str(v) for v in want.values()):<12} "
              f"rank {rank} of {len(layouts)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", default="build/bin/weft-plan")
    ap.add_argument("--doc", default="docs/planner.md")
    ap.add_argument("--check", action="store_true", help="no fit: the code's defaults")
    ap.add_argument("--write", action="store_true", help="rewrite predicted/error (implies --check)")
    ap.add_argument("--ranks", action="store_true", help="where the search ranks each published layout")
    a = ap.parse_args()
    text, rows = table_rows(a.doc)
    if a.ranks:
        published_ranks(a.plan, rows)
        return 0
    if a.check or a.write:
        report(a.plan, rows, None)
        if a.write:
            write_table(a.doc, text, rows)
        return 0
    fit = [r for r in rows if r["set"] == "fit"]

    def cost(x):
        return sum(e * e for e in log_errors(a.plan, fit, x))

    x = nelder_mead(cost, list(START), [0.05, 0.01, 0.1, 0.02, 5.0])
    x = nelder_mead(cost, x, [0.02, 0.005, 0.05, 0.01, 2.0])
    se = standard_errors(a.plan, fit, x)
    print(f"fit on {len(fit)} rows: RMS log error {math.sqrt(cost(x) / len(fit)):.4f}")
    for name, flag, v, s in zip(NAMES, FLAGS, x, se):
        print(f"  {name:<9} {flag:<18} {v:.4g}" + (f" +- {s:.2g}" if s is not None else
                                                      " (not determined by the fit set)"))
    report(a.plan, rows, x)
    return 0


if __name__ == "__main__":
    sys.exit(main())
