#!/usr/bin/env bash
# run.sh — weft side by side with Open MPI, MPICH and Gloo on this host.
#
# Builds the peers' benchmarks (perf/compare/mpi_coll_bench.c with both MPI
# compilers, perf/compare/membw.c) into build/compare/, measures memory
# bandwidth, then runs every collective with every library R times,
# interleaved (weft, weftplain, openmpi, mpich, gloo, weft, ...), and hands
# the raw data to report.py for medians, tables (build/compare/results.md)
# and plots (build/compare/<coll>.png). Every run has a timeout; a library
# that fails is reported as "failed", it does not stop the script.
# Everything talks over shared memory or the loopback interface only.
#
# Every peer runs as its documentation recommends on one host: Open MPI with
# the ob1 PML over the self and vader BTLs, vader's single copy by cross
# memory attach (CMA), ranks bound to cores; MPICH bound to cores; Gloo
# through torch.distributed as a PyTorch user starts it (unpinned, as
# torchrun leaves it). weft is placed as the MPI ranks are (WEFT_BIND=1).
# weft's buffers are registered as NCCL symmetric windows (*_perf -R 2, as
# an NCCL user does for best speed; --weft-reg); weftplain is the same run
# on unregistered ncclMemAlloc buffers (-R 0). The MPIs and Gloo use
# malloc'd buffers.
# --placement unpinned runs the MPIs with --bind-to none and weft unbound.
# Small sizes get thousands of iterations so that every library reaches its
# steady state (--iters-plan), and every library runs the same plan.
# -d "float bfloat16 half double" adds the datatype dimension (default float
# alone): weft's *_perf -d TYPE, the MPIs with MPI_FLOAT or MPI_DOUBLE (MPI
# has no standard bfloat16 or half: n/a), Gloo with the torch dtype where
# torch's gloo has it for that collective (else n/a).
#
#   perf/compare/run.sh [-n NRANKS] [-r REPS] [-b MIN] [-e MAX] [-f FACTOR]
#                       [-c "allreduce allgather reducescatter broadcast alltoall"]
#                       [-d "float bfloat16 half double"]
#                       [--iters N] [--warmup N] [--iters-plan PLAN]
#                       [--placement pinned|unpinned] [--timeout SECONDS]
#                       [--quiet-wait SECONDS] [--quiet-busy PERCENT]
#                       [-o OUTDIR] [--no-install] [--no-build] [--quick]
#                       [--weft-z N] [--weft-reg N] [--no-plain] [--malloc-default]
set -u -o pipefail

usage() {
  cat <<'EOF'
usage: perf/compare/run.sh [options]
  -n NRANKS        ranks per run (default 2; 4 and 8 work too)
  -r REPS          interleaved repetitions, median taken (default 3)
  -b MIN, -e MAX   message sizes as in nccl-tests, K/M/G = 1024^k (default 8 .. 256M)
  -f FACTOR        size multiplier (default 2)
  -c "COLLS"       subset of: allreduce allgather reducescatter broadcast alltoall
  -d "TYPES"       datatypes, subset of: float bfloat16 half double (default float);
                   the MPIs run float and double only, Gloo what torch's gloo has
  --iters-plan P   timed and warm-up iterations by size, as comma-separated
                   UPTO:ITERS:WARMUP bands (default 64K:5000:1000,1M:1000:100,16M:100:10,4G:20:5)
  --iters N        timed iterations at every size (with --warmup: one band, replaces the plan)
  --warmup N       warm-up iterations at every size (default with --iters: 5)
  --placement P    pinned (default: MPI ranks --bind-to core, weft WEFT_BIND=1) or
                   unpinned (--bind-to none, weft unbound); Gloo is never pinned
  --timeout S      limit for one benchmark run in seconds (default 900)
  --quiet-wait S   before each run, wait up to S seconds (default 30) for a second in
                   which other work keeps the CPUs at most --quiet-busy percent busy (default 25)
  -o DIR           output folder (default build/compare; must be under build/)
  --no-install     do not install missing Debian packages
  --no-build       do not run make when weft's binaries are missing
  --weft-z N       weft's -z mode (default 2: every call on the NULL stream, complete
                   on return, as a blocking MPI call is; 0: weft streams, synchronised
                   after each timed batch, as nccl-tests does on GPUs)
  --weft-reg N     weft's -R mode (default 2: every rank's buffers registered as NCCL
                   symmetric windows, NCCL_WIN_COLL_SYMMETRIC, so peers' buffers are
                   mapped; 1: ncclCommRegister; 0: unregistered ncclMemAlloc buffers)
  --no-plain       skip weftplain, weft on unregistered buffers (-R 0), to save time
  --quick          small sizes (8 .. 64K), 1 repetition, few iterations: a smoke test
  --malloc-default leave glibc's malloc thresholds as they are (by default every
                   library runs with freed memory kept for reuse: see MALLOC_ENV)
Outputs in build/compare/ (or -o DIR): results.md, <coll>.png, raw.csv, membw.txt, meta.txt, logs/
EOF
}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
HERE=perf/compare
OUT=build/compare
PY=/usr/bin/python3  # Debian's python: torch, matplotlib, numpy come from apt
PACKAGES=(openmpi-bin libopenmpi-dev mpich libmpich-dev python3-torch python3-matplotlib python3-numpy)
ALL_COLLS="allreduce allgather reducescatter broadcast alltoall"
ALL_DTYPES="float bfloat16 half double"  # weft's *_perf -d names (perf/common_args.c)

CMDLINE="perf/compare/run.sh$(printf ' %q' "$@")"
NR=2 REPS= MINB= MAXB= FACTOR=2 COLLS=$ALL_COLLS DTYPES=float ITERS= WARMUP= TMO=900 QWAIT=30 QBUSY=25 INSTALL=1 BUILD=1 QUICK=0 WEFT_Z=2
WEFT_REG=2 PLAIN=1 MALLOC_DEFAULT=0
PLAN=64K:5000:1000,1M:1000:100,16M:100:10,4G:20:5 PLACEMENT=pinned

while [ $# -gt 0 ]; do
  case "$1" in
    -n) NR=${2:?-n needs a value}; shift 2 ;;
    -r) REPS=${2:?-r needs a value}; shift 2 ;;
    -b) MINB=${2:?-b needs a value}; shift 2 ;;
    -e) MAXB=${2:?-e needs a value}; shift 2 ;;
    -f) FACTOR=${2:?-f needs a value}; shift 2 ;;
    -c) COLLS=${2:?-c needs a value}; shift 2 ;;
    -d) DTYPES=${2:?-d needs a value}; shift 2 ;;
    -o) OUT=${2:?-o needs a value}; shift 2 ;;
    --iters) ITERS=${2:?}; shift 2 ;;
    --warmup) WARMUP=${2:?}; shift 2 ;;
    --iters-plan) PLAN=${2:?}; shift 2 ;;
    --placement) PLACEMENT=${2:?}; shift 2 ;;
    --timeout) TMO=${2:?}; shift 2 ;;
    --quiet-wait) QWAIT=${2:?}; shift 2 ;;
    --malloc-default) MALLOC_DEFAULT=1; shift ;;
    --quiet-busy) QBUSY=${2:?}; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    --no-build) BUILD=0; shift ;;
    --weft-z) WEFT_Z=${2:?--weft-z needs a value}; shift 2 ;;
    --weft-reg) WEFT_REG=${2:?--weft-reg needs a value}; shift 2 ;;
    --no-plain) PLAIN=0; shift ;;
    --quick) QUICK=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

# --quick only fills in what was not given explicitly.
if [ "$QUICK" = 1 ]; then
  : "${REPS:=1}" "${MINB:=8}" "${MAXB:=64K}" "${ITERS:=50}" "${WARMUP:=5}"
  MEMBW_MIB=64 MEMBW_RUNS=3
fi
: "${REPS:=3}" "${MINB:=8}" "${MAXB:=256M}"
# --iters (and --warmup) given: one band for every size.
if [ -n "$ITERS" ] || [ -n "$WARMUP" ]; then PLAN="4G:${ITERS:-20}:${WARMUP:-5}"; fi
case "$PLACEMENT" in pinned|unpinned) ;; *) echo "run.sh: --placement is pinned or unpinned" >&2; exit 2 ;; esac
case "$WEFT_REG" in 0|1|2) ;; *) echo "run.sh: --weft-reg is 0, 1 or 2" >&2; exit 2 ;; esac
# weft and weftplain are one binary with -R WEFT_REG and -R 0.
LIBS="weft openmpi mpich gloo"
[ "$PLAIN" = 1 ] && LIBS="weft weftplain openmpi mpich gloo"

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
is_size() { [[ "$1" =~ ^[0-9]+[KkMmGg]?[Bb]?$ ]]; }
for v in "$NR" "$REPS" "$FACTOR" "$TMO" "$QWAIT" "$QBUSY"; do
  is_uint "$v" || { echo "run.sh: '$v' is not a non-negative integer" >&2; exit 2; }
done
is_size "$MINB" && is_size "$MAXB" || { echo "run.sh: bad size in -b/-e" >&2; exit 2; }
[ "$NR" -ge 1 ] && [ "$REPS" -ge 1 ] && [ "$FACTOR" -ge 2 ] && [ "$TMO" -ge 1 ] ||
  { echo "run.sh: need -n >= 1, -r >= 1, -f >= 2, --timeout >= 1" >&2; exit 2; }
to_bytes() { numfmt --from=iec "${1%[Bb]}"; }
# The plan as lines "UPTO_BYTES ITERS WARMUP", checked.
PLAN_LINES=$(tr ',' '\n' <<<"$PLAN" | while IFS=: read -r upto it wu; do
  is_size "$upto" && is_uint "$it" && is_uint "$wu" && [ "$it" -ge 1 ] ||
    { echo "run.sh: bad --iters-plan band '$upto:$it:$wu' (UPTO:ITERS:WARMUP, ITERS >= 1)" >&2; exit 2; }
  echo "$(to_bytes "$upto") $it $wu"
done) || exit 2
case "$OUT" in
  build/*) case "$OUT" in *..*) echo "run.sh: -o must be a folder under build/" >&2; exit 2 ;; esac ;;
  *) echo "run.sh: -o must be a folder under build/" >&2; exit 2 ;;
esac
OUT=${OUT%/}
for c in $COLLS; do
  case " $ALL_COLLS " in *" $c "*) ;; *) echo "run.sh: unknown collective '$c'" >&2; exit 2 ;; esac
done
for t in $DTYPES; do
  case " $ALL_DTYPES " in *" $t "*) ;; *) echo "run.sh: unknown datatype '$t' (one of: $ALL_DTYPES)" >&2; exit 2 ;; esac
done
[ -n "${DTYPES// /}" ] || { echo "run.sh: -d needs at least one datatype" >&2; exit 2; }

log() { printf '[compare %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# A benchmark runs under `timeout`, which puts it in its own process group:
# pass a signal that stops this script on to it.
CHILD=
on_signal() {
  [ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null && wait "$CHILD" 2>/dev/null
  exit 130
}
trap on_signal INT TERM HUP

# Percent of all CPU time that was busy during the last second (other work:
# nothing of ours runs while this samples).
cpu_busy() {
  local a b
  read -r -a a < <(head -1 /proc/stat)
  sleep 1
  read -r -a b < <(head -1 /proc/stat)
  local total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
  local idle=$(( b[4] - a[4] + b[5] - a[5] ))
  [ "$total" -gt 0 ] && echo $(( 100 * (total - idle) / total )) || echo 0
}

# Wait up to QWAIT seconds for a quiet second; leaves the last sample in BUSY.
BUSY=0
wait_quiet() {
  local start=$SECONDS
  while :; do
    BUSY=$(cpu_busy)
    [ "$BUSY" -le "$QBUSY" ] && return 0
    [ $(( SECONDS - start )) -ge "$QWAIT" ] && return 0
  done
}

# ---- 1. Debian packages -----------------------------------------------------
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$INSTALL" = 1 ]; then
    log "installing: ${missing[*]}"
    SUDO=
    [ "$(id -u)" = 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y --no-install-recommends "${missing[@]}" ||
      { $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; } ||
      log "package installation failed; the libraries that need them will show as failed"
  else
    log "missing packages (not installing, --no-install): ${missing[*]}"
  fi
fi

# ---- 2. Builds (into build/, never into the source tree) --------------------
mkdir -p "$OUT/logs"
rm -f "$OUT"/raw.csv "$OUT"/logs/*.log "$OUT"/membw.txt "$OUT"/linelat.txt "$OUT"/meta.txt "$OUT"/results.md "$OUT"/*.png

perf_bin() {
  case "$1" in
    allreduce) echo all_reduce_perf ;; allgather) echo all_gather_perf ;;
    reducescatter) echo reduce_scatter_perf ;; broadcast) echo broadcast_perf ;;
    alltoall) echo alltoall_perf ;;
  esac
}
need_make=0
[ -x build/bin/weftrun ] || need_make=1
for c in $COLLS; do [ -x "build/bin/$(perf_bin "$c")" ] || need_make=1; done
if [ "$need_make" = 1 ] && [ "$BUILD" = 1 ]; then
  log "building weft (make -j$(nproc))"
  make -j"$(nproc)" >"$OUT/logs/make.log" 2>&1 || log "make failed (see $OUT/logs/make.log)"
fi

# glibc hands every allocation above its mmap threshold (32 MiB at most) to a
# fresh mmap and returns it on free, so a library that allocates a temporary
# buffer per call (Open MPI's large AllReduce does) pays a page fault for
# every 4 KiB of it on every call: on this virtual machine its 64 MiB
# AllReduce ran 8x slower for that alone. Every library's processes get
# thresholds high enough that freed memory is kept and reused, the same for
# all (weft allocates nothing per call; `--malloc-default` leaves glibc's).
MALLOC_ENV=(MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=4294967296)
[ "$MALLOC_DEFAULT" = 1 ] && MALLOC_ENV=()
MALLOC_FWD=()  # mpirun.openmpi forwards only what -x names
for kv in "${MALLOC_ENV[@]}"; do
  export "${kv?}"
  MALLOC_FWD+=(-x "${kv%%=*}")
done

CFLAGS=(-std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -Itools/common)
PROG_UTIL=tools/common/prog_util.c  # sizes and the clock, shared with weft's own programs
for m in openmpi mpich; do
  rm -f "$OUT/mpi_coll_bench.$m"
  if command -v "mpicc.$m" >/dev/null; then
    "mpicc.$m" "${CFLAGS[@]}" -o "$OUT/mpi_coll_bench.$m" "$HERE/mpi_coll_bench.c" "$PROG_UTIL" \
      >"$OUT/logs/build_$m.log" 2>&1 || log "mpicc.$m failed (see $OUT/logs/build_$m.log)"
  else
    echo "mpicc.$m not found" >"$OUT/logs/build_$m.log"
  fi
done
gcc -std=c11 -O3 -march=native -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -Itools/common \
  -o "$OUT/membw" "$HERE/membw.c" "$PROG_UTIL" >"$OUT/logs/build_membw.log" 2>&1 ||
  log "membw build failed (see $OUT/logs/build_membw.log)"
gcc "${CFLAGS[@]}" -o "$OUT/linelat" "$HERE/linelat.c" "$PROG_UTIL" >"$OUT/logs/build_linelat.log" 2>&1 ||
  log "linelat build failed (see $OUT/logs/build_linelat.log)"

# ---- 3. Machine and versions ------------------------------------------------
first_line() { "$@" 2>/dev/null | grep -v '^\s*$' | head -1 | tr -s ' \t' ' '; }
weft_version() {
  local v
  v=$(awk '/#define WEFT_(MAJOR|MINOR|PATCH) /{printf "%s%s", sep, $3; sep="."}' include/weft.h 2>/dev/null)
  local rev
  rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)
  echo "${v:-unknown}${rev:+ (git $rev, working tree as built)}"
}
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "cpus: $(nproc)"
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(awk '/MemTotal/{printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo), L3 $(cat /sys/devices/system/cpu/cpu0/cache/index3/size 2>/dev/null || echo '?'), kernel $(uname -r)"
  echo "weft: $(weft_version)"
  echo "openmpi: $(first_line ompi_info --version)"
  echo "mpich: $(mpichversion 2>/dev/null | awk -F: '/Version|Device/{gsub(/^[ \t]+/, "", $2); printf "%s%s", sep, $2; sep=", "}')"
  echo "gloo: torch $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not importable')"
  echo "ranks: $NR"
  echo "repetitions: $REPS (interleaved ${LIBS// /, }; median reported)"
  echo "sizes: -b $MINB -e $MAXB -f $FACTOR, iterations by size (up to:timed:warm-up) $PLAN"
  # Only when asked for: a float-only run's header stays as it always was.
  [ "$DTYPES" = float ] || echo "datatypes: $DTYPES (weft -d TYPE; Open MPI and MPICH MPI_FLOAT, MPI_DOUBLE, n/a otherwise; Gloo the torch dtype where its gloo has it)"
  echo "placement: $PLACEMENT ($([ "$PLACEMENT" = pinned ] && echo 'Open MPI and MPICH --bind-to core, weft WEFT_BIND=1' || echo 'Open MPI and MPICH --bind-to none, weft unbound'); Gloo unpinned)"
  echo "openmpi transport: --mca pml ob1 --mca btl self,vader --mca btl_vader_single_copy_mechanism cma"
  echo "malloc: ${MALLOC_ENV[*]:-glibc defaults, --malloc-default} for every library"
  case "$WEFT_REG" in
    2) reg="symmetric windows: ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC) on every rank's buffers" ;;
    1) reg="ncclCommRegister on every rank's buffers" ;;
    0) reg="ncclMemAlloc buffers, unregistered" ;;
  esac
  echo "weft buffers: -R $WEFT_REG ($reg)$([ "$PLAIN" = 1 ] && echo '; weftplain: -R 0 (ncclMemAlloc buffers, unregistered)'); Open MPI, MPICH and Gloo: malloc'd buffers"
  echo "weft mode: -z $WEFT_Z ($([ "$WEFT_Z" = 2 ] && echo 'NULL stream: each call complete on return, like a blocking MPI call' || echo 'see perf/README.md'))"
  echo "command: $CMDLINE"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt"

# ---- 4. Memory bandwidth ----------------------------------------------------
if [ -z "${MEMBW_MIB:-}" ]; then
  # Far larger than the last-level cache: 2 x L3, at least 256 MiB per array,
  # at most an eighth of the free memory for the three arrays.
  l3=$(numfmt --from=iec "$(cat /sys/devices/system/cpu/cpu0/cache/index3/size 2>/dev/null)" 2>/dev/null || echo 0)
  avail=$(awk '/MemAvailable/{print int($2/1024)}' /proc/meminfo)
  MEMBW_MIB=$(( 2 * l3 / 1048576 ))
  [ "$MEMBW_MIB" -ge 256 ] || MEMBW_MIB=256
  [ $(( 3 * MEMBW_MIB )) -le $(( avail / 8 )) ] || MEMBW_MIB=$(( avail / 24 ))
  MEMBW_RUNS=7
fi
# Measured once per repetition, interleaved with the collectives; the report
# uses the best repetition (other work on the machine only lowers it).
run_membw() {  # rep
  [ -x "$OUT/membw" ] || return 0
  wait_quiet
  log "memory bandwidth (rep $1, CPUs ${BUSY}% busy before): 3 arrays of $MEMBW_MIB MiB, 1 and $NR threads, median of $MEMBW_RUNS"
  echo "# rep $1 busy $BUSY" >>"$OUT/membw.txt"
  timeout -k 10 "$TMO" "$OUT/membw" -s "$MEMBW_MIB" -t "$NR" -r "$MEMBW_RUNS" \
    2>>"$OUT/logs/membw.err" | sed "s/^MEMBW /MEMBW rep=$1 /" | tee -a "$OUT/membw.txt" ||
    log "membw failed (see $OUT/logs/membw.err)"
}

# The floor under a 2-rank small collective: two cores swapping a cache line
# (linelat.c), pinned to CPUs 0 and 1 as the pinned ranks are.
run_linelat() {  # rep
  [ -x "$OUT/linelat" ] && [ "$(nproc)" -ge 2 ] || return 0
  wait_quiet
  timeout -k 10 "$TMO" "$OUT/linelat" -n 1000000 -r 7 2>>"$OUT/logs/linelat.err" |
    sed "s/^LINELAT /LINELAT rep=$1 /" | tee -a "$OUT/linelat.txt" || log "linelat failed (see $OUT/logs/linelat.err)"
}

# ---- 5. Interleaved runs ----------------------------------------------------
# The sizes MINB, MINB*FACTOR, ... MAXB cut into the plan's bands: lines
# "FIRST LAST ITERS WARMUP", one benchmark invocation each.
BANDS=$(size=$(to_bytes "$MINB") max=$(to_bytes "$MAXB") prev=0
  while read -r upto it wu; do
    first=$size last=
    while [ "$size" -le "$max" ] && [ "$size" -le "$upto" ]; do last=$size; size=$((size * FACTOR)); done
    [ -n "$last" ] && echo "$first $last $it $wu"
    prev=$upto
  done <<<"$PLAN_LINES"
  [ "$size" -le "$max" ] && echo "run.sh: sizes above the plan's last band ($prev bytes) are not run" >&2
  true)
[ -n "$BANDS" ] || { echo "run.sh: no size falls in the --iters-plan bands" >&2; exit 2; }

if [ "$PLACEMENT" = pinned ]; then MPI_BIND=core WEFT_BIND_ENV=WEFT_BIND=1; else MPI_BIND=none WEFT_BIND_ENV=WEFT_BIND=0; fi

bench_cmd() {  # lib coll dtype first last iters warmup: the command, in CMD; or NA, why not
  local lib=$1 coll=$2 dtype=$3 args=(-b "$4" -e "$5" -f "$FACTOR" -n "$6" -w "$7")
  CMD=() NA=
  case "$lib" in
    openmpi|mpich)
      case "$dtype" in
        float|double) args+=(-d "$dtype") ;;
        *) NA="MPI has no standard $dtype datatype"; return ;;
      esac ;;
  esac
  case "$lib" in
    weft|weftplain)
      local bin="build/bin/$(perf_bin "$coll")" reg=$WEFT_REG
      [ "$lib" = weftplain ] && reg=0
      [ -x "$bin" ] && CMD=(env "$WEFT_BIND_ENV" build/bin/weftrun -n "$NR" -t "$TMO" "$bin" "${args[@]}" -d "$dtype" -a 3 -z "$WEFT_Z" -R "$reg") ;;
    openmpi)
      # Shared memory through vader, single copy by CMA: Open MPI's own advice for one host.
      [ -x "$OUT/mpi_coll_bench.openmpi" ] &&
        CMD=(mpirun.openmpi --allow-run-as-root --oversubscribe -np "$NR" --bind-to "$MPI_BIND"
             --mca pml ob1 --mca btl self,vader --mca btl_vader_single_copy_mechanism cma
             --mca oob_tcp_if_include lo "${MALLOC_FWD[@]}"
             "$OUT/mpi_coll_bench.openmpi" -c "$coll" "${args[@]}") ;;
    mpich)
      # UCX is MPICH's netmod here: keep it on shared memory (no network devices).
      [ -x "$OUT/mpi_coll_bench.mpich" ] &&
        CMD=(env UCX_TLS=self,sm UCX_NET_DEVICES=lo mpirun.mpich -np "$NR" -bind-to "$MPI_BIND"
             "$OUT/mpi_coll_bench.mpich" -c "$coll" "${args[@]}") ;;
    gloo)
      CMD=("$PY" "$HERE/torch_bench.py" --backend gloo -np "$NR" -c "$coll" "${args[@]}" --dtype "$dtype") ;;
  esac
}

run_one() {  # lib coll dtype rep
  local lib=$1 coll=$2 dtype=$3 rep=$4 rc=0 r load first last it wu
  # float keeps the log names a float-only run always had.
  local logf="$OUT/logs/${lib}_${coll}_r${rep}.log"
  [ "$dtype" = float ] || logf="$OUT/logs/${lib}_${coll}_${dtype}_r${rep}.log"
  : >"$logf"
  bench_cmd "$lib" "$coll" "$dtype" 0 0 1 0
  if [ -n "$NA" ]; then  # nothing to run: the library has no such type
    echo "UNSUPPORTED coll=$coll nranks=$NR reason=${NA// /_}" >>"$logf"
    "$PY" "$HERE/report.py" ingest --csv "$OUT/raw.csv" --lib "$lib" --coll "$coll" --dtype "$dtype" \
      --rep "$rep" --nranks "$NR" --rc 0 --log "$logf" --load "" --busy ""
    return
  fi
  wait_quiet
  load=$(cut -d' ' -f1 /proc/loadavg)
  while read -r first last it wu; do
    bench_cmd "$lib" "$coll" "$dtype" "$first" "$last" "$it" "$wu"
    if [ ${#CMD[@]} -eq 0 ]; then
      echo "$lib: benchmark for $coll not built" >>"$logf"
      rc=127
      break
    fi
    echo "# command: ${CMD[*]}" >>"$logf"
    timeout -k 10 "$TMO" "${CMD[@]}" </dev/null >>"$logf" 2>&1 &
    CHILD=$!
    wait "$CHILD"
    r=$?
    CHILD=
    [ "$r" -ne 0 ] && { rc=$r; break; }
  done <<<"$BANDS"
  "$PY" "$HERE/report.py" ingest --csv "$OUT/raw.csv" --lib "$lib" --coll "$coll" --dtype "$dtype" \
    --rep "$rep" --nranks "$NR" --rc "$rc" --log "$logf" --load "$load" --busy "$BUSY"
}

for rep in $(seq 1 "$REPS"); do
  run_membw "$rep"
  run_linelat "$rep"
  for coll in $COLLS; do
    for dtype in $DTYPES; do
      if [ "$DTYPES" = float ]; then log "repetition $rep/$REPS, $coll"; else log "repetition $rep/$REPS, $coll, $dtype"; fi
      for lib in $LIBS; do
        run_one "$lib" "$coll" "$dtype" "$rep"
      done
    done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
if [ -s "$OUT/linelat.txt" ]; then
  # Every repetition's too: on a virtual machine the two CPUs can move
  # between sittings and within one (for example 47 ns one minute, 200 the next).
  ll_all=$(sed -n 's/.*ns_per_exchange=\([0-9.]*\).*/\1/p' "$OUT/linelat.txt")
  echo "cache-line exchange between CPUs 0 and 1 (linelat, best repetition's median; the floor of a 2-rank 8 B AllReduce): $(sort -g <<<"$ll_all" | head -1) ns (each repetition's: $(paste -sd, <<<"$ll_all" | sed 's/,/, /g') ns)" >>"$OUT/meta.txt"
fi

# ---- 6. Report --------------------------------------------------------------
"$PY" "$HERE/report.py" report --dir "$OUT" || { log "report failed"; exit 1; }
log "done: $OUT/results.md, $OUT/*.png, raw data in $OUT/raw.csv, logs in $OUT/logs/"
