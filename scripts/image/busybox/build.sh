#!/usr/bin/env bash
# The lab's small userland image: Debian's static busybox (busybox-static, from APT_PACKAGES) with a
# link per applet in /bin, so a pod has a shell, an HTTP server (the demo web app's) and the usual
# commands, all from one file. The node tests use it too.
#
#   scripts/image/busybox/build.sh OUT.tar REF EPOCH
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 3 ] || { echo "usage: $0 OUT.tar REF EPOCH" >&2; exit 2; }
out=$1 ref=$2 epoch=$3 busybox=/bin/busybox
rootfs=$(mktemp -d "${TMPDIR:-/tmp}/busybox-rootfs.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT
mkdir "$rootfs/bin" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
cp "$busybox" "$rootfs/bin/busybox"
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$rootfs/bin/$applet"
done
"$here/../ociImage.sh" --rootfs "$rootfs" --out "$out" --ref "$ref" --timestamp "$epoch" \
  --entrypoint '["/bin/sh"]'
