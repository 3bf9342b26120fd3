#!/usr/bin/env bash
# Turns a root filesystem, some files and an image config into an OCI image archive, daemonless and
# reproducibly: buildah with vfs storage in a temporary folder of its own (removed on exit; nothing in
# the host's /var/lib/containers), `from scratch`, the files copied in with their owners and modes, the
# config set, then committed with one timestamp for the image, its history and every file, so the
# same inputs give the same digest. Every image we build (the LB image, the lab's pause image, ...)
# goes through here.
#
#   scripts/image/ociImage.sh --out FILE --ref NAME --timestamp EPOCH [--rootfs DIR] [--add SRC:DEST]...
#       [--user U[:G]] [--cmd JSON] [--entrypoint JSON] [--env K=V]... [--workdir DIR] [--label K=V]...
#
# --rootfs DIR   a folder copied to the image's / (owners, modes, links and xattrs kept)
# --add SRC:DEST a file or folder of this machine copied to DEST in the image (parents made)
# --ref NAME     the name stored in the archive (org.opencontainers.image.ref.name), e.g.
#                localhost/portable-lb/pause:3.10; `ctr images import` and skopeo use it
# --timestamp    seconds since the epoch (SOURCE_DATE_EPOCH): the image's creation time and every
#                file's mtime
# Prints the image's manifest digest (sha256:...) on stdout. Needs buildah (Debian's package).
set -euo pipefail
usage() { sed -n '9,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
out='' ref='' timestamp='' rootfs='' adds=() config=()
while [ $# -gt 0 ]; do
  case $1 in
  --out) out=$2 ;;
  --ref) ref=$2 ;;
  --timestamp) timestamp=$2 ;;
  --rootfs) rootfs=$2 ;;
  --add) adds+=("$2") ;;
  --user | --cmd | --entrypoint | --env | --label) config+=("$1" "$2") ;;
  --workdir) config+=(--workingdir "$2") ;;
  *) usage ;;
  esac
  shift 2 || usage
done
[ -n "$out" ] && [ -n "$ref" ] && [[ $timestamp =~ ^[0-9]+$ ]] || usage
[ -z "$rootfs" ] || [ -d "$rootfs" ] || { echo "ociImage: --rootfs $rootfs is not a folder" >&2; exit 2; }

storage=$(mktemp -d "${TMPDIR:-/tmp}/oci-image.XXXXXX")
trap 'rm -rf "$storage"' EXIT
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# --network none: buildah's default CNI network would make a bridge and iptables chains on the host;
# privateVarLib.sh: its blob-info cache would land in the host's /var/lib/containers.
b() { "$here/privateVarLib.sh" buildah --root "$storage/root" --runroot "$storage/run" --storage-driver vfs "$@"; }
export BUILDAH_ISOLATION=chroot
container=$(b from --quiet --network none scratch)
mnt=$(b mount "$container")
[ -z "$rootfs" ] || cp -a "$rootfs/." "$mnt/"
for add in "${adds[@]}"; do
  src=${add%%:*} dest=${add#*:}
  [ "$src" != "$add" ] && [ -e "$src" ] || { echo "ociImage: --add $add: want SRC:DEST with SRC existing" >&2; exit 2; }
  mkdir -p "$mnt$(dirname "$dest")"
  cp -a "$src" "$mnt$dest"
done
b umount "$container" >/dev/null
[ ${#config[@]} -eq 0 ] || b config "${config[@]}" "$container"
mkdir -p "$(dirname "$out")"
rm -f "$out.partial"
# Layers gzip-compressed (buildah leaves them raw unless asked), one timestamp everywhere, and no
# builder label (its version would make the digest depend on the machine's buildah).
b commit --quiet --format oci --disable-compression=false --identity-label=false --timestamp "$timestamp" --rm \
  "$container" "oci-archive:$out.partial:$ref" >/dev/null
mv "$out.partial" "$out"
tar -xOf "$out" index.json | grep -o '"digest":"sha256:[0-9a-f]*"' | head -n1 | cut -d'"' -f4
