#!/usr/bin/env bash
# An image of one command on Debian: Debian bookworm's essential set plus a package list
# (debianRootfs.sh), the command copied to DEST and made the entrypoint (ociImage.sh). The lab's
# flannel image and the control plane's kube-proxy image are each one of these.
#
#   scripts/image/debianImage.sh BINARY DEST PACKAGES_FILE OUT.tar REF EPOCH LOG
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 7 ] || { echo "usage: $0 BINARY DEST PACKAGES_FILE OUT.tar REF EPOCH LOG" >&2; exit 2; }
binary=$1 dest=$2 packages=$3 out=$4 ref=$5 epoch=$6 log=$7
"$binary" --version >/dev/null
# shellcheck source=SCRIPTDIR/debianRootfs.sh
. "$here/debianRootfs.sh"
rootfs=$(mktemp -d "${TMPDIR:-/tmp}/$(basename "$binary")-rootfs.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT
rmdir "$rootfs"
export SOURCE_DATE_EPOCH=$epoch
debian_rootfs "$rootfs" "$log" "$packages"
"$here/ociImage.sh" --rootfs "$rootfs" --add "$binary:$dest" --out "$out" --ref "$ref" \
  --timestamp "$epoch" --entrypoint "[\"$dest\"]"
