# The LB image's base: Debian bookworm's essential set plus debian-packages, made by mmdebstrap from
# Debian's archive (the release, its updates and security updates). Sourced by build.sh.
# SOURCE_DATE_EPOCH makes mmdebstrap's output reproducible for a given state of the archive; the
# packages' versions are in the image's SBOM. Documentation other than copyright files, man pages
# and translations are left out.

DEBIAN_MIRRORS=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)

# debian_packages: the names in debian-packages, comma-separated
debian_packages() { grep -v '^#' "$(dirname "${BASH_SOURCE[0]}")/debian-packages" | paste -sd, -; }

# debian_rootfs DIR LOG: DIR must not exist
debian_rootfs() {
  # In a mount namespace of its own: mmdebstrap mounts /proc, /sys and /dev inside DIR while it
  # installs, and those mounts must go with it even when it is killed, never outlive it on the host.
  SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH unshare --mount --propagation private \
    mmdebstrap --quiet --variant=essential \
    --include="$(debian_packages)" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    bookworm "$1" "${DEBIAN_MIRRORS[@]}" >"$2" 2>&1 || {
    tail -n 15 "$2" >&2
    return 1
  }
}
