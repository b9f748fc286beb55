#!/usr/bin/env bash
#
# nvidia_profiler_plugin.sh — NVIDIA's own example profiler plugin, built
# unmodified from its sources, loaded into weft.
#
# Usage: tests/abi/nvidia_profiler_plugin.sh BUILD_DIR
#
# Needs a copy of NVIDIA/nccl's sources: $NCCL_SRC (a checkout, or any
# folder with its plugins/ tree). Without one it prints "SKIP: <reason>"
# and exits 0. The example is C++ that includes CUDA's cuda_runtime.h and
# calls the CUDA runtime for its copy-engine events; like NVIDIA's
# Makefile it is linked without it, the calls being resolved when NCCL's
# program (which links libcudart) loads it. So it also needs CUDA's
# runtime header and library ($CUDA_HOME, default /usr/local/cuda; SKIP
# without them): the library is preloaded into the ranks, as the program
# would carry it. No GPU is needed (nothing calls it: weft has no
# copy-engine events).
#
# It builds plugins/profiler/example/*.cc as NVIDIA's Makefile does
# (${CXX:-c++} -Inccl -I$CUDA_HOME/include -fPIC -shared), checks which
# ncclProfiler_vN it exports, and runs a 2-rank AllReduce sweep under
# weftrun with it, asking for collective and kernel-channel events
# (NCCL_PROFILE_EVENT_MASK=66, which it reads as a decimal) dumped to
# NCCL_PROFILE_DUMP_FILE, with pools large enough for the whole sweep.
# weft must load it at v6, every result must be exact, and each rank's dump
# (<file>_<commHash>_<rank>.json) must be a JSON trace whose collective
# events (cat COLL, under their COLL_API and GROUP_API events) name
# AllReduce with every count of the sweep, the rank and the communicator's
# hash, and whose KernelCh events (at least one per collective) carry
# weft's timers, start before stop. Exits 1 on a failure, 2 on bad usage.
set -uo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/nvidia_plugin_lib.sh"
plugin_build_dir "$@"
need_nccl_src plugins/profiler/example plugin.cc "NVIDIA's example profiler"
example=$plugin_dir
need_cuda "NVIDIA's example profiler" include/cuda_runtime.h
for tool in nm python3 timeout; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found"; exit 0; }
done
out=$(mktemp -d "${TMPDIR:-/tmp}/weft-nvprofiler.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT

fail=0
so=$out/libnccl-profiler-nvidia-example.so
if ! (cd "$example" && ${CXX:-c++} -Inccl -I"$cuda/include" -fPIC -shared -o "$so" ./*.cc) >"$out/build.log" 2>&1; then
  echo "FAIL: NVIDIA's example profiler does not build"; sed 's/^/    /' "$out/build.log"; exit 1
fi
symbols=$(nm -D --defined-only "$so" | awk '/ ncclProfiler_v[0-9]+$/ {print $3}' | sort | tr '\n' ' ')
echo "NVIDIA's example profiler exports: $symbols"
case " $symbols " in
  *" ncclProfiler_v6 "*) ;;
  *) echo "FAIL: it does not export ncclProfiler_v6"; fail=1 ;;
esac

# The logs go to files of their own, so that they do not break the result table's lines.
LD_PRELOAD=$cudart NCCL_PROFILER_PLUGIN=$so NCCL_PROFILE_EVENT_MASK=66 NCCL_PROFILE_DUMP_FILE=$out/trace \
  NCCL_PROFILE_GROUP_API_POOL_SIZE=1024 NCCL_PROFILE_COLL_API_POOL_SIZE=1024 NCCL_PROFILE_COLL_POOL_SIZE=1024 \
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE=$out/log.%p \
  timeout 120 "$build/bin/weftrun" -n 2 -t 100 "$build/bin/all_reduce_perf" -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 \
  >"$out/run.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  echo "FAIL: all_reduce_perf with NVIDIA's example profiler exited $rc"; tail -20 "$out/run.log" | sed 's/^/    /'
  fail=1
fi
loaded=$(cat "$out"/log.* 2>/dev/null | grep -c "profiler plugin '.*' loaded (ncclProfiler_v6)")
if [ "$loaded" -ne 2 ]; then
  echo "FAIL: $loaded of 2 ranks loaded it at v6"
  cat "$out"/log.* 2>/dev/null | grep -i 'profiler' | head -5 | sed 's/^/    /'
  fail=1
fi
wrong=$(awk '/^ *[0-9]+ +[0-9]+ +[a-z]/ && ($9 != 0 || $13 != 0) {n++} END {print n + 0}' "$out/run.log")
counts=$(awk '/^ *[0-9]+ +[0-9]+ +float/ {print $2}' "$out/run.log" | sort -n | tr '\n' ' ')
if [ "$(echo "$counts" | wc -w)" -lt 6 ]; then
  echo "FAIL: only $(echo "$counts" | wc -w) sizes ran"; fail=1
fi
if [ "$wrong" -ne 0 ]; then
  echo "FAIL: $wrong sizes with wrong elements"; fail=1
fi
# Each rank's dump: its collective events, against the sweep's counts.
verdict=$(python3 - "$out" "$counts" <<'PY'
import glob, json, re, sys
out, counts = sys.argv[1], sorted(int(c) for c in sys.argv[2].split())
files = sorted(glob.glob(out + '/trace_*_*.json'))
bad = [] if len(files) == 2 else ['%d dump files' % len(files)]
for f in files:
    commhash, rank = (int(v) for v in re.match(r'.*/trace_(\d+)_(\d+)\.json$', f).groups())
    events = [e for e in json.load(open(f)) if e]
    begun = [e for e in events if e.get('ph') == 'b']
    colls = [e for e in begun if e['cat'] == 'COLL']
    swept = {e['args']['Count'] for e in colls if e['name'] == 'AllReduce' and e['args']['Datatype'] == 'ncclFloat32'}
    missing = [c for c in counts if c not in swept]
    if missing:
        bad.append('rank %d: no AllReduce COLL event of count %s' % (rank, missing))
    if any(e['args']['Rank'] != rank or e['args']['CommHash'] != commhash for e in colls):
        bad.append('rank %d: a COLL event names another rank or communicator' % rank)
    if not any(e['cat'] == 'COLL_API' for e in begun) or not any(e['cat'] == 'GROUP_API' for e in begun):
        bad.append('rank %d: no COLL_API / GROUP_API events' % rank)
    kernels = [e['args'] for e in begun if e['name'] == 'KernelCh']
    if len(kernels) < len(colls) or any(not 0 < k['StartGpuClk'] <= k['StopGpuClk'] for k in kernels):
        bad.append('rank %d: %d KernelCh events for %d COLL, or without timers' % (rank, len(kernels), len(colls)))
    print('rank %d: %d COLL events (%d AllReduce), %d KernelCh, %d COLL_API, %d GROUP_API' % (
        rank, len(colls), sum(e['name'] == 'AllReduce' for e in colls), len(kernels),
        sum(e['cat'] == 'COLL_API' for e in begun), sum(e['cat'] == 'GROUP_API' for e in begun)), file=sys.stderr)
print('; '.join(bad) if bad else 'ok')
PY
)
if [ "$verdict" != "ok" ]; then
  echo "FAIL: NVIDIA's example's dump: $verdict"; fail=1
fi
[ $fail -eq 0 ] &&
  echo "PASS: NVIDIA's example profiler (unmodified) loads at v6, every AllReduce is exact, and its dump names them with their kernel channels"
exit $fail
