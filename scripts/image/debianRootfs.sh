# The base of our Debian-based images (the LB image, the lab's flannel image): Debian bookworm's
# essential set plus the image's own package list, made by mmdebstrap from Debian's archive (the
# release, its updates and security updates). Sourced by their build scripts.
# SOURCE_DATE_EPOCH makes mmdebstrap's output reproducible for a given state of the archive; the
# packages' versions are in the image's SBOM. Documentation other than copyright files, man pages
# and translations are left out.

DEBIAN_MIRRORS=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)

# debian_packages FILE: the package names in FILE (one a line, # comments), comma-separated
debian_packages() { grep -v '^#' "$1" | paste -sd, -; }

# debian_rootfs DIR LOG PACKAGES_FILE: DIR must not exist
debian_rootfs() {
  # In a mount namespace of its own: mmdebstrap mounts /proc, /sys and /dev inside DIR while it
  # installs, and those mounts must go with it even when it is killed, never outlive it on the host.
  SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH unshare --mount --propagation private \
    mmdebstrap --quiet --variant=essential \
    --include="$(debian_packages "$3")" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    bookworm "$1" "${DEBIAN_MIRRORS[@]}" >"$2" 2>&1 || {
    tail -n 15 "$2" >&2
    return 1
  }
}
