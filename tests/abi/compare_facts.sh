#!/usr/bin/env bash
#
# compare_facts.sh — compares the facts of an older NVIDIA header with
# weft's, allowing exactly the differences a list names.
#
# Usage: tests/abi/compare_facts.sh SECTION LIST OLD_FACTS WEFT_FACTS
#
# OLD_FACTS and WEFT_FACTS are outputs of abi_facts.c or device_facts.cu:
# one fact a line, its name first (the text up to the first space outside
# parentheses), then its value. LIST (differences_from_<release>.txt) has
# lines "SECTION | fact | old value | weft's value | why", "-" for a fact a
# header does not have; only lines of SECTION count. Passes when every fact
# that differs is listed with exactly those two values, and every listed
# fact does differ (a stale entry fails too, so the list stays the truth).
# Prints each offence; exits 0 on pass, 1 on failure, 2 on bad usage.

set -euo pipefail

if [ $# -ne 4 ]; then
  echo "usage: $0 SECTION LIST OLD_FACTS WEFT_FACTS" >&2
  exit 2
fi
for f in "$2" "$3" "$4"; do
  [ -f "$f" ] || { echo "compare_facts: no such file: $f" >&2; exit 2; }
done

awk -v section="$1" '
  # The name of a fact: up to the first space outside parentheses.
  function key(line,   i, c, depth) {
    depth = 0
    for (i = 1; i <= length(line); i++) {
      c = substr(line, i, 1)
      if (c == "(") depth++
      else if (c == ")") depth--
      else if (c == " " && depth == 0) return substr(line, 1, i - 1)
    }
    return line
  }
  function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
  FNR == 1 { file++ }
  file == 1 {
    if ($0 ~ /^[ \t]*(#|$)/) next
    n = split($0, part, /\|/)
    if (n < 5) { printf "compare_facts: %s:%d: not \"section | fact | old | new | why\"\n", FILENAME, FNR; bad++; next }
    if (trim(part[1]) != section) next
    k = trim(part[2])
    if (k in listed) { printf "compare_facts: %s lists %s twice\n", FILENAME, k; bad++ }
    listed[k] = 1; want_old[k] = trim(part[3]); want_new[k] = trim(part[4])
    next
  }
  {
    k = key($0)
    v = length($0) > length(k) ? substr($0, length(k) + 2) : ""
    if (file == 2) old[k] = v; else new[k] = v
    if (!(k in seen)) { seen[k] = 1; order[++nkeys] = k }
  }
  END {
    for (k in listed) if (!(k in seen)) { seen[k] = 1; order[++nkeys] = k }
    for (i = 1; i <= nkeys; i++) {
      k = order[i]
      o = (k in old) ? old[k] : "-"
      w = (k in new) ? new[k] : "-"
      if (o == w) {
        if (k in listed) { printf "stale: %s is listed as changed, but is %s in both\n", k, o; bad++ }
      } else if (!(k in listed)) {
        printf "unlisted difference: %s: %s -> %s\n", k, o, w; bad++
      } else if (want_old[k] != o || want_new[k] != w) {
        printf "listed as %s: %s -> %s, but is %s -> %s\n", k, want_old[k], want_new[k], o, w; bad++
      } else {
        allowed++
      }
    }
    printf "compare_facts: %s: %d facts, %d differ as listed, %d offence(s)\n", section, nkeys, allowed, bad
    exit (bad > 0 ? 1 : 0)
  }
' "$2" "$3" "$4"
