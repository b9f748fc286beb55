#!/usr/bin/env bash
#
# check_exports.sh — checks the dynamic symbol table of a built library.
#
# Usage: tests/abi/check_exports.sh LIB.so [HEADER]
#
# Passes when (i) every defined dynamic symbol is an API name, i.e. matches
# ^(p?nccl|weft)[A-Z] (nothing internal leaks), and (ii) every function the
# reference header declares is exported under both ncclX and pncclX. The
# reference header is HEADER if given, else NVIDIA's nccl.h in
# $CUDA_HOME/include (default /usr/local/cuda), else weft's own
# include/nccl.h. HEADER may also be weft's nccl_device.h: its host part is
# read, up to where the CUDA C++ device side begins. Prints each extra or
# missing symbol; exits 0 on pass, 1 on failure, 2 on bad usage.

set -euo pipefail

usage() {
  echo "usage: $0 LIB.so [HEADER]" >&2
  exit 2
}

if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
lib=$1
[ -f "$lib" ] || { echo "check_exports: no such library: $lib" >&2; exit 2; }
command -v nm >/dev/null || { echo "check_exports: nm not found (binutils)" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
header=${2:-}
if [ -z "$header" ]; then
  for h in "${CUDA_HOME:-/usr/local/cuda}/include/nccl.h" "$here/../../include/nccl.h"; do
    if [ -f "$h" ]; then header=$h; break; fi
  done
fi
[ -f "$header" ] || { echo "check_exports: reference header not found: ${header:-(none)}" >&2; exit 2; }

# Defined dynamic symbols: "address type name" (undefined ones are skipped).
symtab=$(nm -D --defined-only "$lib") || { echo "check_exports: cannot read symbols of $lib" >&2; exit 2; }
exports=$(awk 'NF >= 3 { print $3 }' <<<"$symtab" | sed 's/@.*//' | sort -u)
if [ -z "$exports" ]; then
  echo "check_exports: $lib exports no symbols" >&2
  exit 1
fi

# Function names the header declares: strip comments and the device side,
# join continued lines, then take every lower-case nccl identifier directly
# followed by "(" outside preprocessor lines.
declared=$(perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g; s{^#if defined\(__cplusplus\) && defined\(__CUDACC__\).*}{}ms; s{\\\n}{ }g' "$header" |
  grep -v '^[[:space:]]*#' |
  grep -oE '\bp?nccl[A-Z][A-Za-z0-9_]*[[:space:]]*\(' |
  sed -E 's/[[:space:]]*\($//; s/^p//' | sort -u) || true
if [ -z "$declared" ]; then
  echo "check_exports: found no function declarations in $header" >&2
  exit 2
fi

status=0

# (i) nothing but API names.
extra=$(grep -vE '^(p?nccl|weft)[A-Z]' <<<"$exports" || true)
if [ -n "$extra" ]; then
  echo "check_exports: exported symbols that are not API names:"
  sed 's/^/  extra: /' <<<"$extra"
  status=1
fi

# (ii) both names of every declared function.
missing=""
for f in $declared; do
  for name in "$f" "p$f"; do
    grep -qxF "$name" <<<"$exports" || missing+="$name"$'\n'
  done
done
if [ -n "$missing" ]; then
  echo "check_exports: functions of $header not exported:"
  printf '%s' "$missing" | sed 's/^/  missing: /'
  status=1
fi

nfunc=$(wc -w <<<"$declared")
nexp=$(wc -l <<<"$exports")
if [ $status -eq 0 ]; then
  echo "check_exports: ok: $lib exports $nexp symbols; all $nfunc functions of $header under both names"
else
  echo "check_exports: FAIL: $lib ($nexp exported symbols, $nfunc functions declared in $header)"
fi
exit $status
