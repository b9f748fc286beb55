#!/usr/bin/env bash
# test_launch.sh BUILD_DIR — weftrun's multi-host flags and run_job.sh, on
# loopback: no namespaces, no root. A job split over several weftruns must
# behave like one job: the right WEFT_* variables on every rank, one id,
# a working communicator, a failure on one host stopping every host, and
# SIGTERM stopping everything; and SIGUSR1 printing every rank's status.
# The hosts' identity follows
# WEFT_MULTIHOST_MODE (shm: one WEFT_HOSTID for all, net: one per host).
# Prints one line per check and "N passed, M failed"; exits 1 on a failure.
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
export WEFT_BUILD_DIR=$build
weftrun=$build/bin/weftrun
mode=${WEFT_MULTIHOST_MODE:-shm}
passed=0
failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-launch.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

[ -x "$weftrun" ] || { echo "test_launch: $weftrun is missing: build the project first" >&2; exit 1; }

ok() { passed=$((passed + 1)); echo "ok    $*"; }
bad() { failed=$((failed + 1)); echo "FAIL  $*"; }

# ---- weftrun: bad combinations of the new flags are usage errors (exit 2).
usage_case() {  # description args...
  local what=$1 rc
  shift
  timeout 20 "$weftrun" "$@" >"$tmp/out" 2>&1
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q 'usage: weftrun' "$tmp/out"; then
    ok "weftrun $what: usage error"
  else
    bad "weftrun $what: exit $rc, expected 2 with the usage text: $(head -1 "$tmp/out")"
  fi
}
usage_case "--nranks without an id" -n 2 --nranks 4 /bin/true
usage_case "--first-rank past --nranks" -n 2 --nranks 3 --first-rank 2 --id-out "$tmp/x" /bin/true
usage_case "--id that is not an id" -n 1 --id abc /bin/true
usage_case "--id-out with --id-file" -n 1 --id-out "$tmp/x" --id-file "$tmp/x" /bin/true
usage_case "--nranks 0" -n 1 --nranks 0 /bin/true
usage_case "--first-rank -1" -n 1 --first-rank -1 /bin/true
usage_case "--nranks with no value" -n 1 --nranks

timeout 20 "$weftrun" -n 1 --nranks 2 --first-rank 1 --id-file "$tmp/none" /bin/true >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q -- "--id-file $tmp/none" "$tmp/out"; then
  ok "weftrun --id-file of a missing file: exit 1, named"
else
  bad "weftrun --id-file of a missing file: exit $rc: $(head -1 "$tmp/out")"
fi

# ---- --id-out: 256 hex digits and a newline, readable by the owner only.
timeout 20 "$weftrun" -n 1 --id-out "$tmp/id" -t 10 /bin/true >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -qxE '[0-9a-f]{256}' "$tmp/id" && [ "$(wc -l <"$tmp/id")" -eq 1 ] &&
  [ "$(stat -c %a "$tmp/id")" = 600 ]; then
  ok "weftrun --id-out writes the id (mode 600)"
else
  bad "weftrun --id-out: exit $rc, file: $(stat -c '%a %s' "$tmp/id" 2>&1)"
fi

# ---- The environment of a job split 2 + 1 + 3 over three weftruns.
"$here/run_job.sh" -l 2,1,3 -m "$mode" -t 30 -- sh -c \
  'echo "env $WEFT_RANK $WEFT_NRANKS $WEFT_LOCAL_RANK $WEFT_LOCAL_SIZE $(printf %s "$WEFT_UNIQUE_ID" | cksum)"' \
  >"$tmp/env" 2>"$tmp/err"
rc=$?
got=$(grep '^env ' "$tmp/env" | cut -d' ' -f2-5 | sort -n | tr '\n' ';')
want="0 6 0 2;1 6 1 2;2 6 0 1;3 6 0 3;4 6 1 3;5 6 2 3;"
ids=$(grep '^env ' "$tmp/env" | cut -d' ' -f6- | sort -u | wc -l)
if [ "$rc" -eq 0 ] && [ "$got" = "$want" ] && [ "$ids" -eq 1 ]; then
  ok "split job 2,1,3: WEFT_RANK/NRANKS/LOCAL_RANK/LOCAL_SIZE right, one id"
else
  bad "split job 2,1,3: exit $rc, got '$got' (want '$want'), $ids distinct ids"
fi

# ---- A communicator over a job split 2 + 1 + 2.
start=$SECONDS
"$here/run_job.sh" -l 2,1,2 -m "$mode" -t 60 --tag-output "$build/tests/progs/env_allreduce" >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && [ "$(grep -c 'env_allreduce: rank [0-4] of 5 ok' "$tmp/out")" -eq 5 ]; then
  ok "AllReduce over a job split 2,1,2 ($mode mode, $((SECONDS - start)) s)"
else
  bad "AllReduce over a job split 2,1,2 ($mode mode): exit $rc"
  tail -5 "$tmp/out" | sed 's/^/      /'
fi

# ---- A failing rank on host 1 stops every host; its status is the job's.
start=$SECONDS
"$here/run_job.sh" -l 2,2,2 -m "$mode" -t 60 -- sh -c \
  '[ "$WEFT_RANK" != 3 ] || exit 7; exec "$0"' "$build/tests/progs/env_allreduce" >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 7 ] && [ $((SECONDS - start)) -lt 20 ] && grep -q 'host 1 failed' "$tmp/out"; then
  ok "a failing rank on host 1 fails the job with its status, others stopped ($((SECONDS - start)) s)"
else
  bad "a failing rank on host 1: exit $rc after $((SECONDS - start)) s (expected 7, quickly)"
  tail -5 "$tmp/out" | sed 's/^/      /'
fi

# ---- SIGTERM to run_job.sh stops every host and every rank.
mkdir -p "$tmp/pids"
"$here/run_job.sh" -l 2x2 -m "$mode" -t 60 -- sh -c \
  'echo $$ >"$0/$WEFT_RANK"; exec sleep 50' "$tmp/pids" >"$tmp/out" 2>&1 &
job=$!
for ((w = 0; w < 100 && $(ls "$tmp/pids" | wc -l) < 4; w++)); do sleep 0.1; done
kill -TERM "$job"
wait "$job"
rc=$?
alive=""
for f in "$tmp"/pids/*; do
  p=$(cat "$f")
  kill -0 "$p" 2>/dev/null && alive+=" $p"
done
if [ "$rc" -eq 143 ] && [ -z "$alive" ] && [ "$(ls "$tmp/pids" | wc -l)" -eq 4 ]; then
  ok "SIGTERM to run_job.sh stops all 4 ranks on 2 hosts"
else
  bad "SIGTERM to run_job.sh: exit $rc, ranks still alive:${alive:- none}"
  for p in $alive; do kill -KILL "$p" 2>/dev/null; done
fi

# ---- Which rank is hanging: SIGUSR1 to weftrun prints every rank's status.
# Rank 3 of 4 stops itself inside an AllReduce; the others wait for it.
WEFT_TIMEOUT=60 "$weftrun" -t 60 -n 4 --keep-going "$build/tests/progs/fault_rank" -v 3 -s \
  >"$tmp/hang.out" 2>"$tmp/hang.err" &
job=$!
for ((i = 0; i < 100; i++)); do grep -q 'stopping, pid' "$tmp/hang.out" && break; sleep 0.1; done
sleep 0.5  # the others are asleep on the stopped rank by now
kill -USR1 "$job"
for ((i = 0; i < 50; i++)); do [ "$(grep -c 'waiting in AllReduce' "$tmp/hang.err")" -ge 3 ] && break; sleep 0.1; done
stopped=$(grep -o 'stopping, pid [0-9]*' "$tmp/hang.out" | awk '{print $3}')
[ -n "$stopped" ] && kill -KILL "$stopped"
wait "$job"
waiting=$(grep -c 'waiting in AllReduce #[0-9]* .*waiting on rank [0-9]' "$tmp/hang.err")
if [ "$waiting" -ge 3 ] && grep -q 'status of 4 running ranks' "$tmp/hang.err"; then
  ok "SIGUSR1 to weftrun: every waiting rank named the call and the rank it waits on ($waiting of 3)"
else
  bad "SIGUSR1 to weftrun: $waiting ranks reported waiting (want 3): $(head -c 600 "$tmp/hang.err")"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
