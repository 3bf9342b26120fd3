#!/usr/bin/env bash
# Runs a command in a private mount namespace whose /var/lib is an empty tmpfs. containers/image
# (buildah, skopeo) run as root keep a blob-info cache in /var/lib/containers whatever storage they
# are given; here it lands in the tmpfs and goes with the namespace, so the host's stays untouched.
#
#   scripts/image/privateVarLib.sh COMMAND [ARGS...]
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
exec unshare --mount --propagation private -- sh -c 'mount -t tmpfs -o mode=755 tmpfs /var/lib && exec "$@"' sh "$@"
