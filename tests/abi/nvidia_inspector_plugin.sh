#!/usr/bin/env bash
#
# nvidia_inspector_plugin.sh — NVIDIA's Inspector profiler plugin, built
# unmodified with its own Makefile, loaded into a 2-rank weft job on host
# memory: it must write its per-collective JSON and its Prometheus metrics.
#
# Usage: tests/abi/nvidia_inspector_plugin.sh BUILD_DIR
#
# Needs a copy of NVIDIA/nccl's sources ($NCCL_SRC, with
# plugins/profiler/inspector) and CUDA's toolkit ($CUDA_HOME, default
# /usr/local/cuda: the Makefile wants nvcc, cuda.h and libcudart.so, which
# the plugin links); without them it prints "SKIP: <reason>" and exits 0.
# No GPU is needed: the Inspector's own CUDA calls (the device and its UUID,
# to label its output) are answered by inspector_cuda.c, preloaded with
# CUDA's runtime.
#
# The Inspector's Makefile builds a copy of its folder. inspector_job.c
# (one rank: three AllReduce, AllGather and Send/Recv pairs per count,
# results checked, then it holds its communicator while the Inspector's
# dump thread writes) runs twice under weftrun:
#   - JSON (dump every millisecond, then ncclCommDestroy): each rank's
#     <host>-pid<pid>.log must hold one record per AllReduce, AllGather,
#     Send and Recv of at least 8192 bytes (the Inspector's default
#     minimum) and none below, with the rank, 2 ranks, the bytes, NCCL's
#     per-function sequence numbers (the peer for Send/Recv), an execution
#     time > 0 taken from weft's KernelCh timers ("kernel_gpu": the default
#     NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING=1 keeps only those) and a
#     bandwidth > 0;
#   - Prometheus (NCCL_INSPECTOR_PROM_DUMP=1: the Inspector dumps every
#     30 s at the least, live communicators only, what finished since its
#     last write, so the job waits 1 s before its calls, holds its
#     communicator 31 s after and exits without destroying it): one
#     nccl_inspector_metrics_<uuid>.prom per rank with bandwidth and
#     execution time > 0 for both collectives, Send, Recv and both sizes,
#     nranks="2".
# Every rank must load it at the newest version it exports.
# Exits 1 on a failure, 2 on bad usage.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/nvidia_plugin_lib.sh"
plugin_build_dir "$@"
need_nccl_src plugins/profiler/inspector Makefile "NVIDIA's Inspector"
inspector=$plugin_dir
need_cuda "the Inspector's Makefile" bin/nvcc include/cuda.h
for tool in make "${CXX:-g++}" "${CC:-cc}" nm python3 timeout; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found"; exit 0; }
done
out=$(mktemp -d "${TMPDIR:-/tmp}/weft-inspector.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT

# The Inspector, its CUDA stand-in and the job.
cp -r "$inspector" "$out/inspector"
if ! make -C "$out/inspector" CUDA_HOME="$cuda" CXX="${CXX:-g++}" >"$out/build.log" 2>&1; then
  echo "FAIL: NVIDIA's Inspector does not build"; tail -20 "$out/build.log" | sed 's/^/    /'; exit 1
fi
so=$out/inspector/libnccl-profiler-inspector.so
newest=$(nm -D --defined-only "$so" | awk '/ ncclProfiler_v[0-9]+$/ {sub(/.*_v/, "", $3); print $3}' | sort -n | tail -1)
echo "NVIDIA's Inspector exports ncclProfiler_v${newest:-?}"
mkdir -p "$out/cuda" "$out/json" "$out/prom"
stand_in=$out/cuda/libcuda.so
cflags=(-std=c11 -Wall -Wextra -Werror -O2)
if ! "${CC:-cc}" "${cflags[@]}" -fPIC -shared -Wl,-soname,libcuda.so -o "$stand_in" "$here/inspector_cuda.c" ||
  ! "${CC:-cc}" "${cflags[@]}" -I"$root/include" -o "$out/inspector_job" "$here/inspector_job.c" \
    -L"$build/lib" -l:libnccl.so.2 -Wl,--disable-new-dtags -Wl,-rpath,"$build/lib"; then
  echo "FAIL: inspector_cuda.c or inspector_job.c does not build"; exit 1
fi

fail=0
# run MODE WAIT_MS HOLD_MS destroy|keep COUNT... [-- VAR=VALUE...]: the job with the Inspector,
# dumping into $out/MODE.
run() {
  local mode=$1 wait=$2 hold=$3 end=$4
  shift 4
  local counts=() envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do counts+=("$1"); shift; done
  [ $# -gt 0 ] && { shift; envs=("$@"); }
  env LD_PRELOAD="$stand_in $cudart" NCCL_PROFILER_PLUGIN="$so" NCCL_INSPECTOR_ENABLE=1 \
    NCCL_INSPECTOR_DUMP_DIR="$out/$mode" NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=1000 \
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE="$out/log.$mode.%p" "${envs[@]}" \
    timeout 150 "$build/bin/weftrun" -n 2 -t 120 "$out/inspector_job" "$wait" "$hold" "$end" "${counts[@]}" \
    >"$out/run.$mode" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL: the $mode job exited $rc"; tail -20 "$out/run.$mode" | sed 's/^/    /'; fail=1
  fi
  local loaded
  loaded=$(cat "$out"/log."$mode".* 2>/dev/null | grep -c "profiler plugin 'Inspector' loaded (ncclProfiler_v$newest)")
  if [ "$loaded" -ne 2 ]; then
    echo "FAIL: $mode: $loaded of 2 ranks loaded it at v$newest"; fail=1
  fi
}

run json 0 300 destroy 1000 3000 65536
verdict=$(python3 - "$out" <<'PY'
import glob, json, re, sys
out = sys.argv[1]
ranks = dict((int(p), int(r)) for r, p in re.findall(r'rank (\d+) of 2 pid (\d+)', open(out + '/run.json').read()))
bad = [] if len(ranks) == 2 else ['%d ranks said their pid' % len(ranks)]
ids = set()
for pid, rank in sorted(ranks.items(), key=lambda x: x[1]):
    files = glob.glob('%s/json/*-pid%d.log' % (out, pid))
    if len(files) != 1:
        bad.append('rank %d: %d JSON files' % (rank, len(files)))
        continue
    recs = [json.loads(line) for line in open(files[0]) if line.strip()]
    colls, p2ps = [], []
    for r in recs:
        h = r['header']
        ids.add(h['id'])
        if (h['rank'], h['n_ranks'], h['nnodes']) != (rank, 2, 1):
            bad.append('rank %d: header %s' % (rank, h))
        kind = 'coll' if 'coll_perf' in r else 'p2p'
        c = r[kind + '_perf']
        if not (c[kind + '_exec_time_us'] > 0 and c[kind + '_busbw_gbs'] > 0 and
                c[kind + '_timing_source'] == 'kernel_gpu'):
            bad.append('rank %d: %s: time %s us (%s), busbw %s' % (rank, c[kind], c[kind + '_exec_time_us'],
                       c[kind + '_timing_source'], c[kind + '_busbw_gbs']))
        if kind == 'coll':
            colls.append((c['coll'], c['coll_msg_size_bytes'], c['coll_sn']))
        else:
            p2ps.append((c['p2p'], c['p2p_msg_size_bytes'], c['p2p_peer']))
    # Counts 1000 (4000 bytes: below the minimum), 3000 and 65536, three rounds each;
    # collectives numbered per function from 0.
    counts = (1000, 3000, 65536)
    want = sorted((coll, 4 * count, 3 * i + k) for coll in ('AllGather', 'AllReduce')
                  for i, count in enumerate(counts) if i > 0 for k in range(3))
    if sorted(colls) != want:
        bad.append('rank %d: collectives %s, want %s' % (rank, sorted(colls), want))
    want = sorted((f, 4 * count, 1 - rank) for f in ('Recv', 'Send') for count in counts[1:] for k in range(3))
    if sorted(p2ps) != want:
        bad.append('rank %d: send/recv %s, want %s' % (rank, sorted(p2ps), want))
    print('rank %d: %d records' % (rank, len(recs)), file=sys.stderr)
if len(ids) != 1:
    bad.append('communicator ids %s' % sorted(ids))
print('; '.join(bad[:6]) if bad else 'ok')
PY
)
[ "$verdict" = "ok" ] || { echo "FAIL: the Inspector's JSON: $verdict"; fail=1; }

run prom 1000 31000 keep 3000 65536 -- NCCL_INSPECTOR_PROM_DUMP=1
verdict=$(python3 - "$out" <<'PY'
import glob, re, sys
files = sorted(glob.glob(sys.argv[1] + '/prom/nccl_inspector_metrics_*.prom'))
bad = [] if len(files) == 2 else ['%d .prom files' % len(files)]
line = re.compile(r'^(nccl_\w+)\{([^}]*)\} (\S+)$')
for f in files:
    seen = set()
    for text in open(f):
        m = line.match(text.strip())
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if labels.get('nranks') != '2' or float(m.group(3)) <= 0:
            bad.append('%s: %s' % (f.rsplit('/', 1)[1], text.strip()))
        seen.add((m.group(1), labels.get('collective', labels.get('p2p_operation')), labels.get('message_size')))
    sizes = ('11-12KB', '256-257KB')
    want = {(metric, coll, size) for metric in ('nccl_bus_bandwidth_gbs', 'nccl_collective_exec_time_microseconds')
            for coll in ('AllReduce', 'AllGather') for size in sizes}
    want |= {(metric, op, size) for metric in ('nccl_p2p_bus_bandwidth_gbs', 'nccl_p2p_exec_time_microseconds')
             for op in ('Send', 'Recv') for size in sizes}
    if not want <= seen:
        bad.append('%s lacks %s' % (f.rsplit('/', 1)[1], sorted(want - seen)))
print('; '.join(bad[:6]) if bad else 'ok')
PY
)
[ "$verdict" = "ok" ] || { echo "FAIL: the Inspector's Prometheus output: $verdict"; fail=1; }

[ $fail -eq 0 ] &&
  echo "PASS: NVIDIA's Inspector (unmodified) loads at v$newest and writes its JSON and Prometheus output for a weft job"
exit $fail
