#!/usr/bin/env bash
# debian13-root.sh ROOT CMD... — runs CMD in a Debian 13 (trixie) root made
# from Debian's own packages, with this repository at /weft as the working
# directory.
#
# weft's torch backend is tested on two PyTorches: Debian 12's 1.13 on the
# machine itself and Debian 13's 2.6 in this root. The root is made once
# (debootstrap minbase, then the packages below through apt inside it) and
# kept at ROOT; it is made again when missing, and a changed package list is
# installed into it (ROOT/.weft-stamp holds the list). Making it takes about
# 2 minutes and 1.9 GiB, most of it PyTorch and its libraries.
#
# CMD runs in a private mount namespace (unshare), so the mounts it needs —
# /proc, /dev, /dev/shm, /sys and the repository — vanish when it ends,
# whatever way it ends. The network namespace is the machine's (loopback
# works as outside); `ip netns` does not work inside the root. Needs root.
set -euo pipefail

root=${1:?usage: debian13-root.sh ROOT CMD...}
shift
[ $# -gt 0 ] || { echo "debian13-root.sh: no command" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
suite=trixie
mirror=${WEFT_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# What the build's dependency check looks for (mk/lib.mk), what `make torch`
# and tests/torch need, and the tools those tests call.
packages=(build-essential pkg-config python3 libcriterion-dev libhwloc-dev libxml2-dev libnuma-dev
  libibverbs-dev libopenblas-dev python3-torch libtorch-dev pybind11-dev python3-dev python3-pytest
  python3-setuptools g++ procps iproute2 util-linux)
stamp="$suite ${packages[*]}"

if [ "$(id -u)" -ne 0 ]; then
  echo "debian13-root.sh: needs root (debootstrap, chroot, mounts)" >&2
  exit 2
fi

# in_root DIR CMD...: CMD in DIR with /proc, /dev, /sys and the repository
# mounted, in a private mount namespace (the mounts vanish with it).
in_root() {
  local dir=$1
  shift
  unshare --mount --propagation private -- /bin/bash -euc '
dir=$1 repo=$2
shift 2
mkdir -p "$dir/weft"
mount --bind "$repo" "$dir/weft"
mount -t proc proc "$dir/proc"
mount --rbind /dev "$dir/dev"
mount --rbind /sys "$dir/sys"
mount -t tmpfs -o mode=1777 tmpfs "$dir/dev/shm"
mount -t tmpfs -o mode=1777 tmpfs "$dir/tmp"
exec chroot "$dir" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
' in-root "$dir" "$repo" "$@"
}

install_packages() {  # DIR: the packages, from Debian's archive, with apt's resolver
  in_root "$1" /bin/sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${packages[*]} && apt-get clean"
}

# A root of the same suite whose package list changed gets the new packages in place.
if [ -f "$root/.weft-stamp" ] && [ "$(cat "$root/.weft-stamp")" != "$stamp" ] &&
   [ "$(cut -d' ' -f1 "$root/.weft-stamp")" = "$suite" ]; then
  echo "debian13-root.sh: the package list changed; installing into $root"
  if install_packages "$root" >"$root.log" 2>&1; then
    echo "$stamp" >"$root/.weft-stamp"
    rm -f "$root.log"
  else
    tail -20 "$root.log" >&2
    echo "debian13-root.sh: apt-get failed in $root (log: $root.log); making it again" >&2
    rm -f "$root/.weft-stamp"
  fi
fi

if [ ! -f "$root/.weft-stamp" ] || [ "$(cat "$root/.weft-stamp")" != "$stamp" ]; then
  command -v debootstrap >/dev/null || {
    echo "debian13-root.sh: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap; }
  }
  echo "debian13-root.sh: making the Debian 13 root at $root (debootstrap $suite, then apt-get)"
  new=$root.new
  rm -rf "$new"
  mkdir -p "$(dirname "$root")"
  start=$SECONDS
  # The base system from debootstrap; the packages from apt inside it, whose
  # resolver handles what debootstrap's does not (virtual packages).
  if ! debootstrap --variant=minbase "$suite" "$new" "$mirror" >"$new.log" 2>&1 ||
     ! install_packages "$new" >>"$new.log" 2>&1; then
    tail -20 "$new.log" >&2
    echo "debian13-root.sh: making the root failed (whole log: $new.log)" >&2
    exit 1
  fi
  echo "$stamp" >"$new/.weft-stamp"
  rm -rf "$root"
  mv "$new" "$root"
  rm -f "$new.log"
  echo "debian13-root.sh: root made in $((SECONDS - start)) s ($(du -sh "$root" | cut -f1))"
fi

in_root "$root" /bin/bash -c 'cd /weft && exec "$@"' cmd "$@"
