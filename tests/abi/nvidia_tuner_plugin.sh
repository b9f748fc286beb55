#!/usr/bin/env bash
#
# nvidia_tuner_plugin.sh — NVIDIA's own example tuner plugin, built unmodified from
# its sources, loaded into weft.
#
# Usage: tests/abi/nvidia_tuner_plugin.sh BUILD_DIR
#
# Needs a copy of NVIDIA/nccl's sources: $NCCL_SRC (a checkout, or any
# folder with its plugins/ tree). Without one it prints "SKIP: <reason>"
# and exits 0. With one it builds plugins/tuner/example/plugin.c as NVIDIA's
# Makefile does (cc -Inccl -fPIC -shared), checks which tuner versions it
# exports, and runs a 2-rank AllReduce sweep under weftrun with it and its
# sample configuration: weft must load it at its newest version (v6) and
# every result must be exact. Exits 1 on a failure, 2 on bad usage.
set -uo pipefail

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
src=${NCCL_SRC:-}
example=$src/plugins/tuner/example
if [ -z "$src" ] || [ ! -f "$example/plugin.c" ]; then
  echo "SKIP: NVIDIA's plugin sources not found (set NCCL_SRC to an NVIDIA/nccl checkout)"
  exit 0
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/weft-nvplugins.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT

fail=0
so=$out/libnccl-tuner-nvidia-example.so
if ! (cd "$example" && ${CC:-cc} -Inccl -fPIC -shared -o "$so" plugin.c) >"$out/build.log" 2>&1; then
  echo "FAIL: NVIDIA's example tuner does not build"; sed 's/^/    /' "$out/build.log"; exit 1
fi
symbols=$(nm -D --defined-only "$so" | awk '/ncclTunerPlugin_v/ {print $3}' | sort | tr '\n' ' ')
echo "NVIDIA's example tuner exports: $symbols"

conf=$example/nccl_tuner.conf
# The logs go to files of their own, so that they do not break the result table's lines.
NCCL_TUNER_PLUGIN=$so NCCL_TUNER_CONFIG_FILE=$conf NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING NCCL_DEBUG_FILE=$out/log.%p \
  timeout 120 "$build/bin/weftrun" -n 2 -t 100 "$build/bin/all_reduce_perf" -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 \
  >"$out/run.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  echo "FAIL: all_reduce_perf with NVIDIA's example tuner exited $rc"; tail -20 "$out/run.log" | sed 's/^/    /'; fail=1
fi
loaded=$(cat "$out"/log.* 2>/dev/null | grep -c "tuner plugin 'Example' loaded (ncclTunerPlugin_v6)")
if [ "$loaded" -ne 2 ]; then
  echo "FAIL: $loaded of 2 ranks loaded it at v6"; cat "$out"/log.* 2>/dev/null | grep -i 'tuner' | head -5 | sed 's/^/    /'
  fail=1
fi
wrong=$(awk '/^ *[0-9]+ +[0-9]+ +[a-z]/ && ($9 != 0 || $13 != 0) {n++} END {print n + 0}' "$out/run.log")
sizes=$(grep -cE '^ *[0-9]+ +[0-9]+ +[a-z]' "$out/run.log")
if [ "$sizes" -lt 6 ]; then
  echo "FAIL: only $sizes sizes ran"; fail=1
fi
if [ "$wrong" -ne 0 ]; then
  echo "FAIL: $wrong sizes with wrong elements"; fail=1
fi
[ $fail -eq 0 ] && echo "PASS: NVIDIA's example tuner (unmodified) loads at v6 and every AllReduce is exact"
exit $fail
