#!/usr/bin/env bash
#
# nvidia_net_plugin.sh — NVIDIA's own example net plugin, built unmodified
# from its sources, against weft.
#
# Usage: tests/abi/nvidia_net_plugin.sh BUILD_DIR
#
# Needs a copy of NVIDIA/nccl's sources: $NCCL_SRC (a checkout, or any
# folder with its plugins/ tree). Without one it prints "SKIP: <reason>"
# and exits 0. With one it
#  - builds plugins/net/example/plugin.c as NVIDIA's Makefile does
#    (cc -Inccl -fPIC -shared) and lists the ncclNetPlugin_vN it exports;
#  - compares weft's declarations of the net plugin ABI, versions 6 to 12
#    (plugins/net/net_abi.h), with the headers NVIDIA ships beside that
#    example: net_abi_facts.c built against each must print the same
#    sizes, offsets and call types;
#  - runs a 2-rank AllReduce sweep under weftrun with the plugin named by
#    its path (NCCL_NET_PLUGIN) and shared memory off, so the network is
#    needed. NVIDIA's example is a stub whose devices() finds no device and
#    whose other calls fail, so no data can cross it: weft must bind it at
#    its newest version (v12), initialise it, find it has no device, WARN
#    and fall back to its built-in Socket network, as NCCL falls back when
#    a plugin offers no device, and every result must be exact. The same
#    runs, smaller, with WEFT_NET_PLUGIN_VERSION=N binding each older
#    export weft knows (v6 to v11).
# Exits 1 on a failure, 2 on bad usage.
set -uo pipefail

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
src=${NCCL_SRC:-}
example=$src/plugins/net/example
if [ -z "$src" ] || [ ! -f "$example/plugin.c" ] || [ ! -f "$example/nccl/net.h" ]; then
  echo "SKIP: NVIDIA's net plugin example not found (set NCCL_SRC to an NVIDIA/nccl checkout)"
  exit 0
fi
for prog in weftrun all_reduce_perf; do
  if [ ! -x "$build/bin/$prog" ]; then
    echo "FAIL: $build/bin/$prog is not built"; exit 1
  fi
done
out=$(mktemp -d "${TMPDIR:-/tmp}/weft-nvnet.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
cc=${CC:-cc}
fail=0

# NVIDIA's example, as its Makefile builds it.
so=$out/libnccl-net-nvidia-example.so
if ! (cd "$example" && $cc -Inccl -fPIC -shared -o "$so" plugin.c) >"$out/build.log" 2>&1; then
  echo "FAIL: NVIDIA's example net plugin does not build"; sed 's/^/    /' "$out/build.log"; exit 1
fi
symbols=$(nm -D --defined-only "$so" | awk '/ncclNetPlugin_v/ {print $3}' | sort -t v -k 2 -n | tr '\n' ' ')
echo "NVIDIA's example net plugin exports: $symbols"
if ! grep -qw ncclNetPlugin_v12 <<<"$symbols"; then
  echo "FAIL: it does not export ncclNetPlugin_v12"; fail=1
fi

# The ABI as weft declares it and as NVIDIA's headers do.
if ! $cc -std=c11 -Wall -Wextra -Werror -I"$root/include" -I"$root/plugins/net" -o "$out/facts_weft" \
       "$root/tests/abi/net_abi_facts.c" >"$out/facts.log" 2>&1 ||
   ! $cc -std=c11 -DWEFT_NET_FACTS_NVIDIA -I"$example/nccl" -o "$out/facts_nvidia" \
       "$root/tests/abi/net_abi_facts.c" >>"$out/facts.log" 2>&1; then
  echo "FAIL: net_abi_facts.c does not build"; sed 's/^/    /' "$out/facts.log"; fail=1
else
  "$out/facts_weft" >"$out/facts_weft.txt"; rc_weft=$?
  "$out/facts_nvidia" >"$out/facts_nvidia.txt"; rc_nvidia=$?
  if [ $rc_weft -ne 0 ] || [ $rc_nvidia -ne 0 ]; then
    echo "FAIL: a call's type differs from its signature (weft: exit $rc_weft, NVIDIA: exit $rc_nvidia)"
    grep -h MISMATCH "$out"/facts_*.txt | head -10 | sed 's/^/    /'; fail=1
  fi
  if ! diff -u "$out/facts_nvidia.txt" "$out/facts_weft.txt" >"$out/facts.diff"; then
    echo "FAIL: weft's net_abi.h differs from NVIDIA's headers:"; head -30 "$out/facts.diff" | sed 's/^/    /'
    fail=1
  else
    echo "net plugin ABI v6..v12: $(wc -l <"$out/facts_weft.txt") facts identical in weft's and NVIDIA's headers"
  fi
fi

# Count the ranks (log files) of run folder $1 with a line containing $2.
ranks_with() {
  local n=0 f
  for f in "$1"/log.*; do
    [ -f "$f" ] && grep -qF -- "$2" "$f" && n=$((n + 1))
  done
  echo $n
}

# One run: $1 the version cap (0: none), $2 the version weft must bind,
# $3 the largest size of the sweep.
run_with() {
  local cap=$1 want=$2 top=$3 dir=$out/run.v$2 bad=0
  mkdir -p "$dir"
  # The logs go to files of their own, so that they do not break the result table's lines.
  NCCL_NET_PLUGIN=$so WEFT_NET_PLUGIN_VERSION=$cap NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} \
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_DEBUG_FILE=$dir/log.%p \
    timeout 120 "$build/bin/weftrun" -n 2 -t 100 "$build/bin/all_reduce_perf" -b 8 -e "$top" -f 8 -n 3 -w 1 -c 1 \
    >"$dir/run.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL: v$want: all_reduce_perf exited $rc"; tail -20 "$dir/run.log" | sed 's/^/    /'; bad=1
  fi
  local expect
  for expect in "NET/Plugin: loaded $so: network Plugin, ABI v$want" \
                "NCCL WARN net plugin Plugin: no network devices" \
                "NCCL WARN NET/Plugin: Plugin could not start; falling back to the built-in Socket network" \
                "NET: using network Socket"; do
    local n
    n=$(ranks_with "$dir" "$expect")
    if [ "$n" -ne 2 ]; then
      echo "FAIL: v$want: $n of 2 ranks logged \"$expect\""; bad=1
    fi
  done
  if [ $bad -ne 0 ]; then
    cat "$dir"/log.* 2>/dev/null | grep -E 'NET|WARN' | head -8 | sed 's/^/    /'
  fi
  local sizes wrong
  sizes=$(grep -cE '^ *[0-9]+ +[0-9]+ +[a-z]' "$dir/run.log")
  wrong=$(awk '/^ *[0-9]+ +[0-9]+ +[a-z]/ && ($9 != 0 || $13 != 0) {n++} END {print n + 0}' "$dir/run.log")
  if [ "$sizes" -lt 4 ]; then
    echo "FAIL: v$want: only $sizes sizes ran"; bad=1
  fi
  if [ "$wrong" -ne 0 ]; then
    echo "FAIL: v$want: $wrong sizes with wrong elements"; bad=1
  fi
  [ $bad -eq 0 ] && echo "v$want: bound, no device found, fell back to Socket; $sizes AllReduce sizes exact"
  return $bad
}

run_with 0 12 4M || fail=1
for v in 6 7 8 9 10 11; do
  run_with "$v" "$v" 64K || fail=1
done

[ $fail -eq 0 ] && echo "PASS: NVIDIA's example net plugin (unmodified) has weft's ABI, loads at v12" \
  "(v6..v11 when capped), and weft falls back cleanly from its empty device list"
exit $fail
