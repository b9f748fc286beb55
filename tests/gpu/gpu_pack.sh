#!/usr/bin/env bash
#
# gpu_pack.sh — packs what tests/gpu/gpu_check.sh needs on a GPU machine that
# cannot build it: nccl-tests built against weft, the shared libraries weft
# links, and a relocatable Open MPI, in one compressed archive.
#
# Usage: tests/gpu/gpu_pack.sh PATH_TO_NCCL_TESTS [ARCHIVE]   (.gpu-carry/gc.tar.xz)
#
# Why: a lent GPU machine has no network, no hwloc/libxml2/libnuma headers
# and no mpirun. Without mpirun nccl-tests runs only as threads, and its
# thread mode wants one GPU per thread, so on a one-GPU machine it gets no
# further than one rank. Its MPI build, with NCCL_TESTS_DEVICE=0, puts every
# process on GPU 0; Debian's Open MPI runs from any folder once OPAL_PREFIX
# (and PMIx's PMIX_PREFIX and component path) point there.
#
# The archive holds:
#   *_perf            nccl-tests (tests/gpu/nccl_tests_build.sh);
#   tests/            test_cuda_stream, for WEFT_TEST_REAL_CUDA=1 on the GPU;
#   mpi/*_perf_mpi    the same built with MPI=1 (when mpicc is here);
#   lib/              libraries weft, the test (Criterion) and Open MPI link
#                     beyond glibc (gpu_check.sh uses only those the
#                     machine's ldconfig does not know);
#   ompi/             Debian's openmpi-bin, libopenmpi3, openmpi-common and
#                     libpmix2 files, /usr and / stripped (when installed).
# With Open MPI it then checks the staged copy: a two-process MPI_Allreduce
# under the staged mpirun, in a mount namespace where the system's Open MPI
# and PMIx files are hidden (root and unshare needed; skipped otherwise).
# Weft's own build/lib and build/bin travel beside the archive (run's carry).
# Fetches nothing; installs nothing (apt-get install openmpi-bin
# libopenmpi-dev first for the MPI parts). Last line: "gpu pack: PASS|FAIL ...".

set -euo pipefail

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 PATH_TO_NCCL_TESTS [ARCHIVE]" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tests=$1
archive=${2:-$root/.gpu-carry/gc.tar.xz}
work=$(mktemp -d /tmp/weft-gpu-pack.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
stage=$work/gc
mkdir -p "$stage/lib"
fail() { echo "gpu pack: FAIL $*"; exit 1; }
colls="all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv"

# 1. nccl-tests, plain and with MPI.
"$root/tests/gpu/nccl_tests_build.sh" "$tests" "$work/nt" >"$work/nt.log" 2>&1 || { tail -3 "$work/nt.log"; fail "nccl-tests build"; }
for c in $colls; do cp "$work/nt/build/${c}_perf" "$stage/"; done
mpi=no
if command -v mpicc >/dev/null && mpicc -showme:incdirs >/dev/null 2>&1; then
  mpihome=$(dirname "$(mpicc -showme:incdirs | awk '{print $1}')")
  NCCL_TESTS_MAKE_ARGS="MPI=1 MPI_HOME=$mpihome NAME_SUFFIX=_mpi" "$root/tests/gpu/nccl_tests_build.sh" "$tests" \
    "$work/nt-mpi" >"$work/nt-mpi.log" 2>&1 || { tail -3 "$work/nt-mpi.log"; fail "nccl-tests MPI build"; }
  mkdir -p "$stage/mpi"
  for c in $colls; do cp "$work/nt-mpi/build/${c}_perf_mpi" "$stage/mpi/"; done
  mpi=yes
fi

if [ $mpi = yes ] && ! dpkg -s openmpi-bin libopenmpi3 libpmix2 >/dev/null 2>&1; then
  mpi="no (mpicc is not Debian's Open MPI)"
  rm -rf "$stage/mpi"
fi

# 2. Shared libraries beyond glibc that weft (and Open MPI's launcher) link.
need() { ldd "$@" 2>/dev/null | awk '$3 ~ /^\// {print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' || true; }
test_bin=$root/build/tests/multirank/test_cuda_stream  # run with WEFT_TEST_REAL_CUDA=1 there
[ -x "$test_bin" ] || fail "no $test_bin (make test builds it)"
mkdir -p "$stage/tests" && cp "$test_bin" "$stage/tests/"
libs="$(need "$root/build/lib/libnccl.so.2") $(need "$test_bin")"
if [ "$mpi" = yes ]; then libs="$libs $(need "$(readlink -f "$(command -v orterun)")" /usr/lib/x86_64-linux-gnu/libmpi.so.40)"; fi
for l in $(echo $libs | tr ' ' '\n' | sort -u); do
  case $l in *openmpi*|*libmpi*|*libopen-*|*pmix*|"$root"/*) continue ;; esac  # in ompi/, or weft's own
  cp -L "$l" "$stage/lib/"
done

# 3. Open MPI, relocatable.
if [ "$mpi" = yes ]; then
  for p in openmpi-bin libopenmpi3 openmpi-common libpmix2; do
    dpkg -L $p | while read -r f; do
      { [ -f "$f" ] || [ -L "$f" ]; } || continue
      case $f in /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/*) continue ;; esac
      rel=${f#/usr/}
      [ "$rel" = "$f" ] && rel=${f#/}
      mkdir -p "$stage/ompi/$(dirname "$rel")"
      cp -a "$f" "$stage/ompi/$rel"
    done
  done
  ln -sf orterun "$stage/ompi/bin/mpirun"  # Debian names it through the alternatives system
  cat >"$work/mpi_hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int rank, size, mine, sum = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  mine = rank + 1;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("mpi check: %d ranks, sum %d\n", size, sum);
  MPI_Finalize();
  return sum == size * (size + 1) / 2 ? 0 : 1;
}
EOF
  mpicc -o "$work/mpi_hello" "$work/mpi_hello.c"
  if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
    cat >"$work/hidden.sh" <<'EOF'
set -e
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi; do
  mount -t tmpfs none "$d"
done
for p in openmpi-bin libopenmpi3 libpmix2; do
  dpkg -L $p | while read -r f; do if [ -f "$f" ] && [ ! -L "$f" ]; then mount --bind /dev/null "$f"; fi; done
done
. "$1/mpi_env.sh" "$2"
shift 2
"$@"
EOF
    cp "$root/tests/gpu/mpi_env.sh" "$work/"
    got=$(unshare -m bash "$work/hidden.sh" "$work" "$stage/ompi" \
      mpirun --allow-run-as-root --oversubscribe -np 2 "$work/mpi_hello" 2>&1) || fail "staged Open MPI: $got"
    [ "$got" = "mpi check: 2 ranks, sum 3" ] || fail "staged Open MPI printed more than its result: $got"
    echo "== staged Open MPI ran 2 processes with the system's copy hidden"
  else
    echo "== staged Open MPI not checked (needs root and unshare)"
  fi
fi

mkdir -p "$(dirname "$archive")"
tar -cJf "$archive" -C "$stage" .
count() { find "$1" -maxdepth 1 -name "$2" 2>/dev/null | wc -l; }
echo "gpu pack: PASS $archive ($(du -h "$archive" | cut -f1)): $(count "$stage" '*_perf') nccl-tests," \
  "$(count "$stage/mpi" '*_perf_mpi') MPI builds, $(count "$stage/lib" '*.so*') libraries, Open MPI: $mpi"
