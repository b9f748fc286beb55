#!/usr/bin/python3
"""report.py - parsing, medians, tables and plots for perf/compare/.

run.sh measures; this file turns what it measured into results. It has two
commands, so the report can be rebuilt from the raw data without measuring
again:

  report.py ingest --csv raw.csv --lib LIB --coll COLL [--dtype TYPE] --rep K
                   --nranks N --rc RC --log LOGFILE
      Parse one benchmark run's output (nccl-tests format for weft and
      weftplain, RESULT lines for mpi_coll_bench/torch_bench) and append one
      CSV row per size; a run that failed (RC != 0, or no rows) adds a row
      with status=failed.

  report.py report --dir build/compare
      Read DIR/raw.csv, DIR/membw.txt and DIR/meta.txt; write
      DIR/results.md and DIR/<coll>.png (DIR/<coll>_<dtype>.png for the
      datatypes other than float).

Datatypes: raw.csv's last column names the element type (weft's -d names;
a raw.csv from before the column reads as float). A float-only run gives
the report it always gave; with more types every table is per datatype and
a last section sets weft's busbw of each type against its float32 busbw at
the same size (the goal: every datatype's AllReduce >= 0.9x float32's),
and against the best MPI peer where MPI has the type.

"weft" is weft's *_perf on buffers registered as run.sh's --weft-reg says
(default -R 2, symmetric windows), "weftplain" the same program on plain
ncclMemAlloc buffers (-R 0); a run without weftplain (--no-plain, or a
raw.csv from before it) has no weftplain columns. weftplain is not a peer:
"/ best peer" is always over Open MPI, MPICH and Gloo.

Only the standard library is needed for `ingest`; `report` needs matplotlib.
"""
import argparse
import csv
import os
import re
import statistics
import sys

LIBS = ("weft", "weftplain", "openmpi", "mpich", "gloo")
WEFT_LIBS = ("weft", "weftplain")  # nccl-tests output, in-place broadcast
PEERS = ("openmpi", "mpich", "gloo")
HEADS = {"weftplain": "weft plain"}  # table headers and legend labels
COLLS = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall")
TITLES = {"allreduce": "AllReduce", "allgather": "AllGather", "reducescatter": "ReduceScatter",
          "broadcast": "Broadcast", "alltoall": "AlltoAll"}
# dtype last, so the columns before it are where they always were.
FIELDS = ("rep", "lib", "coll", "nranks", "size", "count", "time_us", "algbw", "busbw", "wrong",
          "time_ip_us", "busbw_ip", "wrong_ip", "status", "load", "busy", "note", "dtype")
MPI_PEERS = ("openmpi", "mpich")
# weft's *_perf -d names, in report order, and how the tables title them.
DTYPES = ("float", "bfloat16", "half", "double")
DTYPE_TITLES = {"float": "float32", "bfloat16": "bfloat16", "half": "float16 (half)",
                "double": "float64 (double)"}
TARGET_RANGE = (1 << 20, 256 << 20)  # the datatype goal: AllReduce from 1 MiB to 256 MiB
TARGET_RATIO = 0.9
LARGE = 64 << 20  # sizes from here on get a memory-bound fraction
SMALL = 1 << 10   # sizes up to here also get a table of times per call


# ---------------------------------------------------------------- ingest ---

def parse_nccl_tests(text):
    """Rows of an nccl-tests style report: size count type redop root
    | time algbw busbw #wrong (out-of-place) | time algbw busbw #wrong (in-place)."""
    rows = []
    for line in text.splitlines():
        tok = line.split()
        if len(tok) < 9 or line.lstrip().startswith("#") or not tok[0].isdigit():
            continue
        try:
            row = {"size": int(tok[0]), "count": int(tok[1]), "time_us": float(tok[5]),
                   "algbw": float(tok[6]), "busbw": float(tok[7]), "wrong": tok[8]}
            if len(tok) >= 13:
                row.update(time_ip_us=float(tok[9]), busbw_ip=float(tok[11]), wrong_ip=tok[12])
        except ValueError:
            continue
        rows.append(row)
    return rows


KV = re.compile(r"(\w+)=(\S+)")


def parse_kv(text):
    """RESULT / UNSUPPORTED / SKIPPED lines of mpi_coll_bench.c and torch_bench.py."""
    rows = []
    for line in text.splitlines():
        tag = line.split(" ", 1)[0]
        if tag not in ("RESULT", "UNSUPPORTED", "SKIPPED"):
            continue
        kv = dict(KV.findall(line))
        if tag == "RESULT":
            rows.append({"size": int(kv["size"]), "count": int(kv["count"]),
                         "time_us": float(kv["time_us"]), "algbw": float(kv["algbw"]),
                         "busbw": float(kv["busbw"]), "wrong": kv.get("wrong", "")})
        elif tag == "UNSUPPORTED":
            rows.append({"status": "n/a", "note": kv.get("reason", "").replace("_", " ")})
        else:
            rows.append({"size": int(kv.get("size", 0)), "status": "skipped",
                         "note": kv.get("reason", "").replace("_", " ")})
    return rows


def last_error_line(text):
    for line in reversed(text.splitlines()):
        s = line.strip()
        if s and not s.startswith("#") and not s.startswith("RESULT"):
            return s[:160]
    return ""


def cmd_ingest(a):
    try:
        with open(a.log, errors="replace") as f:
            text = f.read()
    except OSError as e:
        text = ""
        print("report.py: cannot read %s: %s" % (a.log, e), file=sys.stderr)
    rows = parse_nccl_tests(text) if a.lib in WEFT_LIBS else parse_kv(text)
    base = {"rep": a.rep, "lib": a.lib, "coll": a.coll, "nranks": a.nranks, "load": a.load,
            "busy": a.busy, "dtype": a.dtype}
    out = []
    for r in rows:
        row = dict(base, status="ok")
        row.update(r)
        # Recompute bandwidths from size and time at full precision (the
        # programs print 2-4 decimals, which is 0.00 for small sizes).
        for t_key, alg_key, bus_key in (("time_us", "algbw", "busbw"),
                                        ("time_ip_us", None, "busbw_ip")):
            t = row.get(t_key)
            if isinstance(t, float) and t > 0 and row.get("size"):
                alg = row["size"] / (t * 1e-6) / 1e9
                if alg_key:
                    row[alg_key] = "%.6g" % alg
                row[bus_key] = "%.6g" % (alg * bus_factor(a.coll, a.nranks))
        out.append(row)
    if a.rc != 0 or not rows:
        why = "timeout" if a.rc in (124, 137) else "exit %d" % a.rc
        if not rows and a.rc == 0:
            why = "no results"
        detail = last_error_line(text)
        out.append(dict(base, status="failed", note="%s: %s" % (why, detail) if detail else why))
    new = not os.path.exists(a.csv) or os.path.getsize(a.csv) == 0
    with open(a.csv, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        for row in out:
            w.writerow({k: row.get(k, "") for k in FIELDS})
    ok = sum(1 for r in out if r["status"] == "ok")
    state = ("FAILED (%s)" % a.log if any(r["status"] == "failed" for r in out) else
             "n/a" if any(r["status"] == "n/a" for r in out) else "%d sizes" % ok)
    print("  %-9s %-13s rep %s: %s" % (a.lib, a.coll, a.rep, state))
    return 0


# ---------------------------------------------------------------- report ---

def human(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


def read_meta(path):
    meta = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if ":" in line:
                    k, v = line.rstrip("\n").split(":", 1)
                    meta.append((k.strip(), v.strip()))
    return meta


def read_membw(path):
    """{(kernel, threads): best GB/s over repetitions} from membw's MEMBW
    lines, plus ("all", kernel, threads): every repetition's value."""
    bw = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.startswith("MEMBW"):
                    kv = dict(KV.findall(line))
                    key = (kv["kernel"], int(kv["threads"]))
                    v = float(kv["gbps"])
                    bw[key] = max(v, bw.get(key, 0.0))
                    bw.setdefault(("all",) + key, []).append(v)
                    bw["array_mib"] = int(kv["array_mib"])
    return bw


def traffic_bytes(coll, size, n):
    """Minimal DRAM traffic, summed over all ranks, of one out-of-place call
    whose nccl-tests size column is `size`: every input byte the result
    depends on is read once and every output byte is written once (an ideal
    single-copy algorithm that reads peers' buffers directly)."""
    if coll == "allreduce":      # read n inputs of S, write n outputs of S
        return 2 * n * size
    if coll == "allgather":      # read n inputs of S/n, write n outputs of S
        return (n + 1) * size
    if coll == "reducescatter":  # read n inputs of S, write n outputs of S/n
        return (n + 1) * size
    if coll == "broadcast":      # read the root's S, write n-1 outputs of S
        return n * size
    return 2 * n * size          # alltoall: read n inputs of S, write n outputs of S


TRAFFIC_TEXT = {
    "allreduce": "2·n·S (read n inputs of S, write n outputs of S)",
    "allgather": "(n+1)·S (read n inputs of S/n, write n outputs of S)",
    "reducescatter": "(n+1)·S (read n inputs of S, write n outputs of S/n)",
    "broadcast": "n·S (read the root's S, write n-1 outputs of S)",
    "alltoall": "2·n·S (read n inputs of S, write n outputs of S)",
}


def bus_factor(coll, n):
    return 2.0 * (n - 1) / n if coll == "allreduce" else 1.0 if coll == "broadcast" else (n - 1) / n


def load_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:  # a raw.csv from before the dtype column measured float
        r["dtype"] = r.get("dtype") or "float"
    return rows


def summarize(rows, coll, dtype="float"):
    """{lib: {size: (median busbw, median time_us, reps, wrong)}} and per-lib status."""
    vals, status = {}, {}
    for r in rows:
        if r["coll"] != coll or r["dtype"] != dtype:
            continue
        lib = r["lib"]
        if r["status"] == "ok" and r["size"] and int(r["size"]) > 0:
            d = vals.setdefault(lib, {}).setdefault(int(r["size"]), ([], [], []))
            # MPI_Bcast and torch's broadcast have one buffer: compare weft's in-place broadcast.
            ip = lib in WEFT_LIBS and coll == "broadcast" and r.get("busbw_ip") not in (None, "")
            d[0].append(float(r["busbw_ip"] if ip else r["busbw"]))
            d[1].append(float(r["time_ip_us"] if ip else r["time_us"]))
            d[2].append(r["wrong_ip"] if ip else r["wrong"])
        elif r["status"] in ("failed", "n/a"):
            status.setdefault(lib, set()).add(r["status"])
    med = {}
    for lib, by_size in vals.items():
        med[lib] = {}
        for size, (bws, times, wrongs) in by_size.items():
            bad = any(w not in ("", "0", "N/A") for w in wrongs)
            med[lib][size] = (statistics.median(bws), statistics.median(times), len(bws), bad)
    return med, status


def cell(med, status, lib, size, reps):
    v = med.get(lib, {}).get(size)
    if v is None:
        st = status.get(lib, set())
        return "n/a" if "n/a" in st else "failed" if "failed" in st else "—"
    s = "%.3g" % v[0] if v[0] < 100 else "%.0f" % v[0]
    if v[2] < reps:
        s += " (%d/%d)" % (v[2], reps)
    if v[3]:
        s += " WRONG"
    return s


def libs_in(rows):
    """LIBS less weftplain where the run has none (--no-plain, an older raw.csv)."""
    return [lib for lib in LIBS if lib != "weftplain" or any(r["lib"] == lib for r in rows)]


def coll_title(coll, dtype, multi):
    """A collective's name, with the datatype when the run had several."""
    return "%s, %s" % (TITLES[coll], DTYPE_TITLES.get(dtype, dtype)) if multi else TITLES[coll]


def table_for(coll, rows, reps, n, bw, dtype="float", multi=False):
    rows = [r for r in rows if r["dtype"] == dtype]
    med, status = summarize(rows, coll, dtype)
    sizes = sorted({s for lib in med for s in med[lib]})
    libs_present = {r["lib"] for r in rows if r["coll"] == coll}
    out = ["## %s (%d ranks)" % (coll_title(coll, dtype, multi), n), ""]
    if not libs_present:
        return out + ["not measured", ""], med, status, []
    notes = {}
    for r in rows:
        if r["coll"] == coll and r["status"] in ("failed", "n/a") and r["note"]:
            notes.setdefault((r["lib"], r["status"]), r["note"])
    libs = libs_in(rows)
    mine = [lib for lib in WEFT_LIBS if lib in libs]  # weft's columns of ratios and fractions
    short = {"weft": "weft", "weftplain": "plain"}
    heads = ([HEADS.get(lib, lib) for lib in libs] + ["%s / best peer" % short[w] for w in mine] +
             ["%s mem-bound frac" % short[w] for w in mine])
    out += ["| size | %s |" % " | ".join(heads), "|---:|%s" % ("---:|" * len(heads))]
    for size in sizes:
        cells = [cell(med, status, lib, size, reps) for lib in libs]
        peers = [med[p][size][0] for p in PEERS if size in med.get(p, {})]
        ws = [med.get(lib, {}).get(size) for lib in mine]
        ratios = ["%.2fx" % (w[0] / max(peers)) if w and peers and max(peers) > 0 else "—" for w in ws]
        fracs = ["%.2f" % (traffic_bytes(coll, size, n) / (bw * 1e9) / (w[1] * 1e-6))
                 if w and size >= LARGE and bw else "—" for w in ws]
        out.append("| %s | %s |" % (human(size), " | ".join(cells + ratios + fracs)))
    out.append("")
    for (lib, st), note in sorted(notes.items()):
        out.append("- %s %s: %s" % (lib, st, note))
    if notes:
        out.append("")
    small = [s for s in sizes if s <= SMALL]
    if small:  # busbw rounds to nothing here: the time per call is what users feel
        heads = [HEADS.get(lib, lib) for lib in libs] + ["%s / best peer" % short[w] for w in mine]
        out += ["Time per call in µs (median) up to %s; `%s / best peer` = best peer's time over %s." % (
                    human(SMALL), " / best peer`, `".join(short[w] for w in mine),
                    " and ".join("%s's" % HEADS.get(w, w) for w in mine)), "",
                "| size | %s |" % " | ".join(heads), "|---:|%s" % ("---:|" * len(heads))]
        for size in small:
            t = {lib: med.get(lib, {}).get(size) for lib in libs}
            cells = ["%.2f" % t[lib][1] if t[lib] else cell(med, status, lib, size, reps) for lib in libs]
            peers = [med[p][size][1] for p in PEERS if size in med.get(p, {})]
            ratios = ["%.2fx" % (min(peers) / t[w][1]) if t[w] and peers and t[w][1] > 0 else "—"
                      for w in mine]
            out.append("| %s | %s |" % (human(size), " | ".join(cells + ratios)))
        out.append("")
    large = [s for s in sizes if s >= LARGE]
    bound = []
    if large and bw:
        bound += ["Memory-traffic bound for sizes >= 64 MiB: traffic T = %s, bound time = T / %.2f GB/s; "
                "fraction = bound time / measured median time." % (TRAFFIC_TEXT[coll], bw), "",
                "| size | traffic T | bound time (ms) | busbw at bound | %s |" % " | ".join(
                    HEADS.get(lib, lib) for lib in libs),
                "|---:|---:|---:|---:|%s" % ("---:|" * len(libs))]
        for size in large:
            t = traffic_bytes(coll, size, n)
            bt = t / (bw * 1e9)
            fr = []
            for lib in libs:
                v = med.get(lib, {}).get(size)
                fr.append("%.2f" % (bt / (v[1] * 1e-6)) if v else cell(med, status, lib, size, reps))
            bound.append("| %s | %s | %.2f | %.2f | %s |" % (
                human(size), human(t), bt * 1e3, size * bus_factor(coll, n) / bt / 1e9, " | ".join(fr)))
        bound.append("")
    return out + bound, med, status, bound


def ratio_cell(num, den):
    """num's median busbw over den's, or "—" where either is missing."""
    if not num or not den or den[0] <= 0:
        return "—"
    return "%.2fx" % (num[0] / den[0])


def dtype_section(rows, colls, dtypes, reps, n):
    """The table "weft per datatype against weft float32" and its one-line
    summaries (the AllReduce target: every type >= 0.9x float32 from 1 MiB
    to 256 MiB): results.md lines, and the summaries alone for stdout."""
    others = [t for t in dtypes if t != "float"]
    out = ["## weft per datatype against weft float32", "",
           "For each collective, size and datatype: weft's median busbw of that datatype "
           "(GB/s), that over weft's float32 median busbw at the same size (`/ float32`, the "
           "same bytes moved; the goal: every datatype's AllReduce >= %.1fx from "
           "%s to %s), and weft over the best of Open MPI and MPICH in that datatype (`/ best "
           "MPI`; \"—\" where MPI has no such type). Float32's own columns come first." % (
               TARGET_RATIO, human(TARGET_RANGE[0]), human(TARGET_RANGE[1])), ""]
    short = []
    for coll in colls:
        meds = {t: summarize(rows, coll, t)[0] for t in dtypes}
        wf = meds.get("float", {}).get("weft", {})
        sizes = sorted({s for t in dtypes for s in meds[t].get("weft", {})})
        if not sizes:
            continue
        out += ["### %s (%d ranks)" % (TITLES[coll], n), ""]
        head = ["size"]
        for t in dtypes:
            head += (["float32", "float32 / best MPI"] if t == "float" else
                     [t, "%s / float32" % t, "%s / best MPI" % t])
        out += ["| %s |" % " | ".join(head), "|%s" % ("---:|" * len(head))]
        for size in sizes:
            cells = [human(size)]
            for t in dtypes:
                w = meds[t].get("weft", {}).get(size)
                peers = [meds[t][p][size] for p in MPI_PEERS if size in meds[t].get(p, {})]
                best = max(peers, key=lambda v: v[0]) if peers else None
                bw_cell = "—" if not w else ("%.3g" % w[0] if w[0] < 100 else "%.0f" % w[0])
                if w and w[2] < reps:
                    bw_cell += " (%d/%d)" % (w[2], reps)
                cells.append(bw_cell + (" WRONG" if w and w[3] else ""))
                if t != "float":
                    cells.append(ratio_cell(w, wf.get(size)))
                cells.append(ratio_cell(w, best))
            out.append("| %s |" % " | ".join(cells))
        out.append("")
        lo, hi = TARGET_RANGE
        for t in others:
            pairs = [(s, meds[t]["weft"][s][0] / wf[s][0]) for s in sizes
                     if lo <= s <= hi and s in meds[t].get("weft", {}) and s in wf and wf[s][0] > 0]
            if not pairs:
                line = "%s, %s / float32: no size from %s to %s measured." % (
                    TITLES[coll], t, human(lo), human(hi))
            else:
                worst = min(pairs, key=lambda p: p[1])
                line = "%s, %s / float32 from %s to %s: lowest %.2fx (at %s), median %.2fx" % (
                    TITLES[coll], t, human(lo), human(hi), worst[1], human(worst[0]),
                    statistics.median(p[1] for p in pairs))
                if coll == "allreduce":
                    held = sum(1 for p in pairs if p[1] >= TARGET_RATIO)
                    line += "; >= %.1fx at %d of %d sizes (target %s)" % (
                        TARGET_RATIO, held, len(pairs), "met" if held == len(pairs) else "not met")
                first, last = pairs[0][0], pairs[-1][0]
                if first > lo or last < hi:  # a partial range says so
                    line += "; only %s to %s measured" % (human(first), human(last))
                line += "."
            out.append("- " + line)
            short.append(line)
        out.append("")
    return out, short


def plot(coll, med, status, n, reps, bw, path, title=None, libs=LIBS, labels=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter

    style = {"weft": ("tab:red", "o", "-"), "weftplain": ("tab:orange", "o", "--"),
             "openmpi": ("tab:blue", "s", "-"), "mpich": ("tab:green", "^", "-"),
             "gloo": ("tab:purple", "D", "-")}
    labels = labels or {}
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    sizes_all = sorted({s for lib in med for s in med[lib]})
    for ax, logy in zip(axes, (False, True)):
        for lib in libs:
            pts = sorted(med.get(lib, {}).items())
            label = labels.get(lib, lib)
            if not pts:
                st = ", ".join(sorted(status.get(lib, {"not measured"})))
                ax.plot([], [], color=style[lib][0], linestyle=style[lib][2], label="%s (%s)" % (label, st))
                continue
            xs = [p[0] for p in pts]
            ys = [p[1][0] for p in pts]
            ax.plot(xs, ys, color=style[lib][0], marker=style[lib][1], linestyle=style[lib][2],
                    markersize=4, linewidth=1.5, label=label)
        if bw and sizes_all:
            level = bw * 1e9 * bus_factor(coll, n) / traffic_bytes(coll, 1, n) / 1e9
            ax.axhline(level, color="gray", linestyle="--", linewidth=1,
                       label="memory-traffic bound, sizes >= 64M (%.2f GB/s)" % level)
        ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        if sizes_all:
            ticks = [s for i, s in enumerate(sizes_all) if i % max(1, len(sizes_all) // 9) == 0]
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: human(int(round(x)))))
            ax.xaxis.set_minor_locator(FixedLocator([]))
        ax.set_xlabel("message size (bytes, nccl-tests 'size' column)")
        ax.set_ylabel("bus bandwidth (GB/s)%s" % (", log scale" if logy else ""))
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    fig.suptitle("%s: bus bandwidth vs message size, %d ranks, median of %d repetition%s "
                 "(weft: %s)" % (title or TITLES[coll], n, reps, "" if reps == 1 else "s",
                                 "in place, as MPI_Bcast" if coll == "broadcast" else "out-of-place"))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cmd_report(a):
    d = a.dir
    raw = os.path.join(d, "raw.csv")
    if not os.path.exists(raw):
        print("report.py: %s not found (run run.sh first)" % raw, file=sys.stderr)
        return 1
    rows = load_rows(raw)
    meta = read_meta(os.path.join(d, "meta.txt"))
    md = dict(meta)
    n = int(md.get("ranks", rows[0]["nranks"] if rows else 2))
    reps = max([int(r["rep"]) for r in rows] or [1])
    membw = read_membw(os.path.join(d, "membw.txt"))
    threads = max([k[1] for k in membw if isinstance(k, tuple) and len(k) == 2] or [0])
    bw = membw.get(("copy", threads))
    colls = [c for c in COLLS if any(r["coll"] == c for r in rows)]
    libs = libs_in(rows)
    reg = md.get("weft buffers", "")  # "-R N (...); weftplain: -R 0 (...); ..."
    m = re.match(r"-R (\d)", reg)
    labels = {"weft": "weft -R %s" % m.group(1) if m else "weft", "weftplain": "weft plain -R 0"}

    out = ["# weft vs Open MPI vs MPICH vs Gloo — host-memory collectives", ""]
    for k, v in meta:
        out.append("- **%s**: %s" % (k, v))
    out.append("- **repetitions found in raw.csv**: %d" % reps)
    for col, what, fmt in (("busy", "CPU busy with other work in the second before each run "
                            "(%)", "%.0f"),
                           ("load", "1-min load average when each run started", "%.1f")):
        seen = {}
        for r in rows:
            if r.get(col):
                seen.setdefault((int(r["rep"]), r["lib"], r["coll"]), float(r[col]))
        if seen:
            per_rep = []
            for k in sorted({key[0] for key in seen}):
                v = [x for key, x in seen.items() if key[0] == k]
                per_rep.append(("rep %d: " + fmt + "–" + fmt) % (k, min(v), max(v)))
            out.append("- **%s**: %s" % (what, "; ".join(per_rep)))
    out.append("")
    out += ["All numbers are **busbw in GB/s** (nccl-tests definition: AllReduce algbw·2(n-1)/n; "
            "AllGather, ReduceScatter, AlltoAll algbw·(n-1)/n; Broadcast algbw), the **median over "
            "the repetitions**; the runs were interleaved %s, %s, ... . "
            "weft's numbers (every weft column) are nccl-tests' **out-of-place** columns, except "
            "Broadcast, where "
            "they are the **in-place** ones (ncclBcast), because MPI_Bcast and torch's broadcast "
            "have a single buffer (an out-of-place broadcast also copies the root's input into its "
            "output). Time per size is the wall "
            "time of the timed iterations divided by their count, the maximum over ranks (weft's "
            "*_perf run with -a 3 for that). "
            "Gloo's all_reduce and broadcast are in place (torch.distributed has no out-of-place "
            "form). \"(k/R)\" = only k of R repetitions produced this size; \"failed\" = the "
            "program did not run or did not finish (see logs/); \"n/a\" = the library has no such "
            "collective; \"—\" = no value; \"WRONG\" = the run's own check found wrong elements. "
            "Sizes whose per-rank chunk rounds to 0 bytes are left out." % (", ".join(libs), libs[0]), ""]
    if reg:
        out += ["**weft** is weft's *_perf with %s%s; Open MPI, MPICH and Gloo use malloc'd buffers, "
                "as their documentation does. `/ best peer` is over the best of Open MPI, MPICH and "
                "Gloo%s." % (reg.split(";")[0],
                             "; **weft plain** is the same program with -R 0 (ncclMemAlloc buffers, "
                             "unregistered)" if "weftplain" in libs else "",
                             " (weft plain is not a peer)" if "weftplain" in libs else ""), ""]
    if membw:
        def bw_cell(kern, t):
            allv = membw.get(("all", kern, t))
            if not allv:
                return "—"
            s = "%.2f" % max(allv)
            if len(allv) > 1:
                s += " (%s)" % ", ".join("%.1f" % v for v in allv)
            return s
        out += ["## Memory bandwidth (membw, arrays of %d MiB, traffic = bytes read + bytes written)"
                % membw.get("array_mib", 0), "",
                "Best repetition (every repetition's median in parentheses; membw ran at the start "
                "of each repetition).", "",
                "| kernel | 1 thread (GB/s) | %d threads (GB/s) |" % threads, "|---|---:|---:|"]
        for kern, what in (("copy", "copy a = b (memcpy), traffic 2 × bytes"),
                           ("add", "add a = b + c (float), traffic 3 × bytes")):
            out.append("| %s | %s | %s |" % (what, bw_cell(kern, 1), bw_cell(kern, threads)))
        model = ["Traffic model (sizes >= 64 MiB): the **bound time** is the minimal DRAM "
                "traffic of the collective, summed over all ranks, divided by the best %d-thread "
                "copy bandwidth (%.2f GB/s). The minimal traffic assumes an ideal single-copy algorithm "
                "that reads each input byte once (directly from the owner's buffer) and writes each "
                "output byte once; with S = the nccl-tests size column and n ranks: AllReduce 2nS, "
                "AllGather (n+1)S, ReduceScatter (n+1)S, Broadcast nS, AlltoAll 2nS. "
                "**fraction = bound time / measured time** (1.0 = as fast as the memory system "
                "allows under this model; values above 1 mean the working set was partly served "
                "from cache)." % (threads, bw or 0), ""]
        out += [""] + model
    else:
        model = []
        out += ["(no membw.txt: memory-bound fractions omitted)", ""]
    summary = list(model)
    dtypes = [t for t in DTYPES if any(r["dtype"] == t for r in rows)]
    multi = dtypes != ["float"]
    if multi:
        out += ["Datatypes: %s. The size column is bytes, so at one size a 2-byte type moves twice "
                "as many elements as float32 and double half as many; busbw is bytes per second "
                "in every table. Open MPI and MPICH run MPI_FLOAT and MPI_DOUBLE; MPI has no "
                "standard bfloat16 or half type (\"n/a\"). Gloo runs the torch dtype where torch's "
                "gloo has it for that collective, else \"n/a\"." % ", ".join(
                    DTYPE_TITLES[t] for t in dtypes), ""]
    for coll in colls:
        for dtype in dtypes:
            if not any(r["coll"] == coll and r["dtype"] == dtype for r in rows):
                continue
            title = coll_title(coll, dtype, multi)
            lines, med, status, bound = table_for(coll, rows, reps, n, bw, dtype, multi)
            out += lines
            if bound:
                summary += ["%s, %d ranks:" % (title, n)] + bound
            name = coll if dtype == "float" else "%s_%s" % (coll, dtype)
            try:
                plot(coll, med, status, n, reps, bw, os.path.join(d, name + ".png"), title, libs, labels)
                out += ["![%s](%s.png)" % (title, name), ""]
            except ImportError as e:
                out += ["(plot skipped: %s)" % e, ""]
    if multi:
        lines, short = dtype_section(rows, colls, dtypes, reps, n)
        out += lines
        summary += short
    with open(os.path.join(d, "results.md"), "w") as f:
        f.write("\n".join(out))
    if summary:
        print("\n".join(summary))
    print("wrote %s" % os.path.join(d, "results.md"))
    return 0


def main():
    p = argparse.ArgumentParser(description="perf/compare parsing, medians, tables, plots")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("ingest")
    g.add_argument("--csv", required=True)
    g.add_argument("--lib", required=True, choices=LIBS)
    g.add_argument("--coll", required=True, choices=COLLS)
    g.add_argument("--dtype", default="float", choices=DTYPES, help="element type (weft's -d name)")
    g.add_argument("--rep", required=True, type=int)
    g.add_argument("--nranks", required=True, type=int)
    g.add_argument("--rc", required=True, type=int)
    g.add_argument("--log", required=True)
    g.add_argument("--load", default="", help="1-minute load average when the run started")
    g.add_argument("--busy", default="", help="percent CPU busy (other work) just before the run")
    r = sub.add_parser("report")
    r.add_argument("--dir", default="build/compare")
    a = p.parse_args()
    return cmd_ingest(a) if a.cmd == "ingest" else cmd_report(a)


if __name__ == "__main__":
    sys.exit(main())
