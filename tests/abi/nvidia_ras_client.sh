#!/usr/bin/env bash
#
# nvidia_ras_client.sh — NVIDIA's own RAS client (ncclras), built unmodified
# from its sources, asking a weft job.
#
# Usage: tests/abi/nvidia_ras_client.sh BUILD_DIR
#
# Needs NVIDIA/nccl's sources: $NCCL_SRC (a checkout with src/ras/client.cc).
# Without them it prints "SKIP: <reason>" and exits 0. With them it compiles
# src/ras/client.cc (build_ncclras.sh), starts
# a 4-rank job (tests/multirank/ras_job.sh) and checks what ncclras prints:
# the text report's sections and counts, the JSON (-f json) parses with the
# right counts, a SIGSTOPped rank is reported lagging, and -m prints the
# death of a killed rank. Exits 1 on a failure, 2 on bad usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
. "$here/../multirank/ras_job.sh"
bin=$(mktemp -d "${TMPDIR:-/tmp}/weft-ncclras.XXXXXX") || exit 1
trap 'ras_job_end; rm -rf "$bin"' EXIT
why=$("$here/build_ncclras.sh" "${NCCL_SRC:-}" "$bin/ncclras" 2>"$bin/build.log")
case $? in
  0) ;;
  77) echo "SKIP: $why"; exit 0 ;;
  *) echo "FAIL: NVIDIA's ncclras does not build"; sed 's/^/    /' "$bin/build.log"; exit 1 ;;
esac
echo "built: $("$bin/ncclras" --version 2>&1)"

ras_job_start "$build" 4 || exit 1
host=${NCCL_RAS_ADDR%:*} port=${NCCL_RAS_ADDR##*:}
nras() { timeout 60 "$bin/ncclras" -h "$host" -p "$port" "$@" 2>&1; }

out=$(nras -t 3)
ras_expect "ncclras: the job summary" "$out" "^Job summary"
ras_expect "ncclras: 4 alive processes" "$out" "^ +1 +4 +4 +4 +0 +0 +0$"
ras_expect "ncclras: the world's counts" "$out" "4 ranks: AllReduce 20, Broadcast 1$"
ras_expect "ncclras: errors and warnings sections" "$(grep -c -E '^(Errors|Warnings)$' <<<"$out")" "^2$"
js=$(nras -f json)
if python3 -c "import json,sys; d=json.load(sys.stdin); w=[c for c in d['communicators'] if c['size']==4][0]; sys.exit(0 if d['communicators_count']==3 and all(r['collective_counts']['AllReduce']==20 for r in w['ranks']) else 1)" <<<"$js"; then
  ras_ok "ncclras -f json parses, 20 AllReduce on every rank"; else ras_bad "ncclras -f json"; head -30 <<<"$js"; fi

p1=$(ras_pid 1)
kill -STOP "$p1"
touch "$ras_dir/go"
sleep 0.5
out=$(nras -v -t 5)
ras_expect "ncclras -v: rank 1 lags, stopped" "$out" "rank 1 lags: AllReduce 20, Broadcast 1 -- process $p1 on host [0-9.]+, stopped"
kill -CONT "$p1"
ras_wait_files done 4 || ras_fails=$((ras_fails + 1))

timeout 8 "$bin/ncclras" -h "$host" -p "$port" -m >"$bin/monitor.txt" 2>&1 &
mon=$!
sleep 1.5
# The victim is not the process serving the monitor (the host's processes share the port).
server=$(ss -tnpH state established "( sport = :$port )" | grep -o 'pid=[0-9]*' | head -1)
k=2
[ "$server" = "pid=$(ras_pid 2)" ] && k=3
p2=$(ras_pid $k)
kill -KILL "$p2"
wait "$mon"
ras_expect "ncclras -m: the death" "$(cat "$bin/monitor.txt")" "PEER_DEAD: process $p2 on host"
[ "$ras_fails" -eq 0 ] && echo "nvidia_ras_client: all passed"
[ "$ras_fails" -eq 0 ]
