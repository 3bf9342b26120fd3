#!/usr/bin/env bash
# Builds the LB pod's BGP speaker (and route reflector): Debian's BIRD (the bird2 source package:
# upstream's tarball plus Debian's patches, the same configure flags) with three patches of ours:
#   connect-delay-zero.patch      Stock BIRD waits 0.75-1 s before a new session's first connect,
#                                 whatever `connect delay time` says; with it, 0 means at once, which
#                                 lets a starting LB pod join the ECMP set well under the 300 ms p50.
#   bfd-peer-session-restart.patch  A BFD session still Up when its peer restarted the session (a
#                                 hung speaker resuming) goes Down at the peer's first packet instead
#                                 of ~3 s later, which reset the BGP session that had come back.
#   socket-priority-fallback.patch  BFD asks for socket priority 7, which needs CAP_NET_ADMIN (or
#                                 CAP_NET_RAW from Linux 5.17); without, every BFD socket failed
#                                 and no BFD session came up. It now takes 6 and says so once.
# Built once by scripts/bootstrap/bird.sh into the tool cache; the tests run that build and the LB
# image carries it (lb-image/image/build.sh), so both run the same bytes.
#
#   lb-image/bird/build.sh PREFIX DESTDIR
#
# PREFIX is where the binaries expect to live (/usr in the image, the tool cache for the tests);
# DESTDIR receives PREFIX/sbin/{bird,birdc,birdcl}. Needs curl, gcc, make, flex, bison, patch and
# libreadline-dev; reads BIRD_DEBIAN_* from scripts/versions.env.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/versions.env
. "$here/../../scripts/versions.env"
prefix=$1 destdir=$2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pool=http://deb.debian.org/debian/pool/main/b/bird2
fetch() { # FILE SHA256: download from Debian's pool and refuse anything but the expected bytes
  curl -fsSL --retry 3 -o "$work/$1" "$pool/$1"
  echo "$2  $work/$1" | sha256sum -c --quiet - || {
    echo "bird build: $1 does not match its sha256 in scripts/versions.env" >&2
    exit 1
  }
}
upstream=${BIRD_DEBIAN_VERSION%-*}
fetch "bird2_$upstream.orig.tar.gz" "$BIRD_ORIG_SHA256"
fetch "bird2_$BIRD_DEBIAN_VERSION.debian.tar.xz" "$BIRD_DEBIAN_SHA256"

cd "$work"
tar xzf "bird2_$upstream.orig.tar.gz"
tar xJf "bird2_$BIRD_DEBIAN_VERSION.debian.tar.xz"
cd "bird-$upstream"
while read -r p; do
  case $p in '' | '#'*) continue ;; esac
  patch -p1 --quiet <"../debian/patches/$p"
done <../debian/patches/series
for p in connect-delay-zero bfd-peer-session-restart socket-priority-fallback; do patch -p1 --quiet <"$here/$p.patch"; done

# Debian's flags (debian/rules), so the daemon behaves as the packaged one does.
flags="-g -O2 -fno-strict-aliasing -fno-strict-overflow -fPIC"
CFLAGS="$flags" LDFLAGS="$flags -Wl,-z,defs -Wl,--as-needed" ./configure --quiet \
  --prefix="$prefix" --sysconfdir=/etc/bird --localstatedir=/var --runstatedir=/run/bird \
  --enable-client --with-protocols=all >configure.log
# `prepare` first: BIRD 2.0.12's rule for obj/nest/proto-build.c does not wait for the object
# folders (.dir-stamp), so a parallel make can fail on a missing folder (seen in a cold CI run).
{ make --quiet prepare && make --quiet -j"$(nproc)"; } >make.log 2>&1 || {
  tail -n 20 make.log >&2
  exit 1
}
install -d "$destdir$prefix/sbin"
install -m 755 bird birdc birdcl "$destdir$prefix/sbin/"
