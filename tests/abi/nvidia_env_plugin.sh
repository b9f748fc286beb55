#!/usr/bin/env bash
#
# nvidia_env_plugin.sh — NVIDIA's own example env plugin, built unmodified
# from its sources, loaded into weft.
#
# Usage: tests/abi/nvidia_env_plugin.sh BUILD_DIR
#
# Needs a copy of NVIDIA/nccl's sources: $NCCL_SRC (a checkout, or any
# folder with its plugins/ tree). Without one it prints "SKIP: <reason>"
# and exits 0. With one it builds plugins/env/example/plugin.c as NVIDIA's
# Makefile does (cc -Inccl -fPIC -shared), checks that it exports
# ncclEnvPlugin_v2, and runs a 2-rank AllReduce sweep under weftrun with
# NCCL_ENV_PLUGIN naming it: every rank must load it at v2, its init must
# log its line through weft's logger (with the version of weft's nccl.h),
# a knob set in the environment must reach weft through it (its getEnv is
# getenv), and every result must be exact. weft-env then shows the same
# knob's value. Exits 1 on a failure, 2 on bad usage.
set -uo pipefail

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
header=$(cd "$(dirname "$0")/../.." && pwd)/include/nccl.h
src=${NCCL_SRC:-}
example=$src/plugins/env/example
if [ -z "$src" ] || [ ! -f "$example/plugin.c" ]; then
  echo "SKIP: NVIDIA's env plugin sources not found (set NCCL_SRC to an NVIDIA/nccl checkout with plugins/env/example)"
  exit 0
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/weft-nvenv.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT

fail=0
so=$out/libnccl-env-nvidia-example.so
# NVIDIA's Makefile: $(CC) -Inccl -fPIC -shared -o $@ $(wildcard *.c), in the example's folder.
if ! (cd "$example" && ${CC:-cc} -Inccl -fPIC -shared -o "$so" ./*.c) >"$out/build.log" 2>&1; then
  echo "FAIL: NVIDIA's example env plugin does not build"; sed 's/^/    /' "$out/build.log"; exit 1
fi
symbols=$(nm -D --defined-only "$so" | awk '/ncclEnvPlugin_v/ {print $3}' | sort | tr '\n' ' ')
echo "NVIDIA's example env plugin exports: $symbols"
case " $symbols " in
  *" ncclEnvPlugin_v2 "*) ;;
  *) echo "FAIL: it does not export ncclEnvPlugin_v2"; exit 1 ;;
esac

version=$(awk '$1 == "#define" && $2 ~ /^NCCL_(MAJOR|MINOR|PATCH)$/ {v = v (v == "" ? "" : ".") $3} END {print v}' "$header")

# The logs go to files of their own (one per process), so that they do not break the result table's lines.
NCCL_ENV_PLUGIN=$so NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_DEBUG_FILE=$out/log.%p WEFT_TIMEOUT=77 \
  timeout 120 "$build/bin/weftrun" -n 2 -t 100 "$build/bin/all_reduce_perf" -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 \
  >"$out/run.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  echo "FAIL: all_reduce_perf with NVIDIA's example env plugin exited $rc"; tail -20 "$out/run.log" | sed 's/^/    /'; fail=1
fi
# Each rank logs with its rank from its communicator's set-up on: "[0] NCCL", "[1] NCCL".
for rank in 0 1; do
  log=$(grep -l "\[$rank\] NCCL INFO" "$out"/log.* 2>/dev/null | head -1)
  if [ -z "$log" ]; then
    echo "FAIL: no log of rank $rank"; fail=1; continue
  fi
  for line in "ENV/Plugin: ncclEnvExample initialized for NCCL $version" \
              "env plugin 'ncclEnvExample' loaded from $so (ncclEnvPlugin_v2, version 2)" \
              "WEFT_TIMEOUT set by env plugin 'ncclEnvExample' to 77" \
              "env plugin 'ncclEnvExample' finalized"; do
    n=$(grep -cF "$line" "$log")
    if [ "$n" -ne 1 ]; then
      echo "FAIL: rank $rank logged \"$line\" $n times, not once"; fail=1
    fi
  done
done
wrong=$(awk '/^ *[0-9]+ +[0-9]+ +[a-z]/ && ($9 != 0 || $13 != 0) {n++} END {print n + 0}' "$out/run.log")
sizes=$(grep -cE '^ *[0-9]+ +[0-9]+ +[a-z]' "$out/run.log")
if [ "$sizes" -lt 6 ]; then
  echo "FAIL: only $sizes sizes ran"; fail=1
fi
if [ "$wrong" -ne 0 ]; then
  echo "FAIL: $wrong sizes with wrong elements"; fail=1
fi

# The knob as weft reads it, through the plugin (weft-env prints every knob's value).
value=$(NCCL_ENV_PLUGIN=$so WEFT_TIMEOUT=77 timeout 30 "$build/bin/weft-env" | awk '$1 == "WEFT_TIMEOUT" {print $2}')
if [ "$value" != 77 ]; then
  echo "FAIL: weft-env with the plugin reads WEFT_TIMEOUT as '$value', not 77"; fail=1
fi

[ $fail -eq 0 ] && echo "PASS: NVIDIA's example env plugin (unmodified) loads at v2, logs through weft's logger, and the environment reaches weft through it"
exit $fail
