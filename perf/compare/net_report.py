#!/usr/bin/env python3
"""net_report.py — medians of a net_run.sh output as markdown tables.

    perf/compare/net_report.py [build/compare/net.txt]

Prints iperf3's one-stream and --bidir rates, then one table: per size,
Open MPI's TCP BTL and weft with 1, 2 and 4 sockets per connection and
with the messages above 8 KiB left to the proxy thread (WEFT_NET_INLINE=8192); time per
call in microseconds up to 16 KiB, busbw in GB/s from 64 KiB; and weft's
default (4 sockets) against Open MPI (time: Open MPI's / weft's, so above
1 means weft is faster in both).
"""
import collections
import re
import statistics
import sys

SERIES = [("ompi", "Open MPI TCP"), ("nsocks=1", "weft, 1 socket"), ("nsocks=2", "2 sockets"),
          ("nsocks=4", "4 sockets (default)"), ("inline=8192", "default, WEFT_NET_INLINE=8192")]
SMALL_MAX = 16384


def parse(path):
    rows = collections.defaultdict(lambda: collections.defaultdict(list))  # series -> size -> [(time, busbw)]
    iperf = collections.defaultdict(list)
    series = None
    for line in open(path):
        m = re.match(r"iperf3 (bidir )?rep \d+: (.*)", line)
        if m:
            rates = [float(x) for x in re.findall(r"([\d.]+) Gbits/sec", m.group(2))]
            iperf["bidir" if m.group(1) else "one"].extend(rates)
            series = None
            continue
        m = re.match(r"(weft (nsocks=\d|inline=\d+)|ompi tcp netns) rep", line)
        if m:
            series = m.group(2) or "ompi"
            continue
        parts = line.split()
        if series and len(parts) == 3 and parts[0].isdigit():
            rows[series][int(parts[0])].append((float(parts[1]), float(parts[2])))
        elif not line.startswith(" "):
            series = None
    return rows, iperf


def size_name(n):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "build/compare/net.txt"
    rows, iperf = parse(path)
    for kind, label in (("one", "one stream"), ("bidir", "--bidir, each way")):
        if iperf[kind]:
            print(f"iperf3 {label}: median {statistics.median(iperf[kind]):.2f} Gbit/s "
                  f"({min(iperf[kind]):.2f}-{max(iperf[kind]):.2f}, {len(iperf[kind])} samples)")
    print()
    print("| size | " + " | ".join(label for _, label in SERIES) + " | default / Open MPI |")
    print("|---:|" + "---:|" * (len(SERIES) + 1))
    sizes = sorted({s for series in rows.values() for s in series})
    for size in sizes:
        small = size <= SMALL_MAX
        med = {}
        for key, _ in SERIES:
            got = rows[key].get(size)
            if got:
                med[key] = statistics.median(t if small else b for t, b in got)
        cells = ["-" if k not in med else f"{med[k]:.1f} us" if small else f"{med[k]:.2f}" for k, _ in SERIES]
        ratio = "-"
        if "ompi" in med and "nsocks=4" in med and med["nsocks=4"] > 0 and med["ompi"] > 0:
            ratio = f"{(med['ompi'] / med['nsocks=4']) if small else (med['nsocks=4'] / med['ompi']):.2f}x"
        print(f"| {size_name(size)} | " + " | ".join(cells) + f" | {ratio} |")


if __name__ == "__main__":
    main()
