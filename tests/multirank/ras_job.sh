#!/usr/bin/env bash
# ras_job.sh — sourced by the RAS tests: one job of ras_rank (its counts
# known) on this host, with a RAS client port of its own, and its end.
#
#   ras_job_start BUILD_DIR NRANKS    # sets ras_dir, ras_runner; exports NCCL_RAS_ADDR
#   ras_pid RANK                      # the rank's process id
#   ras_wait_files PREFIX N           # until N files ras_dir/PREFIX.* exist (30 s at most)
#   ras_job_end                       # lets the ranks finish, stops what is left
#   ras_expect WHAT TEXT REGEX        # "ok: WHAT", or "FAIL: ..." with TEXT, counted in ras_fails
#   ras_ok WHAT / ras_bad WHAT        # a check's outcome said (and a failure counted)
#
# The port is a free one picked now, not 28028, so that jobs of other
# tests on this machine (which would share 28028 with this one) stay apart.

ras_fails=0
ras_ok() { echo "ok: $1"; }
ras_bad() {
  echo "FAIL: $1"
  ras_fails=$((ras_fails + 1))
}
ras_expect() {
  if grep -Eq -- "$3" <<<"$2"; then
    ras_ok "$1"
  else
    ras_bad "$1 (no /$3/ in:)"
    sed 's/^/    /' <<<"$2" | head -60
  fi
}

ras_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

ras_wait_files() {  # prefix count
  for _ in $(seq 300); do
    [ "$(ls "$ras_dir"/"$1".* 2>/dev/null | wc -l)" -ge "$2" ] && return 0
    sleep 0.1
  done
  echo "FAIL: only $(ls "$ras_dir"/"$1".* 2>/dev/null | wc -l) of $2 $1 files after 30 s"
  return 1
}

ras_job_start() {  # build nranks
  ras_dir=$(mktemp -d "${TMPDIR:-/tmp}/weft-ras.XXXXXX") || return 1
  NCCL_RAS_ADDR=127.0.0.1:$(ras_free_port)
  export NCCL_RAS_ADDR
  "$1/bin/weftrun" -n "$2" --keep-going -t 110 "$1/tests/progs/ras_rank" "$ras_dir" >"$ras_dir/job.log" 2>&1 &
  ras_runner=$!
  ras_wait_files pid "$2"
}

ras_pid() { cat "$ras_dir/pid.$1"; }

ras_job_end() {
  [ -n "${ras_dir:-}" ] || return 0
  touch "$ras_dir/go" "$ras_dir/end"
  for r in "$ras_dir"/pid.*; do kill -CONT "$(cat "$r")" 2>/dev/null; done
  for _ in $(seq 300); do kill -0 "$ras_runner" 2>/dev/null || break; sleep 0.1; done
  kill -TERM "$ras_runner" 2>/dev/null
  wait "$ras_runner" 2>/dev/null
  rm -rf "$ras_dir"
  ras_dir=
}
